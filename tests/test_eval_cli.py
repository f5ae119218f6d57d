"""`perflsp eval`: figures, JSON keys, unlocated rows, bad labels files, and proof that the
measured columns never reach the predictor (scrambling them leaves every prediction unchanged).

The small labeled tree under tests/data/eval is synthetic (written for these tests)."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflsp.cli import cli
from perflsp.evaluation.labels import read_labels
from perflsp.evaluation.run import predict_rows
from perflsp.hardware import load_database

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "eval"
LABELS = DATA / "labels.csv"
SRC = DATA / "src"
STUDY = ROOT / "examples" / "gpus" / "rtx3080-study.toml"
MEASURED = ("sp_ai", "dp_ai", "int_ai", "traffic", "label", "executions", "labels_disagree", "location_status")
SCORE_KEYS = {"listed", "located", "analyzed", "accuracy", "balanced_accuracy", "confusion"}


def run_eval(*args: str, labels: Path = LABELS, src: Path = SRC):
    return CliRunner().invoke(cli, ["eval", "--labels", str(labels), "--src", str(src), "--gpu-file", str(STUDY),
                                    "--gpu", "rtx3080-study", *args])


def eval_json(*args: str, labels: Path = LABELS, src: Path = SRC) -> dict:
    result = run_eval("--json", *args, labels=labels, src=src)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def label_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def write_rows(path: Path, rows: list[dict[str, str]]) -> Path:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buffer.getvalue())
    return path


def scrambled(rows: list[dict[str, str]], seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for row in rows:
        row = dict(row)
        for column in ("sp_ai", "dp_ai", "int_ai", "traffic"):
            row[column] = f"{rng.uniform(0, 1e4):.6g}"
        row["label"] = rng.choice(["compute", "bandwidth"])
        row["executions"] = str(rng.randint(1, 9))
        row["labels_disagree"] = rng.choice(["true", "false"])
        row["location_status"] = rng.choice(["exact", "moved"])
        out.append(row)
    return out


def test_json_keys_and_figures(tmp_path):
    predictions_file = tmp_path / "predictions.json"
    report = eval_json("--predictions-out", str(predictions_file))
    assert SCORE_KEYS | {"by_language"} <= set(report)
    assert set(report["by_language"]) == {"cuda", "omp"}
    for language in report["by_language"].values():
        assert SCORE_KEYS <= set(language)
    predictions = json.loads(predictions_file.read_text())
    truths = [row["label"] for row in label_rows(LABELS)]
    assert report["listed"] == len(truths) == len(predictions) == 7
    assert report["located"] == sum(p["verdict"] is not None for p in predictions) == 5
    assert report["analyzed"] == sum(p["verdict"] in ("compute", "bandwidth") for p in predictions)
    # unlocated and unanalysed rows count as wrong
    assert report["accuracy"] == pytest.approx(sum(p["verdict"] == t for p, t in zip(predictions, truths)) / 7)
    recalls = []
    for cls in ("compute", "bandwidth"):
        mine = [p["verdict"] == cls for p, t in zip(predictions, truths) if t == cls]
        recalls.append(sum(mine) / len(mine))
    assert report["balanced_accuracy"] == pytest.approx(sum(recalls) / 2)
    assert sum(sum(row.values()) for row in report["confusion"].values()) == 7
    assert report["confusion"]["compute"].get("not located", 0) == 1
    assert report["by_language"]["omp"]["listed"] == 2 and report["by_language"]["cuda"]["listed"] == 5
    reasons = {(u["file"], u["kernel"]): u["reason"] for u in report["unanalyzed"]}
    assert reasons == {
        ("vadd-cuda/main.cu", "vsub"): "`vsub` not found at vadd-cuda/main.cu:5 (a kernel named vadd is there)",
        ("gone-cuda/main.cu", "gone"): "gone-cuda/main.cu: no such file",
    }


def test_clear_cases_are_classified(tmp_path):
    predictions_file = tmp_path / "predictions.json"
    eval_json("--predictions-out", str(predictions_file))
    verdicts = {(p["file"], p["kernel"]): p["verdict"] for p in json.loads(predictions_file.read_text())}
    assert verdicts[("vadd-cuda/main.cu", "vadd")] == "bandwidth"
    assert verdicts[("vadd-omp/main.cpp", "main@l14")] == "bandwidth"
    assert verdicts[("heavy-omp/main.cpp", "main@l11")] == "compute"
    assert verdicts[("poly-cuda/kernels.h", "poly")] == "compute"  # degree 256 from exe_args, launched in main.cu


def test_program_arguments_reach_the_engine(tmp_path):
    rows = label_rows(LABELS)
    for row in rows:
        if row["kernel"] == "poly":
            row["exe_args"] = "4"  # a degree-4 polynomial: 8 FLOP per 8 bytes
    labels = write_rows(tmp_path / "labels.csv", rows)
    out = tmp_path / "predictions.json"
    eval_json("--predictions-out", str(out), labels=labels)
    poly = next(p for p in json.loads(out.read_text()) if p["kernel"] == "poly")
    # 8 FLOP per element over 4 B read and 4 B written (of which a calibrated share reaches DRAM)
    assert poly["verdict"] == "bandwidth" and 1.0 <= poly["intensity"]["fp32"] <= 2.0
    for row in rows:
        if row["kernel"] == "poly":
            row["exe_args"] = "400"  # a hundred times the work per byte: compute-bound
    eval_json("--predictions-out", str(out), labels=write_rows(tmp_path / "labels400.csv", rows))
    heavy = next(p for p in json.loads(out.read_text()) if p["kernel"] == "poly")
    assert heavy["verdict"] == "compute"
    assert heavy["intensity"]["fp32"] == pytest.approx(100 * poly["intensity"]["fp32"], rel=0.01)


def test_scrambled_measured_columns_change_no_prediction(tmp_path):
    original, shuffled = tmp_path / "original.json", tmp_path / "shuffled.json"
    eval_json("--predictions-out", str(original))
    labels = write_rows(tmp_path / "scrambled.csv", scrambled(label_rows(LABELS), seed=7))
    eval_json("--predictions-out", str(shuffled), labels=labels)
    assert json.loads(original.read_text()) == json.loads(shuffled.read_text())


def test_text_output(tmp_path):
    result = run_eval("--show-misses", "3")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for expected in ("listed", "located", "analysed", "balanced accuracy", "confusion (all)", "confusion (cuda)",
                     "confusion (omp)", "not located or not analysed (2, counted as wrong):",
                     "gone-cuda/main.cu:3 gone — not located: gone-cuda/main.cu: no such file"):
        assert expected in out
    assert "\x1b[" not in out


def test_show_misses_lists_only_wrong_verdicts():
    report = eval_json("--show-misses", "10")
    for miss in report["misses"]:
        assert miss["verdict"] in ("compute", "bandwidth") and miss["verdict"] != miss["label"]
    assert "misses" not in eval_json()


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read"),
    ("target,language,kernel\nx,cuda,k\n", "not a labels CSV (missing column(s) file, line, label)"),
    ("target,language,kernel,file,line,label\nx,cuda,k,a.cu,twelve,compute\n", ":2: bad row"),
])
def test_bad_labels_files_are_one_line_errors(tmp_path, content, message):
    labels = tmp_path / "labels.csv"
    if content is not None:
        labels.write_text(content)
    result = run_eval(labels=labels)
    assert result.exit_code == 2
    assert result.stderr.startswith("perflsp: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


def test_unknown_gpu():
    result = CliRunner().invoke(cli, ["eval", "--labels", str(LABELS), "--src", str(SRC), "--gpu", "rtx3080-studdy"])
    assert result.exit_code == 2
    assert "unknown GPU 'rtx3080-studdy'" in result.stderr


def test_compile_commands_define_reaches_the_engine(tmp_path):
    src = tmp_path / "src"
    (src / "def-cuda").mkdir(parents=True)
    (src / "def-cuda" / "main.cu").write_text(
        "__global__ void spin(float *x)\n{\n    float v = x[threadIdx.x];\n"
        "    for (int s = 0; s < STEPS; ++s)\n        v = v * 0.999f + 0.001f;\n    x[threadIdx.x] = v;\n}\n"
        "int main() { float *x; spin<<<4096, 256>>>(x); return 0; }\n")
    labels = write_rows(tmp_path / "labels.csv", [{
        "target": "def-cuda", "language": "cuda", "kernel": "spin", "file": "def-cuda/main.cu", "line": "1",
        "label": "compute", "block": "(256, 1, 1)", "grid": "(4096, 1, 1)", "exe_args": ""}])
    # recorded on another machine: re-rooted under --src by the file's trailing path
    (tmp_path / "compile_commands.json").write_text(json.dumps([{
        "directory": "/elsewhere/build/def-cuda", "file": "/elsewhere/build/def-cuda/main.cu",
        "arguments": ["nvcc", "-DSTEPS=4096", "-c", "main.cu"]}]))
    without = tmp_path / "without.json"
    eval_json("--predictions-out", str(without), labels=labels, src=src)
    with_db = tmp_path / "with.json"
    eval_json("--predictions-out", str(with_db), "--compile-commands", str(tmp_path / "compile_commands.json"),
              labels=labels, src=src)
    fp32_with = json.loads(with_db.read_text())[0]["intensity"]["fp32"]
    assert json.loads(with_db.read_text())[0]["verdict"] == "compute"
    assert fp32_with > json.loads(without.read_text())[0]["intensity"].get("fp32", 0.0)


# --- the real dev labels (skipped without the benchmark sources) ------------------------------


@pytest.mark.eval
def test_dev_labels_run_and_every_kernel_is_located(eval_data):
    labels, src = eval_data
    args = ["eval", "--labels", str(labels), "--src", str(src), "--gpu-file", str(STUDY), "--gpu", "rtx3080-study",
            "--json"]
    compile_db = src.parent / "compile_commands.json"
    if compile_db.is_file():
        args += ["--compile-commands", str(compile_db)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    print(f"listed {report['listed']} located {report['located']} analysed {report['analyzed']} "
          f"accuracy {report['accuracy']:.3f} balanced {report['balanced_accuracy']:.3f} "
          f"confusion {report['confusion']} in {report['elapsed_s']} s")
    for language, s in report["by_language"].items():
        print(f"  {language}: accuracy {s['accuracy']:.3f} balanced {s['balanced_accuracy']:.3f} {s['confusion']}")
    assert report["located"] == report["listed"] == len(read_labels(labels))


@pytest.mark.eval
def test_dev_labels_scrambled_sample_predicts_the_same(eval_data, tmp_path):
    labels, src = eval_data
    rows = random.Random(3).sample(label_rows(labels), 40)
    gpu = load_database([STUDY]).get("rtx3080-study")
    original = predict_rows([r for r, _ in read_labels(write_rows(tmp_path / "a.csv", rows))], src, gpu)
    shuffled = predict_rows([r for r, _ in read_labels(write_rows(tmp_path / "b.csv", scrambled(rows, 11)))], src, gpu)
    assert [(p.verdict, p.reason, p.intensity) for p in original] == [(p.verdict, p.reason, p.intensity) for p in shuffled]


# ---------------------------------------------------------------------------------------------
# --llm: the LLM path on the same rows, against a loopback OpenAI-compatible server


def _llm_env(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PERFLSP_CONFIG", str(tmp_path / "no-user-config.toml"))  # never the developer's own
    monkeypatch.delenv("PERFLSP_CACHE_DIR", raising=False)


def _llm_args(url: str, tmp_path: Path) -> list[str]:
    return ["--llm", "--provider", "openai", "--base-url", url, "--model", "fake-model", "--no-cache",
            "--workspace", str(tmp_path)]


def test_llm_json_scores_and_tokens_per_kernel(tmp_path, monkeypatch):
    from tests.llm.llm_fakes import ScriptedServer, Wire

    _llm_env(tmp_path, monkeypatch)
    wire = Wire("openai")
    answer = json.dumps({"verdict": "bandwidth", "confidence": 0.7, "rationale": "Scripted.", "factors": [],
                         "proposals": {"block_size": None, "launch_bounds": None, "num_teams": None,
                                       "thread_limit": None, "code_changes": []}})
    with ScriptedServer(lambda record: wire.reply(answer)) as server:
        data = eval_json(*_llm_args(server.url, tmp_path), "--limit", "3")
        assert len(server.requests) == 3  # --limit 3: the first three labeled kernels, all located
    assert data["listed"] == 3
    llm = data["llm"]
    assert (llm["listed"], llm["asked"], llm["llm_answers"], llm["static_fallbacks"]) == (3, 3, 3, 0)
    assert llm["model"] == "fake-model" and llm["endpoint"] == server.url
    # every answer says bandwidth: right for vadd, wrong for mmul and poly (compute)
    assert llm["final"]["accuracy"] == pytest.approx(1 / 3)
    tokens = llm["tokens_per_kernel"]
    assert tokens["prompt"] == {"kernels": 3, "median": 120.0, "total": 360, "max": 120}
    assert tokens["completion"]["total"] == 135 and tokens["estimated_prompt"]["kernels"] == 3
    assert [(r["kernel"], r["prompt_tokens"], r["completion_tokens"]) for r in llm["rows"]] == \
        [("vadd", 120, 45), ("mmul", 120, 45), ("poly", 120, 45)]


def test_llm_text_reports_tokens_and_fallbacks(tmp_path, monkeypatch):
    from tests.llm.llm_fakes import closed_port_url

    _llm_env(tmp_path, monkeypatch)
    result = run_eval(*_llm_args(closed_port_url(), tmp_path), "--limit", "2", "--timeout", "5")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "LLM path on" in out and "kernels: 2 listed, 2 asked, 0 answered by the LLM" in out
    assert "tokens per kernel (endpoint's count)" in out and "fallback (2x): cannot connect to" in out


def test_llm_without_a_configured_endpoint_says_how(tmp_path, monkeypatch):
    _llm_env(tmp_path, monkeypatch)
    result = run_eval("--llm", "--workspace", str(tmp_path))
    assert result.exit_code == 2
    assert "LLM not used" in result.stderr and "perflsp eval --llm" in result.stderr

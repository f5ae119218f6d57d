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
MEASURED = ("sp_ai", "dp_ai", "int_ai", "traffic", "label", "executions", "labels_disagree", "location_status",
            "dram_bytes", "fp32_ops", "fp64_ops", "int_ops", "xtime_ns")
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
        for column in ("dram_bytes", "fp32_ops", "fp64_ops", "int_ops", "xtime_ns"):
            row[column] = f"{rng.choice([0.0, rng.uniform(0, 1e5), rng.uniform(0, 1e12)]):.6g}"
        out.append(row)
    return out


def test_json_keys_and_figures(tmp_path):
    predictions_file = tmp_path / "predictions.json"
    report = eval_json("--predictions-out", str(predictions_file))
    assert SCORE_KEYS | {"by_language"} <= set(report)
    assert set(report["by_language"]) == {"cuda", "omp"}
    for language in report["by_language"].values():
        assert set(language) >= SCORE_KEYS
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
    # 8 FLOP per element over 4 B read and 4 B written (of which a calibrated share reaches DRAM;
    # the study card's display adds a little over the run time)
    assert poly["verdict"] == "bandwidth" and 0.9 <= poly["intensity"]["fp32"] <= 2.0
    for row in rows:
        if row["kernel"] == "poly":
            row["exe_args"] = "400"  # a hundred times the work per byte: compute-bound
    eval_json("--predictions-out", str(out), labels=write_rows(tmp_path / "labels400.csv", rows))
    heavy = next(p for p in json.loads(out.read_text()) if p["kernel"] == "poly")
    assert heavy["verdict"] == "compute"
    assert heavy["intensity"]["fp32"] == pytest.approx(100 * poly["intensity"]["fp32"], rel=0.01)


@pytest.mark.parametrize("mode", [[], ["--editor"]])
def test_scrambled_measured_columns_change_no_prediction(tmp_path, mode):
    original, shuffled = tmp_path / "original.json", tmp_path / "shuffled.json"
    eval_json("--predictions-out", str(original), *mode, labels=write_rows(tmp_path / "measured.csv", with_measured()))
    labels = write_rows(tmp_path / "scrambled.csv", scrambled(label_rows(LABELS), seed=7))
    assert set(MEASURED) <= set(label_rows(labels)[0])
    eval_json("--predictions-out", str(shuffled), *mode, labels=labels)
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


HEADER = "target,language,kernel,file,line,label\n"


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read"),
    ("target,language,kernel\nx,cuda,k\n", ":1: not a labels CSV (missing column(s) file, line, label)"),
    (HEADER + "x,cuda,k,a.cu,twelve,compute\n", ":2: `line` must be a line number, not 'twelve'"),
    # a broken quote: the file, the line it opens on, and what is wrong
    (HEADER + "a,cuda,k,a.cu,3,compute\nb,cuda,\"k2,b.cu,5,compute\nc,cuda,k3,c.cu,7,bandwidth\n",
     ":3: a quoted field opened on this line is never closed (the file ends at line 4)"),
    (HEADER + "a,cuda,k,a.cu,3,compute\nb,cuda,\"k2,b.cu,5,compute\nc,cuda,k3\",c.cu,7,bandwidth\n",
     ":3: a quoted field runs from this line to line 4: a quote is not closed?"),
    (HEADER + "a,cuda,\"k\"x,a.cu,3,compute\n", ":2: a quote ends a field on this line but text follows it"),
    (HEADER + "a,cuda,k,a.cu,3\n", ":2: 5 fields, the header has 6"),
    (HEADER + "a,cuda,k,a.cu,3,memory\n", ":2: label 'memory' is not one of compute, bandwidth"),
])
def test_bad_labels_files_are_one_line_errors(tmp_path, content, message):
    labels = tmp_path / "labels.csv"
    if content is not None:
        labels.write_text(content)
    result = run_eval(labels=labels)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"perflsp: error: {labels}") and message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


def test_labels_that_match_no_kernel_are_an_error_not_a_score(tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text(HEADER + "a-cuda,cuda,k,a-cuda/main.cu,3,compute\nb-omp,omp,r,b-omp/main.cpp,9,bandwidth\n")
    result = run_eval(labels=labels)
    assert result.exit_code == 2 and result.stdout == ""
    assert "none of the 2 labeled kernel(s)" in result.stderr and "a-cuda/main.cu:3 k" in result.stderr
    assert "check --src" in result.stderr and result.stderr.count("\n") == 1


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
@pytest.mark.parametrize("mode", ["launch-given", "editor"])
def test_dev_labels_scrambled_sample_predicts_the_same(eval_data, tmp_path, mode):
    labels, src = eval_data
    rows = random.Random(3).sample(label_rows(labels), 40)
    gpu = load_database([STUDY]).get("rtx3080-study")
    original = predict_rows([r for r, _ in read_labels(write_rows(tmp_path / "a.csv", rows))], src, gpu, mode=mode)
    shuffled = predict_rows([r for r, _ in read_labels(write_rows(tmp_path / "b.csv", scrambled(rows, 11)))], src, gpu,
                            mode=mode)

    def seen(p):
        return (p.verdict, p.reason, p.intensity, p.confidence, p.totals)

    assert [seen(p) for p in original] == [seen(p) for p in shuffled]


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


# ---------------------------------------------------------------------------------------------
# --editor, the reliability table, tiny runs, and what a prediction carries

# measured columns for the synthetic rows (the answers: only the scorer may read them)
MEASURED_VALUES = {
    "vadd": ("12582912", "1048576", "0", "9437184", "16500"),
    "mmul": ("2097152", "67108864", "0", "20000000", "50000"),
    "poly": ("32768", "268435456", "0", "40000000", "80000"),  # a tiny run: under 64 KiB of DRAM traffic
    "main@l14": ("12582912", "1048576", "0", "12000000", "16500"),
    "main@l11": ("8192", "8388608", "0", "2000000", "9000"),  # tiny too
    "vsub": ("", "", "", "", ""),
    "gone": ("1000000", "0", "0", "1000", "1000"),
}


def with_measured() -> list[dict[str, str]]:
    rows = label_rows(LABELS)
    for row in rows:
        values = MEASURED_VALUES[row["kernel"]]
        row.update(zip(("dram_bytes", "fp32_ops", "fp64_ops", "int_ops", "xtime_ns"), values))
    return rows


def check_json(path: Path, *args: str) -> dict:
    result = CliRunner().invoke(cli, ["check", str(path), "--gpus-file", str(STUDY), "--gpu", "rtx3080-study", "--json",
                                      "--fail-on", "none", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_editor_mode_gives_exactly_what_check_shows(tmp_path):
    out = tmp_path / "predictions.json"
    report = eval_json("--editor", "--predictions-out", str(out))
    assert report["mode"] == "editor"
    for prediction in json.loads(out.read_text()):
        if prediction["verdict"] is None:
            continue
        checked = check_json(SRC / prediction["file"])
        kernels = checked["files"][0]["kernels"]
        kernel = next(k for k in kernels if k["line"] == prediction["line"])
        estimate = kernel["estimates"][0]
        assert prediction["verdict"] == estimate["verdict"], prediction["kernel"]
        assert prediction["confidence"] == pytest.approx(estimate["confidence"])
        assert prediction["intensity"] == pytest.approx({k: v for k, v in estimate["intensity"].items() if v is not None},
                                                        rel=1e-5)
        assert prediction["totals"]["dram_bytes"] == pytest.approx(kernel["facts"]["dram_bytes"])
        assert prediction["totals"]["fp32"] == pytest.approx(kernel["facts"]["total"]["fp32"])
        assert prediction["totals"]["work_items"] == kernel["facts"]["work_items"]


def test_editor_mode_ignores_launch_shape_and_program_arguments(tmp_path):
    rows = label_rows(LABELS)
    given_a, given_b, editor_a, editor_b = (tmp_path / f"{n}.json" for n in ("ga", "gb", "ea", "eb"))
    for row in rows:
        if row["kernel"] == "poly":
            row["exe_args"] = "4"
    four = write_rows(tmp_path / "four.csv", rows)
    for row in rows:
        row["block"] = row["grid"] = ""
        if row["kernel"] == "poly":
            row["exe_args"] = "400"
    other = write_rows(tmp_path / "other.csv", rows)
    eval_json("--predictions-out", str(given_a), labels=four)
    eval_json("--predictions-out", str(given_b), labels=other)
    assert json.loads(given_a.read_text()) != json.loads(given_b.read_text())  # launch-given mode reads them
    eval_json("--editor", "--predictions-out", str(editor_a), labels=four)
    eval_json("--editor", "--predictions-out", str(editor_b), labels=other)
    assert json.loads(editor_a.read_text()) == json.loads(editor_b.read_text())
    # poly is defined in kernels.h and launched in main.cu: check on kernels.h takes the launch
    # from its includer, as the editor does, not the production size
    from perflsp.analysis.costs import CostModel

    poly = next(p for p in json.loads(editor_a.read_text()) if p["kernel"] == "poly")
    assert poly["totals"]["work_items"] != CostModel().assumed_problem_size


def test_mode_is_named_in_text_and_json():
    assert eval_json()["mode"] == "launch-given"
    text = run_eval("--editor").stdout
    assert "mode: editor" in text and "pipeline of `perflsp check FILE`" in text
    assert "mode: launch-given" in run_eval().stdout


def test_predictions_carry_confidence_and_totals(tmp_path):
    out = tmp_path / "predictions.json"
    eval_json("--predictions-out", str(out))
    predictions = json.loads(out.read_text())
    for p in predictions:
        assert "label" not in p and not set(MEASURED) & set(p)
        if p["verdict"] is None:
            assert p["confidence"] is None and p["totals"] is None
            continue
        assert 0.0 <= p["confidence"] <= 1.0
        assert set(p["totals"]) == {"dram_bytes", "fp32", "fp64", "fp16", "int32", "work_items", "degenerate"}
    vadd = next(p for p in predictions if p["kernel"] == "vadd")
    # 1,048,576 elements: two float loads and one store each
    assert vadd["totals"]["work_items"] >= 1048576 and vadd["totals"]["fp32"] >= 1048576
    assert vadd["totals"]["degenerate"] is False


def test_reliability_table_matches_the_predictions(tmp_path):
    out = tmp_path / "predictions.json"
    report = eval_json("--predictions-out", str(out))
    table = report["reliability"]
    predictions = json.loads(out.read_text())
    truths = {(r["file"], r["kernel"]): r["label"] for r in label_rows(LABELS)}
    analysed = [(p["confidence"], p["verdict"] == truths[(p["file"], p["kernel"])]) for p in predictions
                if p["verdict"] in ("compute", "bandwidth")]
    assert table["analyzed"] == len(analysed) == sum(b["count"] for b in table["bins"])
    assert [(b["low"], b["high"]) for b in table["bins"]] == [(0.0, 0.5), (0.5, 0.6), (0.6, 0.7), (0.7, 0.8),
                                                             (0.8, 0.9), (0.9, 1.0)]
    for b in table["bins"]:
        members = [ok for c, ok in analysed if b["low"] <= c < b["high"] or (b["high"] == 1.0 and c == 1.0)]
        assert b["count"] == len(members)
        if members:
            assert b["accuracy"] == pytest.approx(sum(members) / len(members), abs=1e-4)
            assert b["gap"] == pytest.approx(b["accuracy"] - b["mean_confidence"], abs=2e-4)
    text = run_eval().stdout
    assert "reliability (" in text and "[0.9, 1.0]" in text and "expected calibration error" in text


def test_reliability_bins_by_hand():
    from perflsp.evaluation.labels import Answer, KernelRow
    from perflsp.evaluation.run import Prediction, reliability

    row = KernelRow("t", "cuda", "k", "", "f.cu", 1, None, None, "")
    cases = [(0.55, "compute", "compute"), (0.58, "bandwidth", "compute"), (0.95, "bandwidth", "bandwidth"),
             (1.0, "compute", "compute"), (0.3, "compute", "bandwidth"), (0.9, "uncertain", "compute")]
    pairs = [(Prediction(row, v, confidence=c), Answer(label)) for c, v, label in cases]
    table = reliability(pairs)
    by_low = {b.low: b for b in table.bins}
    assert table.analyzed == 5  # the uncertain verdict is not scored for calibration
    assert (by_low[0.5].count, by_low[0.5].accuracy) == (2, 0.5)
    assert by_low[0.5].gap == pytest.approx(0.5 - 0.565)
    assert (by_low[0.9].count, by_low[0.9].accuracy) == (2, 1.0)  # 1.0 lands in the closed last bin
    assert (by_low[0.0].count, by_low[0.0].accuracy) == (1, 0.0)
    assert by_low[0.7].count == 0 and by_low[0.7].accuracy is None and by_low[0.7].gap is None
    assert table.median_confidence_right == pytest.approx(0.95)
    assert table.median_confidence_wrong == pytest.approx(0.44)


def test_tiny_runs_are_scored_apart_in_editor_mode(tmp_path):
    labels = write_rows(tmp_path / "measured.csv", with_measured())
    report = eval_json("--editor", labels=labels)
    tiny = report["tiny_runs"]
    assert tiny["threshold_bytes"] == 65536 and tiny["tiny"] == 2  # poly and main@l11
    assert tiny["with"]["listed"] == 7 and tiny["without"]["listed"] == 5 and tiny["only"]["listed"] == 2
    assert tiny["with"]["balanced_accuracy"] == report["balanced_accuracy"]
    assert tiny["without_by_language"]["omp"]["listed"] == 1
    assert "tiny_runs" not in eval_json(labels=labels)  # launch-given mode: not reported
    assert "tiny_runs" not in eval_json("--editor")  # no dram_bytes column: nothing to split on
    text = run_eval("--editor", labels=labels).stdout
    assert "tiny runs (under 64 KiB of measured DRAM traffic: 2 labels) scored apart" in text
    assert "without tiny runs" in text and "tiny runs only" in text


def test_measured_columns_reach_only_the_answer(tmp_path):
    pairs = read_labels(write_rows(tmp_path / "measured.csv", with_measured()))
    row, answer = pairs[0]
    assert (answer.dram_bytes, answer.fp32_ops, answer.int_ops) == (12582912.0, 1048576.0, 9437184.0)
    assert not any(str(v) in ("12582912", "9437184") for v in (row.exe_args, row.signature))
    assert pairs[5][1].dram_bytes is None  # empty cell

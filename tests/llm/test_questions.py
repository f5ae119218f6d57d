"""question_for: the question carries the kernel, its callees, the definitions they use, launch
facts and the engine's evidence; never the rest of the file, never its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflsp.analysis.engine import AnalysisOptions, analyze
from perflsp.analysis.models import Estimate
from perflsp.analysis.notes import Note, NoteKind, NoteSource, texts
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.program import SourceFile, program_model
from perflsp.llm.prompts import PromptRenderer
from perflsp.llm.questions import device_callees, question_for
from perflsp.source.parser import parse
from perflsp.source.positions import LineIndex

ROOT = Path(__file__).resolve().parents[2]
GPU = load_database().get("RTX 3080")


def analysed(path: Path | str, text: str | None = None):
    path = Path(path)
    data = text.encode() if text is not None else path.read_bytes()
    tree = parse(data)
    env = IncludeResolver().env_for(path if text is None else None, data)
    kernels = extract(data, tree, str(path), env=env)
    report = analyze(data, tree, kernels, [GPU], AnalysisOptions(include_env=env))
    return data, tree, kernels, report


def question(path, name, text=None, task="verdict"):
    data, tree, kernels, report = analysed(path, text)
    (found,) = [r for r in report.kernels if r.name == name or getattr(r.kernel, "function", None) == name]
    return question_for(found, found.estimates[0], GPU, data, kernels, task, tree=tree), found, data


def test_kernel_with_transitive_callees_and_definitions():
    q, report, _ = question(ROOT / "examples/cuda/activations.cu", "bias_silu")
    assert q.name == "bias_silu" and q.language == "cuda" and q.kernel_hash == report.kernel.body_hash
    assert q.kernel_source.splitlines()[0] == "__global__ void __launch_bounds__(BLOCK)"
    assert q.first_line == report.kernel.span.line
    # bias_silu calls silu, which calls sigmoid: both come along, direct callee first
    assert [f.name for f in q.device_functions] == ["silu", "sigmoid"]
    assert "__expf(-x)" in q.device_functions[1].source
    # the macros its text (and its launch sites) use, nothing else of the file
    assert [d.source for d in q.definitions] == ["#define BLOCK 256", "#define FIXED_GRID 1024"]
    everything = q.model_dump_json()
    for absent in ("int main", "cudaMalloc", "#include", "hbias", "activations.cu\\\"", "Bias + SiLU"):
        assert absent not in everything.replace(q.kernel_id, ""), absent


def test_launch_sites_carry_folded_values_and_no_line_numbers():
    q, _, _ = question(ROOT / "examples/cuda/activations.cu", "bias_silu")
    fixed, occupancy_api = q.launch_sites
    assert fixed.text == "bias_silu<<<FIXED_GRID, BLOCK>>>(rows, cols, din, dbias, dout)"
    assert fixed.values == {"grid": "1024", "block": "256", "rows": "4096", "cols": "1024"}
    # the block the occupancy API picks at run time is unknowable: said so, not guessed
    assert occupancy_api.values["block"] == "unknown" and occupancy_api.values["grid"] == "unknown"


def test_unrelated_kernels_and_main_stay_out():
    q, _, _ = question(ROOT / "examples/cuda/nbody.cu", "nbody_accel")
    assert [f.name for f in q.device_functions] == ["body_body_accel"]
    assert {d.name for d in q.definitions} == {"BLOCK", "SOFTENING2"}
    text = "\n".join(m.content for m in PromptRenderer().render(q).messages)
    assert "nbody_integrate" not in text and "main(" not in text and "nbody.cu" not in text
    assert "grid = 256" in text and "n = 65536" in text and "dt = 0.01" in text


def test_listing_numbers_map_to_file_lines():
    q, _, data = question(ROOT / "examples/cuda/nbody.cu", "nbody_accel")
    file_lines = data.decode().splitlines()
    listing = PromptRenderer().render(q).messages[-1].content.split("```cuda\n", 1)[1].split("\n```", 1)[0]
    for entry in listing.splitlines():
        number, code = entry.split(" ", 1)
        # comments and indentation are left out; the code on the line is the file's
        assert code in file_lines[q.first_line + int(number) - 2], entry
    # the engine's loop facts point at listing lines too
    loops = [e for e in q.static.evidence if e.startswith("loop at line")]
    assert loops and all("for (" in file_lines[q.first_line + int(e.split()[3].rstrip(":")) - 2] for e in loops)


def test_openmp_region_is_named_by_its_function_without_its_line():
    q, report, _ = question(ROOT / "examples/openmp/saxpy_omp.cpp", "saxpy")
    assert q.language == "omp" and q.name == "saxpy" and report.name.startswith("saxpy@l")
    assert q.kernel_source.startswith("#pragma omp target teams distribute parallel for")
    assert q.kernel_source.splitlines()[-1] == "y[i] = a * x[i] + y[i];"
    (clauses,) = q.launch_sites
    assert clauses.values["thread_limit"] == "256" and "num_teams" in clauses.text
    assert [d.source for d in q.definitions] == ["#define THREADS 256"]
    # nothing of main() travels (the kernel id, a cache key, carries the path and is not sent)
    sent = q.model_dump(exclude={"kernel_id"})
    assert "int main" not in str(sent) and "main(" not in str(sent)


SYNTHETIC = """
#define TILE 32
#define UNUSED_MACRO 7
__constant__ float coeff[TILE];
typedef float real;
__device__ float leaf(float x) { return x * coeff[0]; }
__device__ float middle(float x) { return leaf(x) + 1.0f; }
__device__ float top(float x) { return middle(x) * 2.0f; }
__device__ float stranger(float x) { return x - 1.0f; }
__device__ int ping(int n);
__device__ int pong(int n) { return n > 0 ? ping(n - 1) : 0; }
__device__ int ping(int n) { return n > 0 ? pong(n - 1) : 1; }

__global__ void kern(real *out, int n)
{
    // stranger(x) is only mentioned in this comment; "middle(" in a string does not count either
    int i = blockIdx.x * TILE + threadIdx.x;
    if (i < n) out[i] = top((float)i) + ping(i);
    printf("middle(%d)\\n", i);
}

int main() { float *d; kern<<<4, TILE>>>(d, 128); return 0; }
"""


def test_synthetic_call_graph_recursion_and_comments(tmp_path):
    path = tmp_path / "syn.cu"
    q, _, _ = question(path, "kern", SYNTHETIC)
    assert [f.name for f in q.device_functions] == ["top", "ping", "middle", "pong", "leaf"]
    assert "stranger" not in q.model_dump_json()
    assert "comment" not in q.kernel_source  # comments are not sent
    names = [d.name for d in q.definitions]
    assert names == ["TILE", "coeff", "real"] and "UNUSED_MACRO" not in q.model_dump_json()
    # folded values the call does not spell out already; a literal argument is not repeated
    assert q.launch_sites[0].values == {"grid": "4", "block": "32"}


def test_device_callees_are_the_calls_the_model_finds():
    """Callees come from the program model's call index: calls of the tree, breadth first in the
    order of their first call; a name in a comment, a string or a declaration is no call."""
    src = (b"__device__ float leaf(float x) { return x * 2; }\n"
           b"__device__ float mid(float x) { return leaf(x) + 1; }\n"
           b"__device__ float other(float x) { return x; }\n"
           b"__device__ float unused(float x) { return x; }\n"
           b"__global__ void k(float *y) {\n"
           b"  // unused(y[0]) in a comment\n"
           b"  const char *s = \"unused(\";\n"
           b"  float other(float);\n"
           b"  y[0] = mid(y[0]) + other(y[1]);\n"
           b"}\n")
    tree = parse(src)
    kernels = extract(src, tree, "c.cu")
    model = program_model(SourceFile(src, tree, LineIndex(src), kernels, None))
    kernel = next(k for k in kernels.kernels if k.name == "k")
    assert [f.name for f in device_callees(model, kernel)] == ["mid", "other", "leaf"]


def test_assumptions_use_listing_lines(tmp_path):
    text = ("__global__ void k(float *x, const int *len, int n)\n{\n  int i = threadIdx.x;\n"
            "  for (int j = 0; j < len[i]; ++j)\n    x[i] += 1.0f;\n}\n")
    q, report, _ = question(tmp_path / "a.cu", "k", "\n\n\n" + text)
    file_mentions = [a for a in texts(report.facts.assumptions) if "line 7" in a]
    assert file_mentions, texts(report.facts.assumptions)  # the engine names the file line of the loop
    assert any("line 4" in a for a in q.static.assumptions) and not any("line 7" in a for a in q.static.assumptions)


def test_uncertain_estimate_is_not_presented_as_a_verdict(tmp_path):
    _, _, kernels, report = analysed(tmp_path / "u.cu", "__global__ void k(float *x) { x[0] = 1.0f; }\n")
    found = report.kernels[0]
    estimate = found.estimates[0]
    uncertain = Estimate(estimate.gpu, "uncertain", None, 0.0, {}, estimate.ridge, None, None,
                         [Note(NoteKind.UNCERTAIN, NoteSource.SOURCE, "the kernel's definition could not be parsed")],
                         "", "static")
    data = b"__global__ void k(float *x) { x[0] = 1.0f; }\n"
    q = question_for(found, uncertain, GPU, data, kernels)
    assert q.static.confidence == 0.0 and "could not analyse" in q.static.evidence[0]
    assert q.static.intensity_flop_per_byte == {}


@pytest.mark.parametrize("task", ["verdict", "explain", "launch_params"])
def test_every_example_kernel_renders_within_budget(task):
    renderer = PromptRenderer()
    for path in sorted((ROOT / "examples").rglob("*.c*")):
        if path.suffix not in (".cu", ".cpp"):
            continue
        data, tree, kernels, report = analysed(path)
        for found in report.kernels:
            q = question_for(found, found.estimates[0], GPU, data, kernels, task, tree=tree)
            prompt = renderer.render(q)
            assert prompt.trimmed == () and prompt.estimated_tokens < 2000, (path, found.name)
            assert str(path) not in "".join(m.content for m in prompt.messages)


def test_unanalysed_callees_come_from_the_records(tmp_path):
    text = ("__global__ void k(float *x, int n)\n{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (i < n) x[i] = warp(x[i]) + blend(x[i], 2.0f) + warp(1.0f);\n}\n"
            "int main() { float *x; k<<<4096, 256>>>(x, 1 << 20); }\n")
    q, report, _ = question(tmp_path / "a.cu", "k", text)
    calls = [n for n in report.facts.evidence if n.kind == NoteKind.UNANALYSED_CALL]
    assert [(n.subject, n.source) for n in calls] == [("warp", NoteSource.SOURCE), ("blend", NoteSource.SOURCE)]
    # one line for all of them, in the order the walk met them; no line per call
    assert "calls not analysed (definitions not visible): `warp`, `blend`" in q.static.evidence
    assert not any(e.startswith("call to ") for e in q.static.evidence)


def test_a_note_is_merged_by_its_kind_not_by_its_wording(tmp_path):
    text = ("__global__ void k(float *x, int n)\n{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (i < n) x[i] = 2.0f * x[i];\n}\nint main() { float *x; k<<<4096, 256>>>(x, 1 << 20); }\n")
    data, tree, kernels, report = analysed(tmp_path / "a.cu", text)
    (found,) = report.kernels
    # a callee named by its record alone (its sentence says something else), and a sentence that
    # reads like an unanalysed call but is another kind of note
    found.facts.evidence += [Note(NoteKind.UNANALYSED_CALL, NoteSource.SOURCE, "a callee hidden behind a macro",
                                  subject="hidden"),
                             Note(NoteKind.SOURCE_COUNTS, NoteSource.SOURCE,
                                  "call to `fake` not analysed (definition not visible)")]
    q = question_for(found, found.estimates[0], GPU, data, kernels, tree=tree)
    assert "calls not analysed (definitions not visible): `hidden`" in q.static.evidence
    assert "call to `fake` not analysed (definition not visible)" in q.static.evidence


def test_a_verdict_question_quotes_the_dram_remarks_from_the_facts(tmp_path):
    text = ("__global__ void k(float *x)\n{\n  x[threadIdx.x] = 1.0f;\n}\n"
            "int main() { float *x; k<<<1, 32>>>(x); }\n")
    q, report, _ = question(tmp_path / "a.cu", "k", text)
    facts = report.facts
    (floor,) = facts.dram_remarks  # 128 B written: below the per-launch floor
    assert floor.startswith("at least") and facts.dram_note.endswith("; " + floor)
    (dram,) = [e for e in q.static.evidence if e.startswith("DRAM: ")]
    assert dram.startswith("DRAM: about ") and dram.endswith("; " + floor)

"""A large document's first publication comes from the top of its text (kernels/prefix.py,
server/opening.py): it comes before the complete one and holds only kernels whose verdicts the
complete publication gives too; a small document publishes once, as before."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.protocol import default_converter

from perflsp.analysis.reader import ReadContext
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.prefix import MIN_TEXT_BYTES, PREFIX_BYTES, PREFIX_DEFINITIONS, cut_at, read_prefix
from perflsp.server import opening
from perflsp.server.config import Layer, Origin, ResolvedConfig, resolve
from perflsp.server.oneshot import analyse_text, diagnostic_keys
from tests.server.lsp_session import EXAMPLES, roofline, session

TOP = """#include <cuda_runtime.h>

#define BLOCK 256

__device__ float later_helper(float x);

__global__ void first_standalone(float *out, const float *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = 0.5f * in[i] + out[i];
    }
}

__global__ void calls_later_helper(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        a[i] = later_helper(a[i]);
    }
}

__global__ void launched_later(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = in[i] * in[i];
    }
}

__device__ float twice(float x)
{
    return 2.0f * x;
}

__global__ void calls_local_helper(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        a[i] = twice(a[i]);
    }
}

"""
# a large table between the kernels and the code that completes them: the prefix ends before it
FILLER = ("static const float coefficients[] = {\n"
          + ",\n".join(", ".join(f"{(i * 7 + j) % 97}.25f" for j in range(10)) for i in range(1200)) + "\n};\n\n")
# defined after the cut: the body the analysis of `calls_later_helper` reads (a long loop), and
# the launch that gives `launched_later` its launch shape
BOTTOM = """__device__ float later_helper(float x)
{
    float acc = x;
    for (int k = 0; k < 4096; ++k) {
        acc = acc * 1.0001f + 0.5f;
    }
    return acc;
}

int main()
{
    const int n = 1 << 24;
    float *d_in, *d_out;
    cudaMalloc(&d_in, n * sizeof(float));
    cudaMalloc(&d_out, n * sizeof(float));
    launched_later<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(d_in, d_out, n);
    cudaDeviceSynchronize();
    return 0;
}
"""
TEXT = TOP + FILLER + BOTTOM
STANDALONE = {"first_standalone", "calls_local_helper"}


def config() -> ResolvedConfig:
    return resolve([Layer(Origin.INIT_OPTIONS, "test", {"gpus": ["h100"]})])


def verdicts(diagnostics: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Roofline diagnostics (JSON) by kernel and GPU."""
    return {(d["data"]["kernel"], d["data"]["gpu"]): d for d in diagnostics
            if (d.get("data") or {}).get("kind") == "roofline"}


def complete_json(text: str, path: Path) -> list[dict[str, Any]]:
    """The complete analysis (`perflsp check`'s) as published JSON."""
    snap = analyse_text(text, path.as_uri(), config(), path=str(path))
    return default_converter().unstructure(snap.diagnostics)


def test_the_prefix_ends_after_a_file_level_definition():
    data = TEXT.encode()
    assert len(data) > MIN_TEXT_BYTES and len(TOP) < PREFIX_BYTES
    assert cut_at(data) == len(TOP.rstrip("\n")) + 1  # after the last kernel's closing brace
    prefix = read_prefix(data, None, IncludeResolver().env_for(None, data, includers=True))
    assert prefix is not None and not prefix.tree.root_node.has_error
    names = [k.name for k in prefix.candidates()]
    assert names == ["first_standalone", "calls_later_helper", "launched_later", "calls_local_helper"]
    assert {k.name for k in prefix.candidates() if prefix.standalone(k)} == STANDALONE


def test_a_prefix_inside_a_namespace_is_closed_after_the_cut():
    # code not indented in its namespace: the cut lies inside it, the prefix closes it
    text = ("namespace outer {\n" + TOP + FILLER + BOTTOM + "}\n").encode()
    prefix = read_prefix(text, None, IncludeResolver().env_for(None, text, includers=True))
    assert prefix is not None and prefix.data == text[:prefix.cut] + b"\n}"
    assert {k.qualified_name for k in prefix.candidates() if prefix.standalone(k)} == {f"outer::{n}" for n in STANDALONE}


def test_a_prefix_cut_inside_a_struct_gives_nothing():
    # member functions closed at column 0 inside a struct: no cut there is at file level
    members = "".join(f"__device__ float get_{i}(int k)\n{{\n    return values[k] * {i}.0f;\n}}\n" for i in range(PREFIX_DEFINITIONS + 8))
    text = ("struct Table {\nfloat values[64];\n" + members + "};\n" + TOP + FILLER).encode()
    assert read_prefix(text, None, IncludeResolver().env_for(None, text, includers=True)) is None


def test_a_local_header_after_the_cut_gives_nothing():
    # its functions could be the callees of the kernels above it
    text = (TOP + FILLER + '#include "later_helpers.cuh"\n' + BOTTOM).encode()
    assert read_prefix(text, None, IncludeResolver().env_for(None, text, includers=True)) is None


def test_a_text_whose_kernels_are_all_launched_later_is_not_parsed():
    launches = "".join(f"    {name}<<<1, 1>>>(0, 0, 0);\n" for name in
                       ("first_standalone", "calls_later_helper", "launched_later", "calls_local_helper"))
    text = (TOP + FILLER + "int main()\n{\n" + launches + "    return 0;\n}\n").encode()
    assert read_prefix(text, None, IncludeResolver().env_for(None, text, includers=True)) is None


def test_kernels_that_depend_on_later_text_are_left_out(tmp_path):
    """Without the checks, the prefix alone would give `calls_later_helper` another verdict (the
    helper's body comes later) and `launched_later` another message (its launch comes later)."""
    path = tmp_path / "big.cu"
    first = opening.first_diagnostics(path.as_uri(), TEXT, 1, config(), str(path), ReadContext(IncludeResolver()), analysis_s=10)
    assert first is not None
    shown = verdicts(first.as_json)
    assert {kernel for kernel, _ in shown} == STANDALONE
    complete = verdicts(complete_json(TEXT, path))
    for key, diagnostic in shown.items():
        assert diagnostic == complete[key]
    assert complete[("calls_later_helper", "H100 SXM5 80GB")]["code"] == "roofline/compute-bound"


def test_example_kernels_before_a_large_table_agree_with_the_complete_analysis(tmp_path):
    """Each example without its `main` (which launches every kernel), split at a file-level
    definition in its middle, a table between: whatever the first publication shows (kernels
    whose helpers, globals or macros may come after the table or not), the complete analysis
    shows the same."""
    shown = 0
    for source in sorted((EXAMPLES / "cuda").glob("*.cu")):
        text = source.read_text()
        text = text[:text.index("int main(")] if "int main(" in text else text
        ends = [m.end() for m in re.finditer(r"\n\};?\n", text)]
        if not ends:
            continue
        cut = min(ends, key=lambda end: abs(end - len(text) // 2))
        whole = text[:cut] + "\n" + FILLER + text[cut:]
        path = tmp_path / source.name
        first = opening.first_diagnostics(path.as_uri(), whole, 1, config(), str(path), ReadContext(IncludeResolver()), analysis_s=10)
        if first is None:
            continue
        shown += 1
        complete = complete_json(whole, path)
        assert all(d in complete for d in first.as_json), source.name
    assert shown >= 5


def test_small_texts_get_no_early_publication(tmp_path):
    text = (EXAMPLES / "cuda" / "saxpy.cu").read_text()
    path = tmp_path / "saxpy.cu"
    assert opening.first_diagnostics(path.as_uri(), text, 1, config(), str(path), ReadContext(IncludeResolver())) is None


def plain(diagnostic: lsp.Diagnostic) -> dict[str, Any]:
    return default_converter().unstructure(diagnostic)


@pytest.mark.asyncio
async def test_server_publishes_the_top_first_then_the_complete_analysis(tmp_path):
    path = tmp_path / "big.cu"
    path.write_text(TEXT)
    async with session(tmp_path, init_options={"gpus": ["h100"]}) as s:
        uri = path.as_uri()
        await s.open(path, timeout=120)
        published = [p for p in s.published[uri] if p.version == 1]
        assert len(published) >= 2
        first, complete = published[0], published[-1]
        early = roofline(first)
        assert set(early) == STANDALONE  # what depends on later text waits for the complete analysis
        final = [plain(d) for d in complete.diagnostics]
        assert all(plain(d) in final for d in first.diagnostics)
        assert len(roofline(complete)) == 4
        # the complete publication is `perflsp check`'s
        assert diagnostic_keys(complete.diagnostics) == diagnostic_keys(complete_json(TEXT, path))


@pytest.mark.asyncio
async def test_server_publishes_a_small_file_once(tmp_path):
    shutil.copytree(EXAMPLES / "cuda", tmp_path / "cuda")
    path = tmp_path / "cuda" / "saxpy.cu"
    async with session(tmp_path, init_options={"gpus": ["h100"]}) as s:
        uri = path.as_uri()
        await s.open(path)
        published = [p for p in s.published[uri] if p.version == 1]
        assert len(published) == 1
        assert diagnostic_keys(published[0].diagnostics) == diagnostic_keys(complete_json(path.read_text(), path))

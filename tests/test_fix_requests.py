"""Lints report fixes as requests; the edits are built (and the file re-parsed and read back
through its program model to validate them) only when asked for: never on the typing path."""

from __future__ import annotations

import pkgutil
import sys

import pytest

from perflsp.analysis import fixes
from perflsp.analysis.fixes import apply_edits, build_fixes, document, with_fixes
from perflsp.analysis.lints import run_lints
from perflsp.analysis.models import Finding, FixRequest
from perflsp.hardware import load_database
from perflsp.kernels import extract
from perflsp.kernels.models import Span
from perflsp.kernels.program import ProgramModel
from perflsp.kernels.symbols import TopLevelFacts
from perflsp.server import engine_adapter
from perflsp.source.parser import parse

KERNEL = """
__global__ void scale{i}(int n, float *x)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * 0.5 + pow(x[i], 2.0);
}}
"""


def big_file(kernels: int) -> bytes:
    """Many small kernels, every one launched with a constant odd block size from `main`: each
    draws a double-promotion, a double-math-function, a block-size, an occupancy and a
    missing-launch-bounds finding, all with fixes."""
    body = "".join(KERNEL.format(i=i) for i in range(kernels))
    launches = "".join(f"    scale{i}<<<(n + 19) / 20, 20>>>(n, x);\n" for i in range(kernels))
    return (body + "\nint main()\n{\n    int n = 1 << 20;\n    float *x = 0;\n" + launches + "    return 0;\n}\n").encode()


@pytest.fixture()
def builds(monkeypatch):
    """Counts the validations (each re-parses the edited file) and the whole-file re-reads of
    an edited text (`ProgramModel.reread`; some fixes read the file back to check it)."""
    calls = {"validated_fix": 0, "reread": 0}
    real = document.validated_fix

    def counting(*args, **kwargs):
        calls["validated_fix"] += 1
        return real(*args, **kwargs)

    # each fix module calls the name it imported: count the calls made through any of them
    for module in (fixes, *(sys.modules[f"{fixes.__name__}.{m.name}"] for m in pkgutil.iter_modules(fixes.__path__))):
        if hasattr(module, "validated_fix"):
            monkeypatch.setattr(module, "validated_fix", counting)
    real_reread = ProgramModel.reread

    def counting_reread(self, *args, **kwargs):
        calls["reread"] += 1
        return real_reread(self, *args, **kwargs)

    monkeypatch.setattr(ProgramModel, "reread", counting_reread)
    return calls


@pytest.fixture(scope="module")
def gpus():
    return [load_database().get("h100-sxm5-80gb")]


def test_linting_a_big_file_builds_no_fix(builds, gpus):
    data = big_file(200)
    tree = parse(data)
    fk = extract(data, tree, path="big.cu")
    model = ProgramModel(data, tree, fk)
    findings = run_lints(model, gpus)
    codes = {f.code for f in findings}
    assert {"precision/double-promotion", "precision/double-math-function", "launch/block-size-not-warp-multiple",
            "occupancy/low", "launch/missing-launch-bounds"} <= codes
    assert len(findings) >= 5 * 200
    assert builds == {"validated_fix": 0, "reread": 0}
    assert all(f.fixes == () for f in findings)
    assert sum(len(f.fix_requests) for f in findings) >= 5 * 200

    # the server's typing path (a context reused between runs) builds none either
    shared = engine_adapter.LintFacts()
    again = engine_adapter.run_lints(data, tree, fk, gpus, None, [], lines=None, shared=shared)
    assert len(again) == len(findings) and builds == {"validated_fix": 0, "reread": 0}

    # asked for, one finding's fixes are built and validated: the edited text re-parsed, and
    # only the edited kernel extracted again (not the whole file: that made N fixes quadratic)
    bounds = next(f for f in findings if f.code == "launch/missing-launch-bounds")
    built = build_fixes(bounds, model)
    assert builds["validated_fix"] == 1 and builds["reread"] == 0
    assert built[0].preferred and "__launch_bounds__(20)" in apply_edits(data, built[0].edits).decode()


def test_build_fixes_skips_a_request_that_cannot_be_built_and_passes_its_preference_on():
    data = big_file(1)
    tree = parse(data)
    fk = extract(data, tree, path="one.cu")
    site = fk.launches[0]
    finding = Finding("launch/block-size-not-warp-multiple", "odd block", site.block.span or site.span, "warning",
                      fix_requests=(FixRequest("block-size", site.span, 20, preferred=True),  # not a warp multiple
                                    FixRequest("block-size", Span(0, 1), 64),  # no launch there
                                    FixRequest("block-size", site.span, 128)))
    built = build_fixes(finding, ProgramModel(data, tree, fk))
    assert [(f.title, f.preferred) for f in built] == [("Launch `scale0` with 128 threads per block", True)]
    assert b"scale0<<<(n + 127) / 128, 128>>>" in apply_edits(data, built[0].edits)


def test_with_fixes_fills_fixes_for_output(gpus):
    data = big_file(2)
    tree = parse(data)
    fk = extract(data, tree, path="two.cu")
    model = ProgramModel(data, tree, fk)
    findings = with_fixes(run_lints(model, gpus), model)
    assert findings and all(f.fix_requests == () for f in findings)
    promotion = [f for f in findings if f.code == "precision/double-promotion"]
    assert promotion and all(f.fixes and f.fixes[0].title == "Write `0.5f` (single precision)" for f in promotion)
    assert run_lints(model, gpus, build_fixes=True) == findings


def test_the_server_s_lint_runs_share_the_file_s_top_level_facts(gpus):
    """Typing in a kernel body keeps the file's macros and top-level facts (its constants and
    typedefs, as the model read them) for the next lint run: they are not read again."""
    data = big_file(2)
    tree = parse(data)
    fk = extract(data, tree, path="two.cu")
    shared = engine_adapter.LintFacts()
    first = engine_adapter.run_lints(data, tree, fk, gpus, None, [], shared=shared)
    top = shared.top
    assert isinstance(top, TopLevelFacts) and {"type_aliases", "lint_type_aliases"} <= top.known()
    again = engine_adapter.run_lints(data, tree, fk, gpus, None, [], shared=shared)
    assert again == first and shared.top is top
    assert engine_adapter.lint_model(data, tree, fk, shared=shared).top is top
    assert engine_adapter.lint_model(data, tree, fk).top is not top  # (nothing shared: read afresh)

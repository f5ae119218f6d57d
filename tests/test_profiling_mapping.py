"""Mapping profiled kernel names to source kernels: demangling, signatures, OpenMP entries."""

from __future__ import annotations

import csv
import os

import pytest
from profiling_helpers import cuda_kernel, file_kernels, omp_region
from test_profiling_measured import _labels_path

from perflsp.profiling.mapping import map_kernel, map_kernels, parse_name, parse_omp_entry
from perflsp.source import demangling as D

needs_cxxfilt = pytest.mark.skipif(D.cxxfilt_path() is None, reason="c++filt (binutils) is not installed")


@pytest.mark.parametrize("use_cxxfilt", [pytest.param(True, marks=needs_cxxfilt), False])
@pytest.mark.parametrize(
    ("mangled", "demangled"),
    [
        ("_ZN2ns6kernelIfLi4EEEvPfi", "void ns::kernel<float, 4>(float*, int)"),
        ("_Z10histogram8PKhPji", "histogram8(unsigned char const*, unsigned int*, int)"),
        ("_Z6smoothPfi", "smooth(float*, int)"),
        ("main", "main"),
        # integer template arguments are written as c++filt writes them, whichever backend
        ("_Z1fILj8EEvv", "void f<8u>()"),
        ("_Z1fILm8EEvv", "void f<8ul>()"),
        ("_Z1fILin3EEvv", "void f<-3>()"),
        ("_Z1fILb1EEvv", "void f<true>()"),
        ("_Z1fILs3EEvv", "void f<(short)3>()"),
    ],
)
def test_demangle(mangled, demangled, use_cxxfilt):
    assert D.demangle(mangled, use_cxxfilt=use_cxxfilt) == demangled


def test_leading_name_fallback_for_names_no_demangler_reads(monkeypatch):
    monkeypatch.setattr(D, "_CACHE", {})
    monkeypatch.setattr(D, "_with_library", lambda name: None)
    assert D.demangle("_ZN2ns6kernelIfLi4EEEvPfi", use_cxxfilt=False) == "ns::kernel"
    assert D.demangle("_Z3fooPf", use_cxxfilt=False) == "foo"
    assert D.demangle("_Zgarbage", use_cxxfilt=False) == "_Zgarbage"


@pytest.mark.parametrize(
    ("text", "qualified", "simple", "targs", "nparams"),
    [
        ("void ns::saxpy<float>(const float *, float *, int)", "ns::saxpy", "saxpy", ("float",), 3),
        ("dgemm_tile(const double *, const double *, double *, int)", "dgemm_tile", "dgemm_tile", None, 4),
        ("void a::b<c<int>, 2>::k<(int)3>(T1 *, void (*)(int))", "a::b::k", "k", ("(int)3",), 2),
        ("(anonymous namespace)::helper(int)", "(anonymous namespace)::helper", "helper", None, 1),
        ("k()", "k", "k", None, 0),
        ("k(void)", "k", "k", None, 0),
        ("bare_name", "bare_name", "bare_name", None, None),
        ("void f<[lambda(int) (instance 1)], 4>(int)", "f", "f", ("[lambda(int) (instance 1)]", "4"), 1),
    ],
)
def test_parse_name(text, qualified, simple, targs, nparams):
    parsed = parse_name(text)
    assert (parsed.qualified, parsed.simple, parsed.template_args) == (qualified, simple, targs)
    assert (None if parsed.params is None else len(parsed.params)) == nparams


def test_parse_omp_entry():
    entry = parse_omp_entry("__omp_offloading_fd00_1a2b3c__Z6smoothPfi_l42")
    assert entry is not None
    assert (entry.device_id, entry.file_id, entry.parent, entry.line, entry.count) == (
        0xFD00,
        0x1A2B3C,
        "_Z6smoothPfi",
        42,
        None,
    )
    assert parse_omp_entry("__omp_offloading_10_20_main_l7_2").count == 2
    assert parse_omp_entry("__omp_offloading_10_20_foo_l3_l57").line == 57
    assert parse_omp_entry("void k(int)") is None


def test_cuda_mapping_narrows_by_namespace_params_and_specialisation(tmp_path):
    primary = cuda_kernel("saxpy", qualified="ns::saxpy", params=3, line=10, body_hash="p", template_params=("T",))
    special = cuda_kernel(
        "saxpy", qualified="ns::saxpy", params=3, line=30, body_hash="s", specialization_args=("float",)
    )
    other_ns = cuda_kernel("saxpy", qualified="other::saxpy", params=3, line=50, body_hash="o", template_params=("T",))
    two_params = cuda_kernel("saxpy", qualified="ns::saxpy", params=2, line=70, body_hash="2", template_params=("T",))
    files = [file_kernels(tmp_path / "a.cu", [primary, special, other_ns, two_params])]
    match = map_kernel("void ns::saxpy<float>(const float *, float *, int)", files)
    assert match.status == "exact" and match.kernel is special and match.ref.body_hash == "s"
    match = map_kernel("void ns::saxpy<double>(const double *, double *, int)", files)
    assert match.status == "exact" and match.kernel is primary
    assert match.display_name == "ns::saxpy<double>"


def test_cuda_mapping_of_mangled_names_and_overloads(tmp_path):
    one = cuda_kernel("histogram8", params=3, line=5, body_hash="3")
    two = cuda_kernel("histogram8", params=2, line=15, body_hash="2")
    files = [file_kernels(tmp_path / "h.cu", [one, two])]
    match = map_kernel("_Z10histogram8PKhPji", files)
    assert match.status == "exact" and match.kernel is one
    assert match.display_name == "histogram8"


def test_ambiguous_and_missing(tmp_path):
    files = [
        file_kernels(tmp_path / "a.cu", [cuda_kernel("k", params=1, line=3)]),
        file_kernels(tmp_path / "b.cu", [cuda_kernel("k", params=1, line=9)]),
    ]
    match = map_kernel("k(float *)", files)
    assert match.status == "ambiguous" and match.candidates == 2 and match.ref.line == 3
    assert "2 candidates" in match.reason
    missing = map_kernel("void nothere(int)", files)
    assert missing.status == "not_found" and missing.ref is None


def test_omp_mapping_by_pragma_line_and_parent(tmp_path):
    regions = [omp_region("smooth", 42, "a"), omp_region("main", 42, "b"), omp_region("smooth", 60, "c")]
    files = [file_kernels(tmp_path / "s.cpp", regions=regions)]
    match = map_kernel("__omp_offloading_fd00_1a2b3c__Z6smoothPfi_l42", files)
    assert match.status == "exact" and match.ref.body_hash == "a" and match.ref.kind == "omp"
    assert match.ref.name == "smooth@l42" and match.display_name == "smooth@l42"
    main = map_kernel("__omp_offloading_fd00_1a2b3c_main_l42", files)
    assert main.ref.body_hash == "b"


def test_omp_file_id_separates_files_with_the_same_line(tmp_path):
    first, second = tmp_path / "one.cpp", tmp_path / "two.cpp"
    first.write_text("x", encoding="utf-8")
    second.write_text("y", encoding="utf-8")
    files = [
        file_kernels(first, regions=[omp_region("main", 12, "one")]),
        file_kernels(second, regions=[omp_region("main", 12, "two")]),
    ]
    st = os.stat(second)
    match = map_kernel(f"__omp_offloading_{st.st_dev:x}_{st.st_ino:x}_main_l12", files)
    assert match.status == "exact" and match.ref.body_hash == "two"
    unknown = map_kernel("__omp_offloading_1_2_main_l12", files)
    assert unknown.status == "ambiguous"


def test_batch_mapping_demangles_once(tmp_path, monkeypatch):
    calls = []
    real = D._with_cxxfilt
    monkeypatch.setattr(D, "_CACHE", {})
    monkeypatch.setattr(D, "_with_cxxfilt", lambda names: calls.append(list(names)) or real(names))
    files = [file_kernels(tmp_path / "a.cu", [cuda_kernel("histogram8", params=3)], [omp_region("smooth", 42)])]
    result = map_kernels(["_Z10histogram8PKhPji", "__omp_offloading_fd00_1a2b3c__Z6smoothPfi_l42"], files)
    assert {m.status for m in result.values()} == {"exact"}
    assert len(calls) <= 1


@pytest.mark.parametrize("use_cxxfilt", [pytest.param(True, marks=needs_cxxfilt), False])
def test_names_of_the_labeled_kernels(use_cxxfilt):
    """Every kernel signature in the dev labels parses to the kernel name and line recorded
    there (CUDA: simple name; OpenMP: demangled parent with template arguments, @l<line>).
    Without c++filt, parents whose template arguments hold expressions (which the pure-Python
    demangler cannot read) keep only their qualified name, still enough to map them."""
    path = _labels_path()
    if path is None:
        pytest.skip("evaluation labels not found (set PERFLSP_EVAL_LABELS to rtx3080-roofline-dev.csv)")
    with path.open(newline="", encoding="utf-8") as fh:
        rows = [{k: r[k] for k in ("language", "kernel", "kernel_signature", "line")} for r in csv.DictReader(fh)]
    entries = {r["kernel_signature"]: parse_omp_entry(r["kernel_signature"]) for r in rows}
    demangled = D.demangle_many([e.parent if e else s for s, e in entries.items()], use_cxxfilt=use_cxxfilt)
    wrong = []
    for row in rows:
        entry = entries[row["kernel_signature"]]
        if row["language"] == "omp":
            parsed = parse_name(demangled[entry.parent])
            got = f"{parsed.display}@l{entry.line}"
            ok = got == row["kernel"] and entry.line == int(row["line"])
            if not ok and not use_cxxfilt and parsed.template_args is None:
                ok = (
                    f"{parsed.qualified}@l{entry.line}"
                    == parse_name(row["kernel"].rsplit("@l", 1)[0]).qualified + f"@l{entry.line}"
                )
        else:
            got = parse_name(demangled[row["kernel_signature"]]).simple
            ok = got == row["kernel"]
        if not ok:
            wrong.append((row["kernel_signature"][:80], got))
    assert wrong == []

"""ptxas resource usage: per-kernel registers/spills/smem/stack checked against a separate
`nvcc -ptx` + `ptxas -v` run parsed here; name mapping; cache; flags; trust; no-nvcc path."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from perflsp.hardware import load_database
from perflsp.hardware.ptxas import (
    CompileError,
    NvccNotFoundError,
    ResourceUsageCache,
    arch_flag,
    estimate_resource_usage,
    find_compile_commands,
    flags_from_compile_commands,
    kernel_base_name,
    locate_nvcc,
    parse_ptxas_output,
    resource_usage,
    resource_usage_async,
    usage_by_kernel_name,
)

DATA = Path(__file__).parent / "data" / "ptxas"
NVCC = locate_nvcc().path
ARCH = arch_flag(load_database().get("rtx3080").compute_capability)  # sm_86
SHARED_CACHE = ResourceUsageCache()  # compile each test file once for the tests that only read
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, $CUDA_HOME, /usr/local/cuda)")


def _independent_ptxas(source: Path, tmp_path: Path, flags: list[str] = ()) -> dict[str, dict[str, int]]:
    """nvcc -ptx, then ptxas -v on the PTX, each entry's block read with its own regexes."""
    ptxas = Path(NVCC).with_name("ptxas")
    if not ptxas.exists():
        ptxas = Path(shutil.which("ptxas") or "ptxas")
    ptx = tmp_path / (source.stem + ".ptx")
    subprocess.run([NVCC, "-ptx", f"-arch={ARCH}", *flags, "-o", str(ptx), str(source)], check=True,
                   capture_output=True)
    done = subprocess.run([str(ptxas), "-v", f"-arch={ARCH}", "-o", str(tmp_path / "out.cubin"), str(ptx)],
                          check=True, capture_output=True, text=True)
    report = done.stdout + done.stderr
    kernels = {}
    for block in report.split("Compiling entry function ")[1:]:
        name = block.split("'")[1]
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", block)
        smem = re.search(r"(\d+) bytes smem", block.split("Compiling")[0])
        kernels[name] = {
            "registers": int(re.search(r"Used (\d+) registers", block).group(1)),
            "stack_frame_bytes": int(frame.group(1)),
            "spill_stores_bytes": int(frame.group(2)),
            "spill_loads_bytes": int(frame.group(3)),
            "static_shared_memory_bytes": int(smem.group(1)) if smem else 0,
        }
    return kernels


def _figures(usage) -> dict[str, int]:
    return {k: getattr(usage, k) for k in
            ("registers", "stack_frame_bytes", "spill_stores_bytes", "spill_loads_bytes",
             "static_shared_memory_bytes")}


@needs_nvcc
@pytest.mark.parametrize("name", ["basic.cu", "pressure.cu"])
def test_resource_usage_matches_ptxas_report(name, tmp_path):
    source = DATA / name
    mine = resource_usage(source, ARCH, cache=SHARED_CACHE)
    expected = _independent_ptxas(source, tmp_path)
    assert set(mine) == set(expected)
    for mangled, figures in expected.items():
        assert _figures(mine[mangled]) == figures, mangled
        assert mine[mangled].arch == ARCH


@needs_nvcc
def test_kernels_map_back_by_name_and_show_spills_stack_and_smem():
    usage = resource_usage(DATA / "pressure.cu", ARCH, cache=SHARED_CACHE)
    by_name = {u.kernel_name: u for u in usage.values()}
    assert set(by_name) == {"spills", "uses_stack", "tiled_copy"}  # the device function is not a kernel
    assert by_name["spills"].spills and by_name["spills"].registers <= 64
    assert by_name["uses_stack"].stack_frame_bytes >= 256 and not by_name["uses_stack"].spills
    assert by_name["tiled_copy"].static_shared_memory_bytes == 256 * 4
    assert by_name["tiled_copy"].barriers == 1

    basic = usage_by_kernel_name(resource_usage(DATA / "basic.cu", ARCH, cache=SHARED_CACHE).values())
    assert set(basic) == {"saxpy", "reverse_tile", "fill_ones", "axpby"}
    assert sorted(u.static_shared_memory_bytes for u in basic["reverse_tile"]) == [1024, 2048]
    assert basic["fill_ones"][0].mangled_name == "fill_ones"  # extern "C"


@needs_nvcc
def test_cache_by_content_and_flags(tmp_path):
    work = tmp_path / "src"
    shutil.copytree(DATA, work)
    cache = ResourceUsageCache(tmp_path / "cache")
    first = resource_usage(work / "pressure.cu", ARCH, cache=cache)
    assert (cache.hits, cache.misses) == (0, 1)
    assert resource_usage(work / "pressure.cu", ARCH, cache=cache) == first
    assert cache.hits == 1
    # a new process (new cache object) reads the same answer from disk
    reloaded = ResourceUsageCache(tmp_path / "cache")
    assert resource_usage(work / "pressure.cu", ARCH, cache=reloaded) == first
    assert reloaded.hits == 1
    # other flags: another entry
    wide = resource_usage(work / "pressure.cu", ARCH, ["-DWIDE_TILE"], cache=cache)
    assert wide["_Z10tiled_copyPfPKf"].static_shared_memory_bytes == 2048 * 4
    # editing an included header invalidates the entry
    (work / "pressure_config.h").write_text("#define LIVE_VALUES 8\n")
    small = resource_usage(work / "pressure.cu", ARCH, cache=cache)
    assert cache.misses == 3
    assert not small["_Z6spillsPfPKfi"].spills


@needs_nvcc
async def test_async_compile_matches_sync():
    sync = resource_usage(DATA / "basic.cu", ARCH, cache=SHARED_CACHE)
    assert await resource_usage_async(DATA / "basic.cu", ARCH, cache=ResourceUsageCache()) == sync


@needs_nvcc
def test_compile_error_is_reported(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k(float* p) { p[0] = ; }\n")
    with pytest.raises(CompileError, match=r"nvcc failed \(exit 1\) compiling bad.cu for sm_86: .*error"):
        resource_usage(bad, ARCH, cache=None)


def test_flags_from_compile_commands_keep_only_safe_flags(tmp_path):
    source = tmp_path / "proj" / "k.cu"
    source.parent.mkdir()
    source.write_text("")
    (tmp_path / "proj" / "build").mkdir()
    entry = {
        "directory": str(tmp_path / "proj"),
        "file": "k.cu",
        "command": "/evil/clang++ -DWIDE_TILE -I include -isystem /opt/x -std=c++17 "
                   "--cuda-gpu-arch=sm_70 -Xcompiler -fplugin=./evil.so -O2 -c k.cu -o k.o",
    }
    cc = tmp_path / "proj" / "build" / "compile_commands.json"
    cc.write_text(json.dumps([entry]))
    assert find_compile_commands(source) == cc
    assert flags_from_compile_commands(cc, source) == [
        "-D", "WIDE_TILE", "-I", str(tmp_path / "proj" / "include"), "-isystem", "/opt/x", "-std=c++17"]
    assert flags_from_compile_commands(cc, tmp_path / "other.cu") is None


def test_workspace_nvcc_needs_a_trusted_workspace():
    nvcc = NVCC or "/bin/true"
    untrusted = locate_nvcc(workspace_setting=nvcc, environ={"PATH": ""}, default_locations=())
    assert untrusted.path is None
    assert "ignored nvcc" in untrusted.message and "not trusted" in untrusted.message
    trusted = locate_nvcc(workspace_setting=nvcc, workspace_trusted=True, environ={"PATH": ""},
                          default_locations=())
    assert (trusted.path, trusted.origin) == (nvcc, "workspace settings")
    user = locate_nvcc(user_setting=nvcc, environ={"PATH": ""}, default_locations=())
    assert user.origin == "user settings"


def test_without_nvcc_say_so_and_estimate(monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr("perflsp.hardware.ptxas._DEFAULT_NVCC_LOCATIONS", ())
    with pytest.raises(NvccNotFoundError, match="nvcc not found"):
        resource_usage(DATA / "basic.cu", ARCH, cache=None)
    limits = load_database().get("rtx3080").limits
    guess = estimate_resource_usage("saxpy", limits, static_smem_bytes=1024)
    assert (guess.registers, guess.estimated, guess.static_shared_memory_bytes) == (32, True, 1024)
    assert "registers assumed 32" in guess.assumptions[0]
    capped = estimate_resource_usage("k", limits, launch_bounds_max_threads=1024, launch_bounds_min_blocks=3)
    assert capped.registers == 16  # 65536 / 3072 = 21, down to the 8-register allocation step
    assert "__launch_bounds__(1024, 3) caps registers at 16" in capped.assumptions[1]


def test_parser_handles_older_ptxas_lines():
    text = """ptxas info    : Compiling entry function '_Z1kPf' for 'sm_70'
ptxas info    : Function properties for _Z1kPf
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 20 registers, 16 bytes smem, 360 bytes cmem[0]
"""
    (usage,) = parse_ptxas_output(text).values()
    assert (usage.registers, usage.spill_stores_bytes, usage.static_shared_memory_bytes,
            usage.barriers, usage.kernel_name) == (20, 4, 16, None, "k")


@pytest.mark.parametrize(("mangled", "name"), [
    ("_Z5saxpyifPKfPf", "saxpy"),
    ("_Z12reverse_tileIdEvPT_PKS0_", "reverse_tile"),
    ("_ZN6solver5axpbyEfPKffPf", "axpby"),
    ("_ZN2ns6kernelINS_4PairIiEEEEvPT_", "kernel"),
    ("_ZN12_GLOBAL__N_16kernelEPf", "kernel"),
    ("fill_ones", "fill_ones"),
])
def test_kernel_base_name(mangled, name):
    assert kernel_base_name(mangled) == name


def test_arch_flag():
    assert [arch_flag(cc) for cc in ("7.5", "8.6", "10.0", "12.0")] == ["sm_75", "sm_86", "sm_100", "sm_120"]
    with pytest.raises(ValueError):
        arch_flag("gfx90a")

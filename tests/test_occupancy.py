"""Occupancy calculator: agreement with the CUDA toolkit's cuda_occupancy.h, AMD/Intel models,
block-size search, "what would it take", and bad input."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from perflsp.hardware import (
    Limiter,
    NvidiaArchLimits,
    OccupancyInputError,
    best_block_size,
    load_database,
    occupancy,
    what_would_it_take,
)

DB = load_database()
NVIDIA_CCS = sorted({g.compute_capability for g in DB.all() if g.vendor == "NVIDIA"},
                    key=lambda cc: tuple(map(int, cc.split("."))))
CONFIGS_PER_CC = 1500
BLOCK_SIZE_CONFIGS_PER_CC = 60

# cudaOccLimitingFactor bits
_FLAG_NAMES = {0x01: Limiter.WARPS, 0x02: Limiter.REGISTERS, 0x04: Limiter.SHARED_MEMORY,
               0x08: Limiter.BLOCKS, 0x10: Limiter.BARRIERS}

HARNESS = r"""
#include <cstdio>
#include <cstring>
#include <cuda_occupancy.h>

// One request per line; the device and kernel come from the test (perflsp's arch tables).
//   O <device> threads regs static dynamic carveout barriers   -> "blocks factors" | "ERR code"
//   B <device> regs static dynamic carveout barriers maxThreads -> "blockSize minGrid" | "ERR code"
// <device> = major minor maxThreadsPerSM regsPerBlock regsPerSM smemPerBlock smemPerSM
//            smemOptin reserved numSms
int main() {
    char kind[4];
    while (std::scanf("%3s", kind) == 1) {
        cudaOccDeviceProp p;
        long long smemBlock, smemSM, optin, reserved;
        std::scanf("%d %d %d %d %d %lld %lld %lld %lld %d", &p.computeMajor, &p.computeMinor,
                   &p.maxThreadsPerMultiprocessor, &p.regsPerBlock, &p.regsPerMultiprocessor,
                   &smemBlock, &smemSM, &optin, &reserved, &p.numSms);
        p.maxThreadsPerBlock = 1024;
        p.warpSize = 32;
        p.sharedMemPerBlock = smemBlock;
        p.sharedMemPerMultiprocessor = smemSM;
        p.sharedMemPerBlockOptin = optin;
        p.reservedSharedMemPerBlock = reserved;

        int threads = 0, regs, carveout, barriers, maxThreads = 1024;
        long long st, dyn;
        if (kind[0] == 'O') {
            std::scanf("%d %d %lld %lld %d %d", &threads, &regs, &st, &dyn, &carveout, &barriers);
        } else {
            std::scanf("%d %lld %lld %d %d %d", &regs, &st, &dyn, &carveout, &barriers, &maxThreads);
        }
        // As the runtime converts cudaFuncAttributes: opt-in limit, as much dynamic shared
        // memory as the opt-in maximum leaves.
        cudaOccFuncAttributes a;
        a.maxThreadsPerBlock = maxThreads;
        a.numRegs = regs;
        a.sharedSizeBytes = st;
        a.partitionedGCConfig = PARTITIONED_GC_OFF;
        a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        a.maxDynamicSharedSizeBytes = optin - st;
        a.numBlockBarriers = barriers;
        cudaOccDeviceState s;
        s.carveoutConfig = carveout;

        if (kind[0] == 'O') {
            cudaOccResult r;
            std::memset(&r, 0, sizeof r);
            cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, threads, dyn);
            if (e != CUDA_OCC_SUCCESS) std::printf("ERR %d\n", (int)e);
            else std::printf("%d %u\n", r.activeBlocksPerMultiprocessor, r.limitingFactors);
        } else {
            int minGrid = 0, blockSize = 0;
            cudaOccError e = cudaOccMaxPotentialOccupancyBlockSize(&minGrid, &blockSize, &p, &a, &s, dyn);
            if (e != CUDA_OCC_SUCCESS) std::printf("ERR %d\n", (int)e);
            else std::printf("%d %d\n", blockSize, minGrid);
        }
    }
    return 0;
}
"""


def _occupancy_header() -> Path | None:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in filter(None, roots):
        header = Path(root) / "include" / "cuda_occupancy.h"
        if header.is_file():
            return header
    return None


@pytest.fixture(scope="session")
def harness(tmp_path_factory) -> Path:
    header = _occupancy_header()
    if header is None:
        pytest.skip("cuda_occupancy.h not found (looked in $CUDA_HOME, $CUDA_PATH, /usr/local/cuda)")
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ not found: cannot build the cuda_occupancy.h harness")
    folder = tmp_path_factory.mktemp("occ_harness")
    (folder / "harness.cpp").write_text(HARNESS)
    exe = folder / "harness"
    subprocess.run([compiler, "-O1", "-o", str(exe), "-I", str(header.parent), str(folder / "harness.cpp")],
                   check=True, capture_output=True, text=True)
    return exe


def _device(lim: NvidiaArchLimits, sm_count: int) -> str:
    major, minor = lim.compute_capability_tuple
    return " ".join(map(str, (
        major, minor, lim.max_threads_per_sm, lim.max_registers_per_block, lim.registers_per_sm,
        lim.default_shared_memory_per_block_bytes, lim.shared_memory_per_sm_bytes,
        lim.max_shared_memory_per_block_bytes, lim.reserved_shared_memory_per_block_bytes, sm_count,
    )))


def _random_kernel(rng: random.Random, lim: NvidiaArchLimits) -> tuple[int, int, int, int]:
    """Threads, registers, static and dynamic shared memory, spread over the valid ranges."""
    roll = rng.random()
    if roll < 0.45:
        threads = rng.randint(1, 1024)
    elif roll < 0.8:
        threads = 32 * rng.randint(1, 32)
    else:
        threads = rng.choice([32, 64, 96, 128, 192, 256, 384, 512, 640, 768, 1024])
    regs = rng.choice([0, 16, 24, 32, 40, 48, 64, 72, 96, 128, 168, 255]) if rng.random() < 0.25 \
        else rng.randint(0, 255)
    max_static = lim.default_shared_memory_per_block_bytes
    static = 0 if rng.random() < 0.4 else (
        1024 * rng.randint(0, max_static // 1024) if rng.random() < 0.3 else rng.randint(0, max_static))
    room = lim.max_shared_memory_per_block_bytes - static
    dynamic = 0 if rng.random() < 0.4 else (
        1024 * rng.randint(0, room // 1024) if rng.random() < 0.3 else rng.randint(0, room))
    return threads, regs, static, dynamic


def _run(exe: Path, lines: list[str]) -> list[str]:
    done = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, check=True, timeout=120)
    out = done.stdout.splitlines()
    assert len(out) == len(lines)
    return out


def test_active_blocks_match_cuda_occupancy_header(harness):
    rng = random.Random(20261129)
    requests, cases = [], []
    for cc in NVIDIA_CCS:
        lim = DB.arch(cc)
        device = _device(lim, 68)
        for _ in range(CONFIGS_PER_CC):
            threads, regs, static, dynamic = _random_kernel(rng, lim)
            carveout = -1 if rng.random() < 0.7 else rng.randint(0, 100)
            barriers = 1 if rng.random() < 0.9 else rng.choice([0, 2, 3])
            requests.append(f"O {device} {threads} {regs} {static} {dynamic} {carveout} {barriers}")
            cases.append((cc, threads, regs, static, dynamic, carveout, barriers))

    answers = _run(harness, requests)
    unknown_to_header = {case[0] for case, ans in zip(cases, answers) if ans == "ERR 2"}
    compared = matched = 0
    mismatches = []
    for case, answer in zip(cases, answers):
        cc, threads, regs, static, dynamic, carveout, barriers = case
        if cc in unknown_to_header:
            continue
        assert not answer.startswith("ERR"), f"header rejected {case}: {answer}"
        blocks, flags = map(int, answer.split())
        mine = occupancy(DB.arch(cc), threads, regs, static, dynamic,
                         carveout_percent=None if carveout < 0 else carveout, block_barriers=barriers)
        compared += 1
        same = mine.active_blocks_per_sm == blocks
        if barriers == 1:  # the header's factor bits are exact only for one barrier
            same &= set(mine.limiters) == {name for bit, name in _FLAG_NAMES.items() if flags & bit}
        if same:
            matched += 1
        else:
            mismatches.append((case, blocks, flags, mine.active_blocks_per_sm, mine.limiters))
    print(f"\ncuda_occupancy.h agreement: {matched}/{compared} configurations over "
          f"{len(NVIDIA_CCS) - len(unknown_to_header)} compute capabilities {NVIDIA_CCS}")
    assert not unknown_to_header, f"this cuda_occupancy.h does not know cc {sorted(unknown_to_header)}"
    assert compared >= 10_000
    assert mismatches == [], mismatches[:10]


def test_best_block_size_matches_cuda_occupancy_header(harness):
    rng = random.Random(7)
    requests, cases = [], []
    for cc in NVIDIA_CCS:
        lim = DB.arch(cc)
        for _ in range(BLOCK_SIZE_CONFIGS_PER_CC):
            _, regs, static, dynamic = _random_kernel(rng, lim)
            max_threads = 1024 if rng.random() < 0.6 else rng.randint(1, 1024)
            requests.append(f"B {_device(lim, 80)} {regs} {static} {dynamic} -1 1 {max_threads}")
            cases.append((cc, regs, static, dynamic, max_threads))
    for case, answer in zip(cases, _run(harness, requests)):
        cc, regs, static, dynamic, max_threads = case
        block_size, min_grid = map(int, answer.split())
        mine = best_block_size(DB.arch(cc), regs, static, dynamic,
                               max_threads_per_block=max_threads, sm_count=80)
        assert (mine.block_size, mine.min_grid_size) == (block_size, min_grid), case


# --------------------------------------------------------------------------- hand-checked


def test_rtx3080_register_limited_example():
    lim = DB.get("rtx3080").limits
    r = occupancy(lim, 256, 64, 16 * 1024)
    # 64 regs x 32 lanes = 2048 regs per warp; 16384 per sub-partition -> 8 warps each, 32 per SM
    assert r.block_limits[Limiter.REGISTERS] == 4
    # (16 KiB + 1 KiB reserved) per block in 100 KiB
    assert r.block_limits[Limiter.SHARED_MEMORY] == 5
    assert r.block_limits[Limiter.WARPS] == 6
    assert (r.active_blocks_per_sm, r.active_warps_per_sm, r.limiter) == (4, 32, Limiter.REGISTERS)
    assert r.occupancy == pytest.approx(32 / 48)


def test_carveout_bytes_round_up_to_supported_split():
    lim = DB.get("a100").limits
    # 20 KiB preferred -> next supported split is 32 KiB; 8 KiB + 1 KiB reserved per block -> 3
    r = occupancy(lim, 128, 32, 8 * 1024, carveout_bytes=20 * 1024)
    assert r.shared_memory_per_sm_bytes == 32 * 1024
    assert r.active_blocks_per_sm == 3
    assert r.limiter is Limiter.SHARED_MEMORY


def test_too_many_registers_for_block_cannot_launch():
    r = occupancy(DB.get("h100").limits, 1024, 255, 0)
    assert r.active_blocks_per_sm == 0
    assert r.limiter is Limiter.REGISTERS
    assert any("launch fails" in n for n in r.notes)


def test_large_dynamic_shared_memory_notes_the_opt_in():
    r = occupancy(DB.get("h100").limits, 256, 32, 0, 100 * 1024)
    assert r.active_blocks_per_sm == 2
    assert any("cudaFuncSetAttribute" in n for n in r.notes)


def test_what_would_it_take_registers_and_shared_memory():
    lim = DB.get("rtx3080").limits
    step = what_would_it_take(lim, 256, 64, 16 * 1024)
    assert step.target_active_blocks_per_sm == 5
    assert step.max_registers_per_thread == 48  # 48 x 32 = 1536 regs/warp -> 10 warps per partition
    assert occupancy(lim, 256, 48, 16 * 1024).active_blocks_per_sm == 5
    assert occupancy(lim, 256, 49, 16 * 1024).active_blocks_per_sm == 4
    assert step.max_shared_memory_per_block_bytes is None  # registers hold it back, not smem

    step = what_would_it_take(lim, 128, 32, 40 * 1024)  # 2 blocks, shared-memory bound
    assert step.target_active_blocks_per_sm == 3
    assert step.max_registers_per_thread is None
    smem = step.max_shared_memory_per_block_bytes
    assert occupancy(lim, 128, 32, smem).active_blocks_per_sm == 3
    assert occupancy(lim, 128, 32, smem + 128).active_blocks_per_sm == 2


def test_what_would_it_take_at_the_block_size_ceiling():
    step = what_would_it_take(DB.get("rtx3080").limits, 1024, 16, 0)
    assert step.target_active_blocks_per_sm is None
    assert "block size" in step.explanation[0]


def test_amd_wavefront_model():
    lim = DB.get("mi300x").limits
    assert lim.warp_size == 64
    r = occupancy(lim, 256, 128, 0)  # 4 waves; 512 / 128 VGPRs = 4 waves per SIMD -> 16 waves
    assert (r.active_blocks_per_sm, r.active_warps_per_sm, r.limiter) == (4, 16, Limiter.REGISTERS)
    r = occupancy(lim, 64, 8, 0)  # single-wave workgroups: only wave slots limit (32 per CU)
    assert (r.active_blocks_per_sm, r.limiter) == (32, Limiter.WARPS)
    r = occupancy(lim, 128, 8, 0)  # multi-wave workgroups: at most 16 per CU
    assert (r.active_blocks_per_sm, r.limiter) == (16, Limiter.WARPS)
    r = occupancy(lim, 256, 16, 24 * 1024)  # LDS: 64 KiB / 24 KiB -> 2
    assert (r.active_blocks_per_sm, r.limiter) == (2, Limiter.SHARED_MEMORY)
    mi100 = DB.get("mi100").limits  # gfx908: 10 waves per SIMD, 256 VGPRs, granule 4
    assert occupancy(mi100, 64, 24, 0).active_warps_per_sm == 40
    assert occupancy(mi100, 64, 26, 0).active_warps_per_sm == 36  # 256 // 28 = 9 per SIMD


def test_amd_next_step_bisects_lds_and_a_gpu_works_as_limits():
    mi300x = DB.get("mi300x")
    step = what_would_it_take(mi300x, 64, 8, 40000)  # 1 workgroup by LDS; 2 need <= 32 KiB
    assert step.max_shared_memory_per_block_bytes == 32 * 1024
    assert occupancy(mi300x, 64, 8, 32 * 1024 + 1).active_blocks_per_sm == 1
    # 64 VGPRs leave all 8 wave slots per SIMD: two 16-wave workgroups fill the CU
    assert (best_block_size(mi300x, 64).block_size, best_block_size(mi300x, 64).occupancy) == (1024, 1.0)


def test_intel_xe_model():
    lim = DB.get("max-1550").limits
    r = occupancy(lim, 256, 64, 0)  # 16 sub-groups of 16; 64 threads per Xe-core -> 4
    assert (r.active_blocks_per_sm, r.occupancy) == (4, 1.0)
    r = occupancy(lim, 256, 200, 0)  # large GRF halves the hardware threads
    assert (r.active_blocks_per_sm, r.limiter) == (2, Limiter.REGISTERS)
    r = occupancy(lim, 32, 64, 40 * 1024)  # 40 KiB SLM rounds to 48 KiB -> 2 per 128 KiB
    assert (r.active_blocks_per_sm, r.limiter) == (2, Limiter.SHARED_MEMORY)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("threads", "regs", "smem", "message"),
    [
        (0, 32, 0, "threads per block must be between 1 and 1024 on compute capability 8.6 (got 0)"),
        (2000, 32, 0, "threads per block must be between 1 and 1024 on compute capability 8.6 (got 2000)"),
        (256, 300, 0, "registers per thread must be between 0 and 255 on compute capability 8.6 (got 300)"),
        (256, -1, 0, "registers per thread must be between 0 and 255"),
        (256, 32, 64 * 1024, "static shared memory per block must be between 0 KiB and 48 KiB on compute capability 8.6 (got 64 KiB)"),
        (256, 32.5, 0, "registers per thread must be a whole number"),
    ],
)
def test_absurd_inputs_are_named(threads, regs, smem, message):
    with pytest.raises(OccupancyInputError, match=re.escape(message)):
        occupancy(DB.get("rtx3080").limits, threads, regs, smem)


def test_total_shared_memory_over_the_block_maximum():
    with pytest.raises(OccupancyInputError, match="exceeds the 99 KiB a block may use"):
        occupancy(DB.get("rtx3080").limits, 256, 32, 40 * 1024, 60 * 1024)


def test_amd_and_intel_bad_input():
    with pytest.raises(OccupancyInputError, match="VGPRs per thread must be between 0 and 256 on gfx908"):
        occupancy(DB.get("mi100").limits, 64, 300, 0)
    with pytest.raises(OccupancyInputError, match="sub-group size must be one of 16, 32"):
        occupancy(DB.get("max1550").limits, 64, 32, 0, subgroup_size=8)

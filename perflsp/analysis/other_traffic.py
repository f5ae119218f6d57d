"""DRAM traffic of the GPU's other clients while a kernel runs.

A profiler's DRAM counters count every byte the memory controllers move during the kernel, not
only the kernel's: a desktop card that drives a display reads its framebuffer all the time (a
2560x1440 screen at 144 Hz scans out about 2 GB/s). That traffic grows with the kernel's run
time, not with its accesses, so a long kernel that touches little memory still shows a DRAM
figure of run time x rate. A GPU's `other_dram_traffic_gbs` (0 for a headless card) gives the
rate; the run time is the roofline's time over the kernel's own parts, stretched by the share of
its peak a kernel reaches.

The study's RTX 3080 shows it: its kernels running 5 ms or longer never measured less than
1.1 GB/s of DRAM traffic, whatever they accessed (from 1.10 to 1.26 GB/s at the bottom), while
most shorter ones measured none at all (the scanout comes in bursts a short kernel mostly
misses): the traffic is counted for a run time of 5 ms or more. A kernel ran a median 2.1x
(those over 5 ms; 2.4x for all) the roofline's time over its measured parts.

The roofline's time assumes the whole GPU's throughput; a launch too small to hide latency
(one block looping ten million times) runs far longer: its threads' instructions one after
another. Among the study's kernels over 1 ms, 90% ran at least 12 cycles per instruction of a
thread per wave of blocks (11.7 at the 10th percentile), so the run time is at least waves x a
thread's instructions x 12 cycles. All these figures are fitted to measured parts (DRAM bytes,
run time), not to labels. Such a kernel's verdict can move with the added bytes, as its
profile's did: a kernel that runs long and moves little is bandwidth-bound by what the
profiler counts.
"""

from __future__ import annotations

import math

from perflsp.analysis.memory import _bytes, with_dram_added
from perflsp.analysis.models import KernelFacts
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.hardware.models import Gpu, NvidiaArchLimits
from perflsp.hardware.precision import Precision
from perflsp.hardware.units import format_seconds

# a kernel's run time over the roofline's time for its parts (see the module's docstring)
RUN_TIME_OVER_ROOFLINE = 2.0
# the shortest run time over which the other clients' traffic is counted (see the module's docstring)
MIN_SECONDS = 5e-3
# the fewest cycles a thread's instruction takes in a wave of blocks (see the module's docstring)
CYCLES_PER_THREAD_INSTRUCTION = 12.0
# FLOP per floating-point instruction in a mix of FMAs (2) and adds or multiplies (1)
FLOP_PER_FP_INSTRUCTION = 1.5


def roofline_seconds(facts: KernelFacts, gpu: Gpu) -> float:
    """The time the roofline gives the launch on `gpu`: its slowest roof, DRAM or a precision's
    operations, at peak."""
    total = facts.total
    times = [facts.dram_bytes / gpu.memory_bandwidth_bytes_per_s]
    for precision, ops in ((Precision.FP32, total.fp32), (Precision.FP64, total.fp64),
                           (Precision.FP16, total.fp16), (Precision.INT32, total.int32)):
        peak = gpu.peak_ops_per_s(precision)
        if ops > 0 and peak:
            times.append(ops / peak)
    return max(times)


def serial_seconds(facts: KernelFacts, gpu: Gpu, threads: int | None) -> float:
    """The least time the launch's threads take with their instructions one after another:
    waves of blocks x a thread's instructions x `CYCLES_PER_THREAD_INSTRUCTION` at the GPU's
    clock (0 where the block size or the threads are not known, or the GPU is no NVIDIA one)."""
    limits = gpu.limits
    if not threads or not facts.work_items or not isinstance(limits, NvidiaArchLimits):
        return 0.0
    p = facts.per_item
    instructions = (p.int32 + (p.fp32 + p.fp64 + p.fp16) / FLOP_PER_FP_INSTRUCTION + p.special + p.atomics
                    + p.global_loads + p.global_stores + p.shared_accesses)
    resident = max(1, min(limits.max_blocks_per_sm, limits.max_threads_per_sm // threads))
    waves = math.ceil(math.ceil(facts.work_items / threads) / (gpu.sm_count * resident))
    clock = (gpu.base_clock_mhz or gpu.boost_clock_mhz) * 1e6
    return waves * instructions * CYCLES_PER_THREAD_INSTRUCTION / clock


def with_other_traffic(facts: KernelFacts, gpu: Gpu, threads: int | None = None) -> KernelFacts:
    """The facts with the DRAM traffic of `gpu`'s other clients over the kernel's run time added
    to its DRAM bytes (`threads`: the block's); the same facts for a headless GPU, a kernel the
    engine did not understand, or one shorter than the scanout is seen over."""
    rate = gpu.other_dram_traffic_gbs * 1e9
    if rate <= 0.0 or facts.uncertain is not None or facts.work_items is None:
        return facts
    roofline = RUN_TIME_OVER_ROOFLINE * roofline_seconds(facts, gpu)
    serial = serial_seconds(facts, gpu, threads)
    seconds = max(roofline, serial)
    if seconds < MIN_SECONDS:
        return facts
    added = rate * seconds
    how = (f"{RUN_TIME_OVER_ROOFLINE:g}x the roofline's" if roofline >= serial else
           f"its threads' instructions one after another, {CYCLES_PER_THREAD_INSTRUCTION:g} cycles each per wave "
           "(too few threads to hide latency)")
    remark = (f"{_bytes(added)} of other DRAM clients over the kernel's run time ({gpu.other_dram_traffic_gbs:g} GB/s "
              f"for about {format_seconds(seconds)})")
    return with_dram_added(facts, added, remark, assumed(
        NoteKind.OTHER_TRAFFIC,
        f"{gpu.name}: other clients of its DRAM (a display's scanout) move {gpu.other_dram_traffic_gbs:g} GB/s while "
        f"the kernel runs (seen over runs of {format_seconds(MIN_SECONDS)} or more), counted with its DRAM bytes as "
        f"a profiler counts them; run time taken as {how}", subject=gpu.name))

"""DRAM traffic of the GPU's other clients while a kernel runs.

A profiler's DRAM counters count every byte the memory controllers move during the kernel, not
only the kernel's: a desktop card that drives a display reads its framebuffer all the time (a
2560x1440 screen at 144 Hz scans out about 2 GB/s). That traffic grows with the kernel's run
time, not with its accesses, so a long kernel that touches little memory still shows a DRAM
figure of run time x rate. A GPU's `other_dram_traffic_gbs` (0 for a headless card) gives the
rate; the run time is the roofline's time over the kernel's own parts, stretched by the share of
its peak a kernel reaches.

The study's RTX 3080 shows it: its kernels running 5 ms or longer never measured less than
1.1 GB/s of DRAM traffic, whatever they accessed (from 1.10 to 1.26 GB/s at the bottom), and a
kernel ran a median 2.1x (those over 5 ms; 2.4x for all) the roofline's time over its
measured parts. Both figures are fitted to measured parts (DRAM bytes, run time), not to labels.
The added bytes never move a verdict: the traffic a kernel's run time brings, at a rate far
below the bandwidth, can never bring its intensity down to a ridge.
"""

from __future__ import annotations

from perflsp.analysis.memory import _bytes, with_dram_added
from perflsp.analysis.models import KernelFacts
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.hardware.models import Gpu
from perflsp.hardware.precision import Precision
from perflsp.hardware.units import format_seconds

# a kernel's run time over the roofline's time for its parts (see the module's docstring)
RUN_TIME_OVER_ROOFLINE = 2.0


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


def with_other_traffic(facts: KernelFacts, gpu: Gpu) -> KernelFacts:
    """The facts with the DRAM traffic of `gpu`'s other clients over the kernel's run time added
    to its DRAM bytes; the same facts for a headless GPU or a kernel the engine did not understand."""
    rate = gpu.other_dram_traffic_gbs * 1e9
    if rate <= 0.0 or facts.uncertain is not None or facts.work_items is None:
        return facts
    seconds = RUN_TIME_OVER_ROOFLINE * roofline_seconds(facts, gpu)
    added = rate * seconds
    if added < 1.0:
        return facts
    remark = (f"{_bytes(added)} of other DRAM clients over the kernel's run time ({gpu.other_dram_traffic_gbs:g} GB/s "
              f"for about {format_seconds(seconds)})")
    return with_dram_added(facts, added, remark, assumed(
        NoteKind.OTHER_TRAFFIC,
        f"{gpu.name}: other clients of its DRAM (a display's scanout) move {gpu.other_dram_traffic_gbs:g} GB/s while "
        f"the kernel runs, counted with its DRAM bytes as a profiler counts them; run time taken as "
        f"{RUN_TIME_OVER_ROOFLINE:g}x the roofline's", subject=gpu.name))

"""Instruction costs the engine assumes, in one place.

FP figures are FLOP as Nsight Compute counts them (FADD/FMUL = 1, FFMA = 2; the same for FP64
and FP16), integer figures are SASS integer instructions. Library calls expand to the sequences
nvcc emits for them by default (IEEE division and square root, full-range transcendental
functions), measured from PTX/SASS of small test kernels and rounded.
The tunable model constants live in `CostModel`; their values are fitted on labeled data with
cross-validation grouped by benchmark (see docs/engine.md) and are the same for every kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

# name -> (FP operations, special-function-unit instructions, integer instructions)
# for the single-precision function; the double variant is looked up by its own name.
MATH_FP32: dict[str, tuple[float, float, float]] = {
    "sqrtf": (6, 1, 1), "rsqrtf": (1, 1, 0), "cbrtf": (10, 2, 2), "rcbrtf": (10, 2, 2),
    "expf": (4, 1, 1), "exp2f": (1, 1, 0), "exp10f": (4, 1, 1), "expm1f": (14, 1, 2),
    "logf": (16, 1, 3), "log2f": (6, 1, 2), "log10f": (16, 1, 3), "log1pf": (18, 1, 3),
    "sinf": (24, 0, 6), "cosf": (24, 0, 6), "tanf": (30, 1, 6), "sincosf": (32, 0, 8),
    "asinf": (16, 1, 1), "acosf": (16, 1, 1), "atanf": (18, 1, 1), "atan2f": (24, 1, 2),
    "sinhf": (14, 1, 1), "coshf": (12, 1, 1), "tanhf": (12, 1, 1),
    "powf": (40, 2, 6), "erff": (18, 1, 1), "erfcf": (24, 1, 2), "hypotf": (10, 1, 2),
    "fmodf": (16, 1, 6), "remainderf": (16, 1, 6), "lgammaf": (60, 2, 6), "tgammaf": (60, 2, 6),
    "normcdff": (20, 1, 2), "fabsf": (0, 0, 0), "fminf": (0, 0, 0), "fmaxf": (0, 0, 0),
    "floorf": (0, 0, 0), "ceilf": (0, 0, 0), "truncf": (0, 0, 0), "roundf": (2, 0, 0),
    "rintf": (0, 0, 0), "fmaf": (2, 0, 0), "copysignf": (0, 0, 1), "fdimf": (1, 0, 0),
    "__expf": (1, 1, 0), "__logf": (1, 1, 0), "__sinf": (0, 1, 0), "__cosf": (0, 1, 0),
    "__sincosf": (0, 2, 0), "__powf": (2, 2, 0), "__fdividef": (1, 1, 0), "__frcp_rn": (4, 1, 0),
    "__fsqrt_rn": (6, 1, 0), "__frsqrt_rn": (1, 1, 0), "__tanf": (1, 3, 0), "__log2f": (0, 1, 0),
    "__log10f": (1, 1, 0), "__exp10f": (1, 1, 0), "__saturatef": (0, 0, 0),
    "__fadd_rn": (1, 0, 0), "__fmul_rn": (1, 0, 0), "__fmaf_rn": (2, 0, 0), "__fdiv_rn": (8, 1, 1),
    "__fsub_rn": (1, 0, 0), "__fadd_rd": (1, 0, 0), "__fadd_ru": (1, 0, 0), "__fmul_rd": (1, 0, 0),
    "__fmul_ru": (1, 0, 0), "__fmaf_rd": (2, 0, 0), "__fmaf_ru": (2, 0, 0), "__fmaf_rz": (2, 0, 0),
}
MATH_FP64: dict[str, tuple[float, float, float]] = {
    "sqrt": (14, 1, 2), "rsqrt": (10, 1, 2), "cbrt": (24, 1, 4), "exp": (36, 0, 6), "exp2": (30, 0, 6),
    "exp10": (36, 0, 6), "expm1": (40, 0, 6), "log": (44, 0, 8), "log2": (44, 0, 8), "log10": (46, 0, 8),
    "log1p": (48, 0, 8), "sin": (50, 0, 10), "cos": (50, 0, 10), "tan": (56, 1, 10), "sincos": (70, 0, 14),
    "asin": (46, 1, 4), "acos": (46, 1, 4), "atan": (50, 1, 4), "atan2": (60, 1, 6),
    "sinh": (40, 0, 6), "cosh": (40, 0, 6), "tanh": (44, 1, 6), "pow": (120, 1, 20), "erf": (48, 0, 4),
    "erfc": (56, 1, 4), "hypot": (24, 1, 4), "fmod": (40, 1, 20), "lgamma": (150, 2, 12), "tgamma": (150, 2, 12),
    "normcdf": (50, 1, 4), "fabs": (0, 0, 0), "fmin": (0, 0, 0), "fmax": (0, 0, 0), "floor": (0, 0, 1),
    "ceil": (0, 0, 1), "trunc": (0, 0, 1), "round": (2, 0, 1), "rint": (0, 0, 1), "fma": (2, 0, 0),
    "copysign": (0, 0, 1), "fdim": (1, 0, 0),
    "__dadd_rn": (1, 0, 0), "__dmul_rn": (1, 0, 0), "__fma_rn": (2, 0, 0), "__ddiv_rn": (16, 1, 2),
    "__dsqrt_rn": (14, 1, 2), "__drcp_rn": (8, 1, 1), "__dsub_rn": (1, 0, 0),
}
# C++ overloads that take the precision of their argument (`sqrt(float)` is the float version
# in CUDA C++); the pure-C names ending in `f` are in MATH_FP32.
OVERLOADED = {name for name in MATH_FP64 if not name.startswith("__")}

HALF_INTRINSICS = {"__hadd": 1, "__hsub": 1, "__hmul": 1, "__hfma": 2, "__hadd2": 2, "__hsub2": 2, "__hmul2": 2,
                   "__hfma2": 4, "__hdiv": 6, "h2sqrt": 4, "hsqrt": 2, "hexp": 4, "h2exp": 8, "__hneg": 0}

# Division (the divisor is not a constant): IEEE-correct sequences nvcc emits by default.
FP32_DIV = (8.0, 1.0, 1.0)
FP64_DIV = (16.0, 1.0, 2.0)
INT32_DIV = 20.0  # integer instructions of a 32-bit division or modulo by a runtime value
INT64_DIV = 70.0
INT_DIV_BY_CONSTANT = 3.0  # multiply-high and shifts
ATOMIC_FUNCTIONS = {"atomicAdd", "atomicSub", "atomicExch", "atomicMin", "atomicMax", "atomicInc", "atomicDec",
                    "atomicCAS", "atomicAnd", "atomicOr", "atomicXor", "atomicAdd_system", "atomicAdd_block",
                    "atomicMax_block", "atomicMin_block", "atomicCAS_block", "atomicExch_block"}
SYNC_FUNCTIONS = {"__syncthreads", "__syncwarp", "__threadfence", "__threadfence_block", "__syncthreads_or",
                  "__syncthreads_and", "__syncthreads_count", "sync", "grid.sync", "__nanosleep", "printf"}
# cooperative groups' handles (`cg::this_thread_block()`): a view of the launch, no instruction
GROUP_HANDLES = {"this_thread_block", "this_grid", "this_multi_grid", "tiled_partition", "coalesced_threads",
                 "this_cluster"}
WARP_FUNCTIONS = {"__shfl_sync", "__shfl_down_sync", "__shfl_up_sync", "__shfl_xor_sync", "__shfl",
                  "__shfl_down", "__shfl_up", "__shfl_xor", "__ballot_sync", "__any_sync", "__all_sync",
                  "__activemask", "__popc", "__popcll", "__clz", "__clzll", "__ffs", "__ffsll", "__brev",
                  "__byte_perm", "__funnelshift_l", "__funnelshift_r", "__mul24", "__umul24", "__mulhi",
                  "__umulhi", "__sad", "__usad", "__vabsdiffu4", "__dp4a", "__reduce_add_sync"}
LOAD_FUNCTIONS = {"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"}
# texture fetches: the coordinates they take (a layer or a cube face is one more)
TEXTURE_FETCHES = {"tex1Dfetch": 1, "tex1D": 1, "tex1DLod": 1, "tex1DGrad": 1, "tex2D": 2, "tex2DLod": 2,
                   "tex2DGrad": 2, "tex2Dgather": 2, "tex3D": 3, "tex3DLod": 3, "tex3DGrad": 3,
                   "tex1DLayered": 2, "tex1DLayeredLod": 2, "tex2DLayered": 3, "tex2DLayeredLod": 3,
                   "texCubemap": 3, "texCubemapLod": 3}
STORE_FUNCTIONS = {"__stcg", "__stcs", "__stwb", "__stwt"}
# surface reads and writes: the coordinates they take (x in bytes; a layer or a cube face is one more)
SURFACE_READS = {"surf1Dread": 1, "surf2Dread": 2, "surf3Dread": 3, "surf1DLayeredread": 2, "surf2DLayeredread": 3,
                 "surfCubemapread": 3, "surfCubemapLayeredread": 3}
SURFACE_WRITES = {"surf1Dwrite": 1, "surf2Dwrite": 2, "surf3Dwrite": 3, "surf1DLayeredwrite": 2,
                  "surf2DLayeredwrite": 3, "surfCubemapwrite": 3, "surfCubemapLayeredwrite": 3}


@dataclass(frozen=True)
class CostModel:
    """Model constants (same for every kernel).

    The first group are instruction costs read off compiled code; the second are calibration
    constants fitted on profiled kernels (RTX 3080 labels, cross-validation grouped by benchmark,
    see docs/engine.md) and chosen from coarse grids, so they describe hardware and compiler
    behaviour rather than any one kernel.
    """

    int_per_global_access: float = 2.0  # 64-bit address arithmetic per global load/store
    int_per_shared_access: float = 1.0
    int_per_loop_iteration: float = 2.0  # counter update + compare (not for unrolled loops)
    int_per_thread: float = 3.0  # thread index, bounds check, exit
    int_per_byte_element: float = 1.0  # extra integer work to handle 8/16-bit elements
    unroll_limit: float = 32.0  # loops with a compile-time trip count up to this are unrolled
    sector_bytes: float = 32.0
    branch_weight: float = 0.5  # fraction of items assumed to take a data-dependent branch
    assumed_trip_count: float = 32.0  # a loop whose bound is unknown
    assumed_row_trip: float = 8.0  # a loop whose bound is read from memory (a row's count or end)
    assumed_while_trips: float = 8.0  # a `while` loop with a data-dependent condition
    # iterations per thread of an OpenMP launch at the runtime's team limit whose loop size the
    # source does not state (the launch says only that there are at least one each): fitted to
    # the measured counts of the study split (1, 2, 3, 4, 6: see docs/engine.md)
    assumed_capped_iterations: float = 3.0
    # work items (threads / iterations) when nothing tells the size: production scale, so that
    # every array streamed by the launch is far larger than any GPU's L2 (2^24 floats = 64 MiB)
    assumed_problem_size: float = 1 << 24

    # calibrated
    int_arith_factor: float = 0.35  # source-level integer operations per SASS instruction
    # (multiply-add fusion, immediates, strength reduction)
    int_per_omp_iteration: float = 24.0  # the OpenMP device runtime's work per loop iteration
    # every launch moves some DRAM traffic (code, constants, set-up): fitted to the measured DRAM
    # bytes of the study split (the share within 2x of Nsight Compute peaks at 64 KiB)
    min_dram_bytes: float = 65536.0
    # a launch whose code touches no global memory moves only its parameters and code: Nsight
    # Compute measured 3.3-4.2 KB for the empty kernels of the study split
    launch_dram_bytes: float = 4096.0

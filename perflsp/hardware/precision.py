"""Precision kinds a GPU peak (and a kernel's operation count) can be expressed in.

The hardware layer owns these names; the analysis layer uses the same string values, so
"fp64", "fp32", "fp16" and "int32" mean the same thing on both sides.
"""

from __future__ import annotations

from enum import StrEnum


class Precision(StrEnum):
    # non-tensor (vector / CUDA-core) arithmetic
    FP64 = "fp64"
    FP32 = "fp32"
    FP32_PACKED = "fp32_packed"  # AMD CDNA2 packed FP32 (two FP32 per lane and clock)
    FP16 = "fp16"
    BF16 = "bf16"
    INT32 = "int32"
    # tensor cores (NVIDIA), matrix cores (AMD MFMA), XMX (Intel); dense rates
    FP64_TENSOR = "fp64_tensor"
    FP32_TENSOR = "fp32_tensor"  # AMD FP32 matrix
    TF32_TENSOR = "tf32_tensor"
    FP16_TENSOR = "fp16_tensor"  # FP32 accumulate
    FP16_TENSOR_FP16ACC = "fp16_tensor_fp16acc"
    BF16_TENSOR = "bf16_tensor"
    FP8_TENSOR = "fp8_tensor"  # FP32 accumulate
    FP8_TENSOR_FP16ACC = "fp8_tensor_fp16acc"
    FP6_TENSOR = "fp6_tensor"
    FP4_TENSOR = "fp4_tensor"
    INT8_TENSOR = "int8_tensor"
    INT4_TENSOR = "int4_tensor"

    @property
    def is_tensor(self) -> bool:
        return self.value.endswith(("_tensor", "_fp16acc"))

    @property
    def is_integer(self) -> bool:
        return self.value.startswith("int")


# The precisions a roofline verdict is decided on (analysis.roofline uses the same values).
ROOFLINE_PRECISIONS: tuple[Precision, ...] = (
    Precision.FP64,
    Precision.FP32,
    Precision.FP16,
    Precision.INT32,
)

# Tensor-core precisions a kernel's matrix multiply-accumulates are counted in (the static
# engine's `OpCounts.tensor_*`); they join the verdict when a kernel has such work and the GPU a
# peak for it.
TENSOR_PRECISIONS: tuple[Precision, ...] = (
    Precision.FP64_TENSOR,
    Precision.TF32_TENSOR,
    Precision.FP16_TENSOR,
    Precision.FP16_TENSOR_FP16ACC,
    Precision.BF16_TENSOR,
    Precision.INT8_TENSOR,
)

"""Kernels, OpenMP regions and launch sites found in source files."""

from perflsp.kernels.extract import extract, extract_path
from perflsp.kernels.models import (
    ArraySection,
    ConstValue,
    CudaFunction,
    FileKernels,
    LaunchBounds,
    LaunchSite,
    LoopHeader,
    OmpClause,
    OmpRegion,
    Param,
    Span,
    TemplateParam,
)

__all__ = [
    "ArraySection", "ConstValue", "CudaFunction", "FileKernels", "LaunchBounds", "LaunchSite",
    "LoopHeader", "OmpClause", "OmpRegion", "Param", "Span", "TemplateParam", "extract", "extract_path",
]

"""Hardware layer: the GPU database, user GPUs, the occupancy calculator and ptxas resource usage.

Imports nothing from the analysis layer (which sits below it); `Precision` is defined here and
the analysis uses the same values.
"""

from perflsp.hardware.database import (
    GpuConfigError,
    GpuDatabase,
    UnknownGpuError,
    load_database,
    normalize_name,
)
from perflsp.hardware.models import (
    AmdArchLimits,
    ArchLimits,
    Gpu,
    IntelArchLimits,
    NvidiaArchLimits,
    Peak,
)
from perflsp.hardware.occupancy import (
    BlockSizeSuggestion,
    Limiter,
    NextStep,
    OccupancyInputError,
    OccupancyResult,
    best_block_size,
    occupancy,
    what_would_it_take,
)
from perflsp.hardware.precision import ROOFLINE_PRECISIONS, Precision

__all__ = [
    "ROOFLINE_PRECISIONS",
    "AmdArchLimits",
    "ArchLimits",
    "BlockSizeSuggestion",
    "Gpu",
    "GpuConfigError",
    "GpuDatabase",
    "IntelArchLimits",
    "Limiter",
    "NextStep",
    "NvidiaArchLimits",
    "OccupancyInputError",
    "OccupancyResult",
    "Peak",
    "Precision",
    "UnknownGpuError",
    "best_block_size",
    "load_database",
    "normalize_name",
    "occupancy",
    "what_would_it_take",
]

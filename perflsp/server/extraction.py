"""The incremental extraction the server schedules lives in the kernels layer
(`perflsp.kernels.incremental`); these names stay importable from here for the server's
document and scheduling modules."""

from perflsp.kernels.incremental import Extracted, changed_region, extract_full, extract_incremental, signature

__all__ = ["Extracted", "changed_region", "extract_full", "extract_incremental", "signature"]

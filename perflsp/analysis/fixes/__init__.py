"""Validated edit builders: the one place where perflsp turns a decision into source text.

Lint fixes, LSP code actions and LLM proposals all go through these functions, so every edit
the user is offered has been checked the same way: inputs in range, and the edited document
re-parses with no new syntax errors (and, where a value was foldable before, extraction folds the
new value afterwards). A builder that cannot produce a safe edit raises `EditError` with a
sentence saying why; callers then simply offer no fix.

Edits are `ByteEdit`s (byte offsets into the document as given); `apply_edits` applies them.

The builders live by fix kind in this package's modules (`precision`, `launch_bounds`,
`block_size`, `omp_clauses`; `requests` builds a lint's requested fixes); `document` holds what
they share. Their public names are importable from here.
"""

from perflsp.analysis.fixes.block_size import best_block_for, preferred_block_size, set_block_size
from perflsp.analysis.fixes.document import (
    MAX_MIN_BLOCKS_PER_SM,
    MAX_NUM_TEAMS,
    MAX_THREADS_PER_BLOCK,
    EditError,
    apply_edits,
    syntax_error_count,
    validated_fix,
)
from perflsp.analysis.fixes.launch_bounds import set_launch_bounds
from perflsp.analysis.fixes.launch_document import block_size_assumed, grid_strided, launch_document
from perflsp.analysis.fixes.omp_clauses import set_omp_clauses
from perflsp.analysis.fixes.precision import float_function_fix, float_literal_fix, square_fix
from perflsp.analysis.fixes.requests import build_fix, build_fixes, with_fixes

__all__ = [
    "MAX_MIN_BLOCKS_PER_SM",
    "MAX_NUM_TEAMS",
    "MAX_THREADS_PER_BLOCK",
    "EditError",
    "apply_edits",
    "best_block_for",
    "block_size_assumed",
    "build_fix",
    "build_fixes",
    "float_function_fix",
    "float_literal_fix",
    "grid_strided",
    "launch_document",
    "preferred_block_size",
    "set_block_size",
    "set_launch_bounds",
    "set_omp_clauses",
    "square_fix",
    "syntax_error_count",
    "validated_fix",
    "with_fixes",
]

"""The OpenMP clause fix: set `num_teams` / `thread_limit` on a target teams directive."""

from __future__ import annotations

import re

from tree_sitter import Tree

from perflsp.analysis.fixes.document import MAX_NUM_TEAMS, MAX_THREADS_PER_BLOCK, EditError, _check_int, _text, validated_fix
from perflsp.analysis.fixes.launch_bounds import _index_of
from perflsp.analysis.fixes.launch_exprs import _parse_text_expression, _Refs
from perflsp.analysis.models import ByteEdit, Fix
from perflsp.kernels.models import OmpRegion
from perflsp.kernels.program import ProgramModel
from perflsp.kernels.text import blank_comments_and_strings

_CLAUSE = re.compile(rb"([A-Za-z_]\w*)\s*\(")


def _pragma_clauses(blanked: bytes, start: int, end: int) -> dict[str, tuple[int, int]]:
    """Clause name -> byte range of its argument (inside the parentheses), for top-level clauses."""
    found: dict[str, tuple[int, int]] = {}
    pos = start
    while True:
        m = _CLAUSE.search(blanked, pos, end)
        if m is None:
            return found
        depth = 0
        i = m.end() - 1
        while i < end:
            ch = blanked[i]
            if ch == ord("("):
                depth += 1
            elif ch == ord(")"):
                depth -= 1
                if depth == 0:
                    break
            i += 1
        if depth != 0:
            raise EditError("the directive has unbalanced parentheses")
        found.setdefault(m.group(1).decode(), (m.end(), i))
        pos = i + 1


def _check_teams_directive(region: OmpRegion) -> None:
    """Refuse directives whose team shape cannot be changed by editing their clauses."""
    words = region.directive.split()
    if "teams" not in words:
        raise EditError(f"`{region.directive}` has no teams construct: thread_limit/num_teams need `teams`")
    if "distribute" not in words and "loop" not in words:
        raise EditError(f"`{region.directive}` shares out its work by hand (no `distribute` or `loop`): its code may "
                        "assume the current team and thread counts; change them by hand")
    if not region.pragma_text.lstrip().startswith("#"):
        raise EditError("the directive is written through `_Pragma` or a macro: change its clauses by hand")
    if "teams" not in region.pragma_text.split():
        raise EditError("`teams` is on a separate directive after `target`: add thread_limit/num_teams there by hand")


def set_omp_clauses(model: ProgramModel, region: OmpRegion, thread_limit: int | None = None,
                    num_teams: int | None = None) -> Fix:
    """Add or replace `thread_limit(...)` / `num_teams(...)` on a `teams` directive. A
    `num_teams` computed as a ceiling division by the old thread limit follows a new one."""
    if thread_limit is None and num_teams is None:
        raise EditError("give a thread_limit, a num_teams or both")
    if thread_limit is not None:
        _check_int("thread_limit", thread_limit, 1, MAX_THREADS_PER_BLOCK)
    if num_teams is not None:
        _check_int("num_teams", num_teams, 1, MAX_NUM_TEAMS)
    _check_teams_directive(region)
    data, tree = model.data, model.tree
    fk = model.kernels
    index = _index_of(fk.omp_regions, region)
    blanked = blank_comments_and_strings(data)
    start, end = region.span.start_byte, region.span.end_byte
    clauses = _pragma_clauses(blanked, start, end)
    insert_at = _directive_end(blanked, start, end)
    edits: list[ByteEdit] = []
    additions: list[str] = []
    parts: list[str] = []

    if thread_limit is not None:
        parts.append(f"thread_limit({thread_limit})")
        old = clauses.get("thread_limit")
        if old is not None:
            old_text = _text(data, *old).strip()
            edits.append(ByteEdit(old[0], old[1], str(thread_limit)))
            teams = clauses.get("num_teams")
            if num_teams is None and teams is not None:
                limit_clause = region.clause("thread_limit")
                old_value = limit_clause.value if limit_clause is not None else None
                refs = _Refs(old_value.value if old_value is not None and isinstance(old_value.value, int) else None,
                             thread_limit, lambda name: name == old_text)
                try:
                    edits.extend(refs.rewrite(_parse_text_expression(data, *teams), "num_teams"))
                except EditError:
                    pass  # num_teams is a request, not a correctness matter: leave it as written
        else:
            additions.append(f"thread_limit({thread_limit})")
    if num_teams is not None:
        parts.append(f"num_teams({num_teams})")
        old = clauses.get("num_teams")
        if old is not None:
            edits.append(ByteEdit(old[0], old[1], str(num_teams)))
        else:
            additions.append(f"num_teams({num_teams})")
    if additions:
        edits.append(ByteEdit(insert_at, insert_at, " " + " ".join(additions)))

    def check(new_data: bytes, new_tree: Tree) -> None:
        regions = model.reread(new_data, new_tree).kernels.omp_regions
        if len(regions) != len(fk.omp_regions):
            raise EditError("the edit changed which OpenMP regions the file contains")
        new_region = regions[index]
        for name, wanted in (("thread_limit", thread_limit), ("num_teams", num_teams)):
            if wanted is None:
                continue
            clause = new_region.clause(name)
            if clause is None:
                raise EditError(f"the edited directive has no {name} clause")
            if clause.value is not None and clause.value.known and clause.value.value != wanted:
                raise EditError(f"after the edit {name} folds to {clause.value.value}")

    return validated_fix(data, tree, f"Set {' '.join(parts)} on the target region at line {region.line}", edits,
                         kind="refactor", check=check)


def _directive_end(blanked: bytes, start: int, end: int) -> int:
    """End of the directive's text: before trailing spaces and a trailing comment (which the
    blanked text shows as spaces)."""
    pos = end
    while pos > start and blanked[pos - 1:pos] in (b" ", b"\t", b"\\", b"\r", b"\n"):
        pos -= 1
    return pos

"""OpenMP target regions: the offloaded statement macro-expanded and walked, its worksharing
loops as the parallel iteration space, the host variables it uses bound from the enclosing
function, the launch shape from its clauses (or the options)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from tree_sitter import Node

from perflsp.analysis.compiled_facts import access_widths, kernel_shift, operations
from perflsp.analysis.costs import CostModel
from perflsp.analysis.ctype import F32, INT, CType, parse_type
from perflsp.analysis.finish import count_text, finish, uncertain_facts
from perflsp.analysis.host_types import bind_host_variables, host_types, template_values
from perflsp.analysis.host_types import template_types as instantiated_types
from perflsp.analysis.linear import Linear
from perflsp.analysis.models import KernelFacts, LoopFact, StackFrames
from perflsp.analysis.notes import Note, NoteKind, assumed, problem_size_unknown
from perflsp.analysis.unit import AnalysisUnit
from perflsp.analysis.walk_loops import loop_init, trip_count
from perflsp.analysis.walk_profile import begin_profile_loop, end_profile_loop
from perflsp.analysis.walk_values import LaunchShape, Val
from perflsp.analysis.walker import KernelWalker
from perflsp.compiled.model import CompiledUnit
from perflsp.compiled.names import argument_value, omp_region
from perflsp.compiled.profile import SourceProfile
from perflsp.kernels.consteval import assumed_notes, assumed_reads
from perflsp.kernels.definitions import template_value_names
from perflsp.kernels.models import OmpRegion


def omp_facts(unit: AnalysisUnit, region: OmpRegion,
              compiled: CompiledUnit | None = None) -> tuple[KernelFacts, int | None, int]:
    """The region's facts; with `compiled`, its operations are those of its offload entry in the
    compiled code (each block weighted by how often the walk says it runs)."""
    cost = unit.options.cost
    if region.body_span is None:
        return uncertain_facts("no statement follows the `#pragma omp target` directive"), None, 0
    assumptions: list[Note] = []
    arguments_read = assumed_reads()
    function = unit.model.enclosing_function(region.span.start_byte)
    host_env = unit.env_at(region.span.start_byte)
    named = unit.options.instantiation
    types = host_types(unit, function, region.span.start_byte, named=named)
    body_end = region.body_span.end_byte
    body_text = unit.data[region.body_span.start_byte : body_end].decode("utf-8", errors="replace")
    expanded = unit.model.expand(body_text)
    if expanded.strip().endswith(")"):
        # a loop header hidden in a macro (`KERNEL_LOOP(i, n) { ... }`): the block that follows
        # belongs to it
        statement_node = unit.tree.root_node.descendant_for_byte_range(region.body_span.start_byte, body_end)
        while (statement_node is not None and statement_node.parent is not None
               and statement_node.parent.start_byte == statement_node.start_byte
               and statement_node.parent.type not in ("compound_statement", "translation_unit")):
            statement_node = statement_node.parent
        following = statement_node.next_named_sibling if statement_node is not None else None
        if following is not None:
            body_end = following.end_byte
            body_text = unit.data[region.body_span.start_byte : body_end].decode("utf-8", errors="replace")
            expanded = unit.model.expand(body_text)
    wrapped = f"void __perflsp_region() {{\n{expanded}\n}}\n".encode("utf-8", errors="replace")
    parsed = unit.model.parse_function(wrapped)
    fn = parsed.node if parsed is not None else None
    if fn is None:
        return uncertain_facts("the offloaded statement could not be parsed"), None, 0
    body = fn.child_by_field_name("body")
    statement = next((c for c in body.named_children if c.type not in ("comment", "preproc_call")), None) if body else None
    threads = _clause_number(region, "thread_limit")
    teams = None
    override = unit.options.launch_override
    if override is not None:
        teams = math.prod(override[0])
        threads = math.prod(override[1])
    if teams is None:
        teams = _clause_number(region, "num_teams")
    words = set(region.directive.split())
    spmd = ("teams" in words and not words & {"distribute", "for", "loop", "simd"}
            and (_OMP_SPMD_CALLS.search(expanded) is not None or _OMP_PARALLEL.search(expanded) is not None)
            and _nested_worksharing_loop(statement) is None
            if statement is not None else False)
    shape_assumed = spmd and (teams is None or threads is None)
    if shape_assumed:
        # CUDA-style region (every thread of every team runs it, indexing itself with
        # omp_get_team_num()/omp_get_thread_num()) whose launch shape the source does not say
        threads = threads or 256
        teams = teams or max(1, int(cost.assumed_problem_size // threads))
        assumptions.insert(0, problem_size_unknown(f"{count_text(float(teams * threads))} threads, {teams} teams × {threads}",
                                                   float(teams * threads), "threads"))
    shape = LaunchShape((float(teams), 1.0, 1.0) if teams else None, (float(threads), 1.0, 1.0) if threads else None)
    aliases = dict(unit.type_aliases)
    function_text = unit.data[function.start_byte : function.end_byte].decode("utf-8", errors="replace") \
        if function is not None else expanded
    instantiated = instantiated_types(unit, function, named)
    for parameter in unit.model.template_type_parameters(region.span.start_byte):
        # `(T)1.0`, `T *a` in a method of `template <class T> class Stream`: instantiated elsewhere,
        # or by the calls of this file (`run<double>(x, n)`, `run(x, n)` with `double *x`)
        if parameter in aliases:
            continue
        found = instantiated.get(parameter)
        aliases[parameter] = found[0][1] if found else F32
        if found and len(found) > 1:
            assumptions.append(assumed(NoteKind.TEMPLATE_ARGUMENT,
                                       f"template type `{parameter}` differs between the instantiations "
                                       f"({', '.join(t for t, _ in found)}): assumed {found[0][0]}, the first",
                                       subject=parameter))
        elif not found and re.search(rf"\b{re.escape(parameter)}\b", function_text):
            assumptions.append(assumed(NoteKind.TEMPLATE_ARGUMENT,
                                       f"template type `{parameter}` of the enclosing code: assumed float",
                                       subject=parameter))
    template_types = {p: aliases[p] for p in unit.model.template_type_parameters(region.span.start_byte) if p in aliases}
    shift = kernel_shift(unit.options.compiled, region.body_hash, region.span.start.line) if compiled is not None else None
    edited_since = compiled is not None and shift is None
    compiled_fn = omp_region(compiled, unit.kernels.path, region.span.start.line + 1 - (shift or 0),
                             _prefer(template_types, _value_arguments(unit, function, named)))\
        if compiled is not None and shift is not None else None
    profile = SourceProfile() if compiled_fn is not None else None
    # (the region's text is expanded; the functions it calls keep their numeric macros by name)
    walker = KernelWalker(wrapped, cost, shape, aliases, unit.target_callees,
                          line_offset=region.body_span.start.line - 1, constant_lookup=unit.constant,
                          path=unit.kernels.path, profile=profile)
    walker.shape_assumed = shape_assumed
    walker.scopes[0].update(unit.globals)
    extents = bind_host_variables(unit, walker, types, host_env, expanded, function, named)
    walker.array_extents = extents
    walker.host_fill = unit.model.host_fill  # (the region reads the host's arrays by their names)
    parallel_levels = 0
    if words & {"distribute", "for", "loop", "simd"}:
        parallel_levels = _clause_number(region, "collapse") or 1
    # the runtime sizes a given launch from the loop's trip count (below its default team limit)
    # (at its team limit, the launch bounds the count from below: each thread takes a few)
    capped = teams == LLVM_NVPTX_DEFAULT_TEAMS
    # (a `distribute` loop no `parallel for` shares hands each team its iterations: the runtime
    # sizes the teams from its trip count, one iteration a team)
    each_team = (threads or 1) if words & {"parallel", "for", "loop", "simd"} else 1
    launched_items = float(teams * each_team) * (cost.assumed_capped_iterations if capped else 1.0) \
        if override is not None and teams and threads else None
    scheduled = region.clause("schedule") is not None or region.clause("dist_schedule") is not None
    work_items, items_note, unknown_atoms = _walk_region(walker, statement, parallel_levels, assumptions,
                                                         region.span.start.line + 1, launched_items, capped, scheduled)
    result = walker.result()
    if parallel_levels == 0 and "teams" in words and teams and threads and work_items == 1.0:
        # SPMD-style region: every thread of every team runs the body, indexing itself with
        # omp_get_team_num()/omp_get_thread_num()
        work_items = float(teams * threads)
        items_note = f"{count_text(work_items)} threads ({teams} teams × {threads} threads) run the region"
    if unknown_atoms:
        work_items, items_note = _unknown_iterations(walker, unknown_atoms, work_items, teams, threads,
                                                     launched_items, cost, assumptions)
    # no launch given: the one LLVM's offload runtime makes, so that what a thread does once (a
    # reduction's tail, loop-invariant code) is spread over the iterations it takes
    launched, items_note = _launched(region, words, teams, threads, work_items, items_note,
                                     runtime=override is None and parallel_levels > 0 and not shape_assumed)
    # (a region without worksharing launched as one thread, `teams num_teams(1) thread_limit(1)`,
    # is as serial as a plain `target`)
    serial = (not words & {"teams", "parallel", "distribute", "for", "loop", "simd"}
              or (teams == 1 and threads == 1 and parallel_levels == 0)) and \
        (statement is None or _nested_worksharing_loop(statement) is None)
    # (`teams distribute` around a `parallel for`: each thread takes its team's share)
    team_threads = float(threads) if threads else (launched / teams if teams else 1.0)
    shared = parallel_levels > 0 and not words & {"parallel", "for", "loop", "simd"} \
        and _share_among_team(walker, statement, team_threads)
    # a serial region runs in its team's main thread alone (the launch's other threads wait in
    # the runtime's state machine), whatever threads the launch has: its compiled code's counts
    # are that one thread's
    per_item, compiled_note = operations(
        result.counts, cost.int_per_omp_iteration, cost, compiled, compiled_fn, profile, result.notes,
        threads=1.0 if serial and work_items <= 1.0 else launched, work_items=max(work_items, 1.0),
        parallel_trips=max(work_items, 1.0) / (launched / team_threads if shared else launched),
        shift=(unit.kernels.path, shift) if shift and unit.kernels.path else None, edited_since=edited_since,
        missing=f"offload entry for line {region.span.start.line + 1}",
        continuation_lines=region.span.end.line - region.span.start.line)
    if parallel_levels == 0 and statement is not None and (nested := _nested_worksharing_loop(statement)) is not None:
        parallel_levels = nested[1]  # (the loops of a worksharing directive inside a `target` block)
    fast_atom = f"o{max(parallel_levels, 1) - 1}"
    sizes_assumed = any(a.kind == NoteKind.PROBLEM_SIZE_UNKNOWN for a in assumptions)
    assumptions.extend(assumed(NoteKind.PROGRAM_ARGUMENTS, note) for note in assumed_notes(arguments_read))
    # a worksharing loop whose trip count the source states (`n = 1` unless the program is given
    # arguments): one iteration is what the program does then, not a loop not found
    stated = any(loop.parallel and loop.origin not in ("assumed", "data-dependent") for loop in result.loops)
    facts = finish(cost, per_item, work_items, items_note, result, assumptions, fast_atom, extents,
                   sizes_assumed=sizes_assumed, one_item_expected=serial, one_item_stated=stated, compiled=compiled_note is not None,
                   widths=access_widths(compiled_fn, (unit.kernels.path, shift) if shift and unit.kernels.path else None)
                   if compiled_note else None,
                   # a team's threads take consecutive iterations of the nest, innermost loop fastest
                   block_atoms=tuple(f"o{level}" for level in reversed(range(parallel_levels))) if threads else (),
                   block_items=float(threads) if threads else None)
    if compiled_note:
        facts.evidence.insert(0, compiled_note)
        facts.operations = "compiled"
        if compiled is not None and compiled_fn is not None:
            facts.stack = StackFrames(compiled.stack_bytes(compiled_fn), launched, compiled_fn.registers)
    return facts, threads, 0


def _unknown_iterations(walker: KernelWalker, unknown_atoms: list[str], known_part: float, teams: int | None,
                        threads: int | None, launched_items: float | None, cost: CostModel,
                        assumptions: list[Note]) -> tuple[float, str]:
    """The iterations of a parallel nest whose trip count the source does not state: those the
    given launch stands for (`launched_items`), else the production size assumed; spread over
    the loops left unknown. Returns (iterations, note)."""
    known_part = known_part or 1.0
    if launched_items is not None:
        # the runtime sizes the launch from the loop's trip count: the launch tells it
        total = max(launched_items, known_part)
        items_note = f"{count_text(total)} iterations (from the launch: {teams} teams × {threads} threads)"
        if teams == LLVM_NVPTX_DEFAULT_TEAMS and threads:
            # LLVM's offload runtime launches min(iterations / threads, this) teams and lets
            # each thread take several iterations: the launch bounds the count from below only
            each = cost.assumed_capped_iterations
            items_note = f"{count_text(total)} iterations ({teams} teams × {threads} threads × {each:g} each)"
            assumptions.append(assumed(
                NoteKind.LAUNCH_SHAPE,
                f"{teams} teams is the LLVM offload runtime's default team limit on NVIDIA GPUs: the loop "
                f"runs at least the {count_text(float(teams * threads))} iterations the launch has threads for; "
                f"read as {each:g} each", subject="teams", value=float(teams)))
    else:
        total = max(cost.assumed_problem_size, known_part)
        assumptions.insert(0, problem_size_unknown(f"{count_text(total)} iterations", total, "iterations"))
        items_note = "iteration count unknown"
    share = (total / known_part) ** (1.0 / len(unknown_atoms))
    for atom in unknown_atoms:
        walker.cardinality[atom] = max(1.0, share)
    return total, items_note


def _value_arguments(unit: AnalysisUnit, function: Node | None, named: tuple[str, ...] | None,
                     ) -> tuple[float | None, ...]:
    """By position, the value each value parameter of the enclosing function template is read
    with (`R` of `template <int R>`: the instantiation judged's, else the first call's); None
    for a type parameter or a value not known."""
    if function is None:
        return ()
    names = template_value_names(function)
    if not any(names):
        return ()
    values = template_values(unit, function, named)
    return tuple(values[n][0] if n is not None and values.get(n) else None for n in names)


def _prefer(aliases: dict[str, CType], values: tuple[float | None, ...] = ()) -> Callable[[list[str]], float]:
    """How well an instantiation's template arguments fit the types the region is read with
    (a template type the code does not fix is read as float) and the values its value
    parameters are read with (`smooth<3>`'s region is not `smooth<9>`'s: the loops the
    compiler unrolled differ)."""
    bound = {(t.kind, t.size_bytes) for t in aliases.values()}

    def score(args: list[str]) -> float:
        points = 0.0
        for arg in args:
            got = parse_type(arg, {})
            points += (got.kind, got.size_bytes) in bound
            points += 0.001 * (arg == "float")
        for want, arg in zip(values, args):
            if want is not None:
                points += argument_value(arg) == want
        return points

    return score


# `GV_Default_Num_Teams` of LLVM's NVPTX grid values (llvm/Frontend/OpenMP/OMPGridValues.h): the
# teams libomptarget launches at most for a loop of many iterations (it reuses them beyond)
LLVM_NVPTX_DEFAULT_TEAMS = 3200
# `GV_Default_WG_Size`: the threads of a team where neither `thread_limit` nor `num_threads` says
LLVM_NVPTX_DEFAULT_THREADS = 128


def _launched(region: OmpRegion, words: set[str], teams: int | None, threads: int | None, iterations: float,
              items_note: str, runtime: bool) -> tuple[float, str]:
    """The threads that run the region's `iterations`, and `items_note` saying how many: those
    of its launch; with no launch given (`runtime`) and the source leaving teams or threads open,
    those LLVM's offload runtime launches for a worksharing loop (one team without `teams`; else a
    team per team's worth of iterations, up to its team limit)."""
    if not runtime or (teams and threads):
        return (float(teams * threads) if teams and threads else max(iterations, 1.0)), items_note
    per_team = threads or _clause_number(region, "num_threads") or LLVM_NVPTX_DEFAULT_THREADS
    if teams is None:
        teams = min(math.ceil(max(iterations, 1.0) / per_team), LLVM_NVPTX_DEFAULT_TEAMS) if "teams" in words else 1
    launched = float(teams * per_team)
    return launched, (f"{items_note}; {teams} team{'s' if teams != 1 else ''} × {per_team} threads as LLVM's "
                      f"offload runtime launches them, {max(iterations, 1.0) / launched:.3g} iterations per thread")


def _clause_number(region: OmpRegion, name: str) -> int | None:
    clause = region.clause(name)
    if clause is not None and clause.value is not None and isinstance(clause.value.value, (int, float)):
        return int(clause.value.value)
    return None

_OMP_SPMD_CALLS = re.compile(r"\bomp_get_(?:team|thread)_num\s*\(")
# `#pragma omp parallel` (not a worksharing loop) in a `teams` region: every thread of every
# team runs its block, whatever it calls to index itself
_OMP_PARALLEL = re.compile(r"#\s*pragma\s+omp\s+parallel\b(?!\s+(?:for|loop)\b)")


def _walk_region(walker: KernelWalker, statement: Node | None, levels: int, assumptions: list[Note],
                 directive_line: int | None = None, launched_items: float | None = None,
                 capped: bool = False, scheduled: bool = False) -> tuple[float, str, list[str]]:
    """Walk the offloaded statement; the first `levels` loops of the nest are the parallel
    iteration space. Returns (product of the known trip counts, note, atoms whose trip count
    is unknown). `launched_items`: the threads of a given launch that the runtime sized from the
    loop's trip count; a single parallel loop over a size the source does not state
    (`for (i = 0; i < n; i++)`) runs that many iterations, and `n` is read so in its body
    (`capped`: the launch is at the runtime's team limit, so `n` is at least that many;
    `scheduled`: the directive names a `schedule` or `dist_schedule`)."""
    if statement is None:
        return 1.0, "empty region", []
    node: Node | None = statement
    if levels == 0:
        inner = _nested_worksharing_loop(statement)
        if inner is None:
            walker.walk_statement(node)
            return 1.0, "1 (the region runs serially: no worksharing loop)", []
        node, levels = inner
    items = 1.0
    notes = []
    unknown: list[str] = []
    profiled: list[int | None] = []
    for level in range(levels):
        loop = _unwrap_loop(node)
        if loop is None:
            break
        walker.scopes.append({})
        init = loop.child_by_field_name("initializer")
        cond = loop.child_by_field_name("condition")
        update = loop.child_by_field_name("update")
        var, start = loop_init(walker, init)
        trip, origin, note, step = trip_count(walker, var, start, cond, update, loop)
        atom = f"o{level}"
        if origin in ("assumed", "data-dependent"):
            unknown.append(atom)
            if levels == 1 and launched_items is not None:
                _learn_launched_bound(walker, cond, var, start, launched_items, capped)
        else:
            items *= max(trip, 1.0)
            walker.counted_parallel_atoms.add(atom)
        walker.cardinality[atom] = max(1.0, trip)
        if var is not None:
            lin = (start.lin if start is not None else Linear.constant(0.0)).add(
                Linear.atom(atom).scale(step.value if step is not None and step.value else 1.0))
            walker.assign(var, Val(start.ctype if start is not None else INT, None, lin))
        notes.append(f"{var or '?'}: {trip:g} ({note})")
        profiled.append(begin_profile_loop(walker, loop, loop.child_by_field_name("body"), trip, None, parallel=True,
                                           first_line=directive_line if level == 0 else None))
        if scheduled and profiled[-1] is not None and walker.profile is not None:
            walker.profile.loops[profiled[-1]].default_schedule = False
        walker.loops.append(LoopFact(walker.line(loop), var, trip, origin if origin != "grid-stride" else "constant",
                                     f"parallel: {note}", parallel=True))
        node = loop.child_by_field_name("body")
    walker.walk_statement(node)
    for index in reversed(profiled):
        end_profile_loop(walker, index)
    return items, "iterations " + " × ".join(notes), unknown


def _learn_launched_bound(walker: KernelWalker, cond: Node | None, var: str | None, start: Val | None,
                          launched_items: float, capped: bool = False) -> None:
    """Bind the size `n` of the parallel loop `for (i = s; i < n; i++)` (its value unknown) to
    the iterations the given launch has threads for: inner loops over `n` then run as far, and
    the rows of `a[i + k * n]` lie `n` apart (left unknown, they would read as one row). At the
    runtime's team limit (`capped`) `launched_items` counts a few iterations per thread
    (`CostModel.assumed_capped_iterations`): the launch is only the least `n` can be."""
    if cond is None or var is None or cond.type != "binary_expression" or start is None or start.value is None:
        return
    left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    op = walker.text(cond.child_by_field_name("operator"))
    if left is None or right is None or walker.text(left) != var or op not in ("<", "<=") or right.type != "identifier":
        return
    name = walker.text(right)
    current = walker.lookup(name)
    if current is None or current.value is not None or not current.ctype.is_int:
        return
    size = launched_items + start.value - (1.0 if op == "<=" else 0.0)
    walker.assign(name, Val(current.ctype, size, Linear.constant(size)))
    read = (f"at least the iterations the launch has threads for; read as {size:,.0f} "
            f"({walker.cost.assumed_capped_iterations:g} per thread)") if capped else \
        f"read as the iterations the launch has threads for, {size:,.0f}"
    walker.assume(assumed(NoteKind.SIZE_BOUND, f"`{name}` bounds the parallel loop: {read}",
                          subject=name, value=size, unit="iterations"))


_NESTED_WORKSHARING = re.compile(r"#\s*pragma\s+omp\s+(?:parallel\s+)?(?:for|loop)\b")


def _share_among_team(walker: KernelWalker, statement: Node | None, team_threads: float) -> bool:
    """`teams distribute` around a `parallel for`: a team's threads take each of the team's
    distribute iterations together and share the inner loop's iterations (each paying the
    parallel region's cost every time). Per thread, then, the inner loop runs its iterations
    over the team's threads (set here in the profile the compiled counts read; the caller gives
    each thread the team's share of the distribute loop). Whether there is such a loop."""
    if walker.profile is None or team_threads <= 1.0:
        return False
    shared = _team_shared_loops(walker, statement)
    for index in shared:
        loop = walker.profile.loops[index]
        loop.trip /= team_threads
        if loop.collapsed_trip is not None:
            loop.collapsed_trip /= team_threads
    return bool(shared)


def _team_shared_loops(walker: KernelWalker, statement: Node | None) -> list[int]:
    """The profile's loops that a worksharing directive inside the region (`#pragma omp parallel
    for` in a `teams distribute` loop's body) shares among a team's threads."""
    if statement is None or walker.profile is None:
        return []
    lines: set[int] = set()
    stack = [statement]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type == "preproc_call" and _NESTED_WORKSHARING.search(walker.text(child)) \
                    and (loop := _loop_after(child)) is not None:
                lines.add(walker.line(loop))
            stack.append(child)
    return [i for i, loop in enumerate(walker.profile.loops) if not loop.parallel and loop.first in lines]


def _unwrap_loop(node: Node | None) -> Node | None:
    while node is not None and node.type == "compound_statement":
        statements = [c for c in node.named_children if c.type not in ("comment", "preproc_call")]
        if len(statements) != 1:
            return None
        node = statements[0]
    return node if node is not None and node.type == "for_statement" else None


def _loop_after(pragma: Node) -> Node | None:
    """The `for` statement a directive applies to (comments and other directives between), else None."""
    nxt = pragma.next_named_sibling
    while nxt is not None and nxt.type in ("comment", "preproc_call"):
        nxt = nxt.next_named_sibling
    return nxt if nxt is not None and nxt.type == "for_statement" else None


def _nested_worksharing_loop(node: Node) -> tuple[Node, int] | None:
    """In `#pragma omp target` + `{ #pragma omp teams distribute parallel for ... }`, the loop
    after the nested pragma and the loops its `collapse(n)` makes parallel (1 without it)."""
    stack = [node]
    while stack:
        n = stack.pop(0)
        for child in n.named_children:
            pragma = (child.text or b"").decode("utf-8", "replace") if child.type == "preproc_call" else ""
            if re.search(r"\b(for|distribute|loop)\b", pragma) and (loop := _loop_after(child)) is not None:
                collapse = re.search(r"\bcollapse\s*\(\s*(\d+)\s*\)", pragma)
                return loop, int(collapse.group(1)) if collapse else 1
            if child.type == "compound_statement":
                stack.append(child)
    return None

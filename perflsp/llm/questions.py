"""Build the `KernelQuestion` for one kernel from the static engine's report and the file.

    question = question_for(report, estimate, gpu, data, file_kernels, "verdict")

The one builder the server, `perflsp explain` and `perflsp eval --llm` share. It puts in only what
the question needs: the kernel's own text (a `__global__` function, or an OpenMP pragma with its
loop nest), the `__device__` functions it calls (transitively, by name), the file-scope macros and
constants those texts use, its launch sites with the values the engine folded, the GPU's roofline
figures and the engine's estimate with its evidence and assumptions. Never the rest of the file,
never `main`, never the file's path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

from tree_sitter import Node, Tree

from perflsp.analysis.instantiations import estimates_on
from perflsp.analysis.models import Estimate, KernelFacts, KernelReport, LoopFact
from perflsp.analysis.notes import Note, NoteKind
from perflsp.hardware.models import Gpu
from perflsp.hardware.precision import ROOFLINE_PRECISIONS, Precision
from perflsp.kernels.models import (
    ConstValue,
    CudaFunction,
    FileKernels,
    LaunchSite,
    OmpRegion,
)
from perflsp.kernels.program import ProgramModel, SourceFile, program_model
from perflsp.llm.request import (
    Definition,
    DeviceFunction,
    GpuFacts,
    KernelQuestion,
    LaunchSiteFacts,
    MeasuredFacts,
    StaticFacts,
    Task,
)
from perflsp.source.parser import parse
from perflsp.source.positions import LineIndex

MIB = 1024 * 1024
MAX_LAUNCH_SITES = 4  # more sites of one kernel rarely add anything; the renderer trims to 2 anyway
MAX_LAUNCH_TEXT_CHARS = 160  # the callee, its <<<...>>> and the first arguments
MAX_DEFINITIONS = 16
MAX_DEFINITION_CHARS = 240
MAX_LOOPS = 6
MAX_ARGS = 8

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.DOTALL)
_COMMENT_STRING_OR_SPACES = re.compile(_COMMENT_OR_STRING.pattern + r"|[ \t]{2,}", re.DOTALL)


def question_for(
    report: KernelReport,
    gpu_estimate: Estimate,
    gpu: Gpu,
    data: bytes,
    file_kernels: FileKernels,
    task: Task = "verdict",
    *,
    kernel_id: str | None = None,
    tree: Tree | None = None,
    measured: MeasuredFacts | None = None,
    extra_launch_sites: Sequence[LaunchSiteFacts] = (),
    model: ProgramModel | None = None,
) -> KernelQuestion:
    """The question about `report.kernel` on `gpu`, given the engine's `gpu_estimate` for it.

    `data` is the file's text as the engine saw it (the bytes the spans point into); `tree` its
    parse, when the caller has one (else it is parsed here, for the file-scope definitions).
    `kernel_id` defaults to "<path>#<kernel name>". `extra_launch_sites` adds launch facts known
    from outside the file (a launch shape from a profiler run, the program's arguments). `model`:
    the file's program model, which the analysis read (the device functions the kernel calls are
    found through its call index); without one, one is built over `data` and `file_kernels`.
    """
    kernel = report.kernel
    raw = data if isinstance(data, bytes) else data.encode("utf-8")
    source, first_line = kernel_text(raw, kernel)
    if tree is None:
        tree = model.tree if model is not None else parse(raw)
    if model is None or (model.data is not raw and model.data != raw):  # (the spans point into `raw`)
        model = program_model(SourceFile(raw, tree, LineIndex(raw), file_kernels, None))
    callees = device_callees(model, kernel)
    language: Literal["cuda", "omp"] = "omp" if isinstance(kernel, OmpRegion) else "cuda"
    sites = [_launch_facts(raw, site, kernel) for site in report.launches[:MAX_LAUNCH_SITES]]
    if isinstance(kernel, OmpRegion):
        omp = _omp_launch_facts(kernel)
        if omp is not None:
            sites.append(omp)
    sites = _unique(sites + list(extra_launch_sites))
    used_text = "\n".join([source, *(f.source for f in callees), *(s.text for s in sites)])
    definitions = file_definitions(raw, tree, used_text, kernel)
    # an OpenMP region is named by its function: its line (in `report.name`) must stay out of the
    # prompt, or moving the region would re-ask the model
    name = report.name if isinstance(kernel, CudaFunction) else (kernel.function or "<file scope>")
    static = static_facts(report.facts, gpu_estimate, first_line, source.count("\n") + 1,
                          detailed=task != "verdict", language=language)
    judged = estimates_on(report, gpu_estimate)
    if judged:
        # a template's instantiations, each judged on its own: the verdict above is one of them
        static.evidence.append("the template's instantiations, each judged on its own (the verdict above is its "
                               "first launch's or call's): " + "; ".join(
                                   f"`{inst.label}` {e.verdict}" + (f"-bound ({roof})" if (roof := e.roof_summary()) else "")
                                   for inst, e in judged))
    return KernelQuestion(
        kernel_id=kernel_id or f"{file_kernels.path or '<buffer>'}#{report.name}",
        kernel_hash=kernel.body_hash,
        name=name,
        language=language,
        kernel_source=source,
        first_line=first_line,
        device_functions=callees,
        definitions=definitions,
        launch_sites=sites,
        gpu=gpu_facts(gpu),
        static=static,
        measured=measured,
        task=task,
    )


# ---------------------------------------------------------------------------------------------
# source text


def kernel_text(data: bytes, kernel: CudaFunction | OmpRegion) -> tuple[str, int]:
    """The kernel's own lines (whole lines, without comments or common indentation) and the file
    line of its first line."""
    start = kernel.span.start_byte
    end = kernel.span.end_byte
    if isinstance(kernel, OmpRegion) and kernel.body_span is not None:
        end = max(end, kernel.body_span.end_byte)
    line_start = data.rfind(b"\n", 0, start) + 1
    if data[line_start:start].strip():  # something else precedes it on its line: keep it exact
        line_start = start
    first_line = data.count(b"\n", 0, line_start) + 1
    return _code_only(data[line_start:end].decode("utf-8", errors="replace")), first_line


def _code_only(text: str) -> str:
    """`text` without comments (line breaks kept, so line numbers stay true), indentation or runs of
    spaces (C and C++ do not care; each costs a token). Comments cost tokens, say nothing the
    roofline needs, and are the easiest place to hide instructions aimed at the model."""

    def blank(match: re.Match[str]) -> str:
        piece = match.group(0)
        if piece.startswith('"'):
            return piece
        if piece.isspace():
            return " "
        return "\n" * piece.count("\n")

    code = _COMMENT_STRING_OR_SPACES.sub(blank, text)
    return "\n".join(line.strip() for line in code.split("\n")).strip("\n")


def _strip_comments(text: str) -> str:
    return _COMMENT_OR_STRING.sub(" ", text)


def device_callees(model: ProgramModel, kernel: CudaFunction | OmpRegion) -> list[DeviceFunction]:
    """`__device__` functions of the file that `kernel` calls, directly or through each other, as
    the program model's call index finds them (call expressions of the tree: a name in a comment,
    a string or a declaration is no call).

    Breadth first, so direct callees come first, each level in the order of its first call (the
    renderer drops from the end when a prompt is over budget). Overloads sharing a called name are
    all included; matching is by name only.
    """
    by_name: dict[str, list[CudaFunction]] = {}
    for fn in model.kernels.device_functions:
        by_name.setdefault(fn.name, []).append(fn)
    if isinstance(kernel, CudaFunction):
        by_name.pop(kernel.name, None)  # (a recursive kernel is not its own callee)
    if not by_name:
        return []
    data = model.data
    out: list[DeviceFunction] = []
    seen_spans: set[tuple[int, int]] = set()
    level = [(kernel.span.start_byte, kernel.span.end_byte)]
    while level and by_name:
        called: list[tuple[int, str]] = []
        for name in by_name:
            first = min((c.start_byte for c in model.calls_to(name)
                         if any(a <= c.start_byte < b for a, b in level)), default=None)
            if first is not None:
                called.append((first, name))
        level = []
        for _, name in sorted(called):
            for fn in by_name.pop(name):
                key = (fn.span.start_byte, fn.span.end_byte)
                if key in seen_spans:
                    continue
                seen_spans.add(key)
                body = _code_only(data[fn.span.start_byte : fn.span.end_byte].decode("utf-8", errors="replace"))
                out.append(DeviceFunction(name=fn.name, source=body))
                level.append(key)
    return out


_DEFINITION_NODES = frozenset({"preproc_def", "preproc_function_def", "declaration", "type_definition",
                               "alias_declaration"})
_NESTING_NODES = frozenset({"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "namespace_definition",
                            "declaration_list", "linkage_specification"})


def file_definitions(data: bytes, tree: Tree, used_text: str, kernel: CudaFunction | OmpRegion) -> list[Definition]:
    """File-scope macros, constants, globals and type aliases whose name `used_text` mentions.

    They hold what the kernel's text leaves open (`#define BLOCK 256`, `__constant__ float c[16]`).
    Function declarations and anything inside the kernel itself are left out; long definitions are
    cut, and at most MAX_DEFINITIONS are kept, in file order.
    """
    used = set(_IDENTIFIER.findall(_strip_comments(used_text)))
    if not used:
        return []
    kernel_range = (kernel.span.start_byte, kernel.span.end_byte)
    found: list[Definition] = []
    stack: list[tuple[Node, int]] = [(child, 0) for child in reversed(tree.root_node.named_children)]
    while stack and len(found) < MAX_DEFINITIONS:
        node, depth = stack.pop()
        if kernel_range[0] <= node.start_byte < kernel_range[1]:
            continue
        if node.type in _NESTING_NODES and depth < 4:
            stack.extend((child, depth + 1) for child in reversed(node.named_children))
            continue
        if node.type not in _DEFINITION_NODES:
            continue
        name = _defined_name(node)
        if name is None or name not in used:
            continue
        snippet = _code_only(data[node.start_byte : node.end_byte].decode("utf-8", errors="replace"))
        if len(snippet) > MAX_DEFINITION_CHARS:
            snippet = snippet[:MAX_DEFINITION_CHARS].rstrip() + " ..."
        found.append(Definition(name=name, source=snippet))
    return found


def _defined_name(node: Node) -> str | None:
    if node.type in ("preproc_def", "preproc_function_def", "alias_declaration"):
        name = node.child_by_field_name("name")
        return name.text.decode("utf-8", errors="replace") if name is not None and name.text else None
    declarators = node.children_by_field_name("declarator")
    if not declarators:
        return None
    declarator = declarators[0]
    if node.type == "declaration" and _is_function_declarator(declarator):
        return None  # a prototype: the definition (if a device function) is added on its own
    text = declarator.text.decode("utf-8", errors="replace") if declarator.text else ""
    match = _IDENTIFIER.search(text.split("=", 1)[0].replace("__restrict__", ""))
    return match.group(0) if match else None


def _is_function_declarator(start: Node) -> bool:
    node: Node | None = start
    while node is not None:
        if node.type == "function_declarator":
            return True
        if node.type == "init_declarator":
            return False
        node = node.child_by_field_name("declarator")
    return False


# ---------------------------------------------------------------------------------------------
# launch sites


def _value_text(value: ConstValue | None) -> str | None:
    if value is None:
        return None
    if value.value is None:
        return "unknown"  # the reason ("depends on `n` (depends on ...)") is the code the model sees
    folded = value.value
    if isinstance(folded, tuple):
        dims = [int(x) if float(x).is_integer() else x for x in folded]
        while len(dims) > 1 and dims[-1] == 1:
            dims.pop()
        return "(" + ", ".join(str(d) for d in dims) + ")" if len(dims) > 1 else str(dims[0])
    if isinstance(folded, float) and folded.is_integer():
        return str(int(folded))
    return str(folded)


_LAUNCH_KEYS = frozenset({"grid", "block", "shared_bytes"})


def _launch_facts(data: bytes, site: LaunchSite, kernel: CudaFunction | OmpRegion) -> LaunchSiteFacts:
    text = " ".join(data[site.span.start_byte : site.span.end_byte].decode("utf-8", errors="replace").split())
    if len(text) > MAX_LAUNCH_TEXT_CHARS:
        text = text[:MAX_LAUNCH_TEXT_CHARS].rstrip() + " ..."
    values: dict[str, str] = {}
    for key, value in (("grid", site.grid), ("block", site.block), ("shared_bytes", site.shared_mem_bytes)):
        shown = _value_text(value)
        if shown is not None:
            values[key] = shown
    params = kernel.params if isinstance(kernel, CudaFunction) else ()
    for index, arg in enumerate(site.args[: len(params)]):
        if len(values) - len(_LAUNCH_KEYS & values.keys()) >= MAX_ARGS:
            break
        name = params[index].name
        # only scalars the engine could fold: a pointer's "value" says nothing to the model
        if name and arg.known and not params[index].pointer_depth and arg.text.strip() != _value_text(arg):
            values[name if name not in _LAUNCH_KEYS else f"arg {name}"] = _value_text(arg) or ""
    return LaunchSiteFacts(text=text, values=values)


def _omp_launch_facts(region: OmpRegion) -> LaunchSiteFacts | None:
    """num_teams / thread_limit / collapse as folded values (the pragma itself is in the listing)."""
    values: dict[str, str] = {}
    parts: list[str] = []
    for name in ("num_teams", "thread_limit", "num_threads", "collapse"):
        clause = region.clause(name)
        if clause is None:
            continue
        parts.append(f"{name}({clause.text})")
        shown = _value_text(clause.value)
        if shown is not None and shown != clause.text.strip():
            values[name] = shown
    if not values:
        return None
    return LaunchSiteFacts(text=" ".join(parts), values=values)


def _unique(sites: Iterable[LaunchSiteFacts]) -> list[LaunchSiteFacts]:
    out: list[LaunchSiteFacts] = []
    for site in sites:
        if site not in out:
            out.append(site)
    return out


# ---------------------------------------------------------------------------------------------
# figures


def gpu_facts(gpu: Gpu) -> GpuFacts:
    """Peaks and ridges of the roofline precisions the GPU has a figure for."""
    peaks = {p: gpu.peaks[p].tflops for p in ROOFLINE_PRECISIONS if p in gpu.peaks}
    return GpuFacts(
        name=gpu.name,
        peak_tflops=peaks,
        bandwidth_gbs=gpu.memory_bandwidth_gbs,
        ridge_flop_per_byte=gpu.ridges(),
        l2_mb=gpu.l2_cache_mib,
        sm_count=gpu.sm_count,
    )


def static_facts(facts: KernelFacts, estimate: Estimate, first_line: int, line_count: int,
                 detailed: bool = False, language: str = "cuda") -> StaticFacts:
    """The engine's estimate, its evidence (without the intensities, which the prompt shows beside
    the ridges) and its assumptions, with file line numbers turned into listing line numbers.

    `detailed` keeps the engine's whole occupancy and DRAM notes (for explanations and launch
    parameters); a verdict needs only the occupancy, what limits it, and the bytes moved. An "uncertain" estimate becomes a bandwidth
    verdict of confidence 0 whose evidence says the engine could not analyse the kernel.
    """
    occupancy = _occupancy_text(estimate, detailed)
    if estimate.verdict == "uncertain":
        reasons = [e.text for e in estimate.evidence if e.text] or ["the engine could not analyse this kernel"]
        return StaticFacts(
            verdict="bandwidth",
            confidence=0.0,
            evidence=[f"the static engine could not analyse this kernel: {'; '.join(reasons)}"],
            assumptions=["no static verdict: judge from the code alone"],
            occupancy=occupancy,
        )

    def listing(note: Note) -> str:
        # a note about a line of the kernel names it by its listing line (the prompt must not
        # change when the kernel moves in its file)
        if note.line is not None and 1 <= note.line - first_line + 1 <= line_count:
            return note.text_at(note.line - first_line + 1)
        return note.text

    evidence = [_per_item_line(facts, language)]
    for note in facts.evidence:
        if note.kind in (NoteKind.PER_ITEM_COUNTS, NoteKind.UNANALYSED_CALL):
            continue  # the per-item line above says it compactly; the calls are merged below
        evidence.append(listing(note) if detailed or note.kind != NoteKind.DRAM_TRAFFIC else _dram_line(facts))
    calls = unanalysed_callees(facts)
    if calls:
        evidence.append("calls not analysed (definitions not visible): " + ", ".join(f"`{c}`" for c in calls))
    if facts.work_items is not None and facts.work_items_note and facts.work_items_note != "unknown":
        evidence.append(f"work: {facts.work_items_note}")
    evidence.extend(_loop_lines(facts.loops, first_line, line_count))
    intensity = {
        p: round(v, 4)
        for p, v in estimate.intensity.items()
        if p in ROOFLINE_PRECISIONS and (v > 0 or p == Precision.FP32)
    }

    return StaticFacts(
        verdict=estimate.verdict,
        confidence=estimate.confidence,
        intensity_flop_per_byte=intensity,
        limiting_precision=estimate.deciding,
        evidence=_dedupe(evidence),
        assumptions=_dedupe(listing(a) for a in facts.assumptions),
        occupancy=occupancy,
    )


def _per_item_line(facts: KernelFacts, language: str) -> str:
    """What one work item does, compactly: bytes it loads and stores, operations by kind."""
    item = facts.per_item
    parts = [f"loads {_bytes(item.global_load_bytes)}", f"stores {_bytes(item.global_store_bytes)}"]
    for label, value in (("FP64 FLOP", item.fp64), ("FP32 FLOP", item.fp32), ("FP16 FLOP", item.fp16),
                         ("int ops", item.int32), ("special-function ops", item.special),
                         ("atomics", item.atomics)):
        if value:
            parts.append(f"{value:.3g} {label}")
    if not (item.fp64 or item.fp32 or item.fp16):
        parts.append("no FP ops")
    unit = "thread" if language == "cuda" else "iteration"
    counted = " (operations counted in the compiled code)" if facts.operations == "compiled" else ""
    return f"per {unit}{counted}: " + ", ".join(parts)


def unanalysed_callees(facts: KernelFacts) -> list[str]:
    """The functions the kernel calls whose definitions the engine could not read, in order."""
    return list(dict.fromkeys(note.subject for note in facts.evidence
                              if note.kind == NoteKind.UNANALYSED_CALL and note.subject))


def _dram_line(facts: KernelFacts) -> str:
    """The DRAM bytes the intensities divide by, and the engine's remarks (fits in L2, a floor);
    the footprint and per-warp figures behind them matter to an explanation, not to a verdict."""
    return "; ".join([f"DRAM: about {_bytes(facts.dram_bytes)} moved", *facts.dram_remarks])


def _bytes(value: float) -> str:
    for unit, size in (("MB", 1e6), ("KB", 1e3)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.3g} B"


def _occupancy_text(estimate: Estimate, detailed: bool) -> str | None:
    if detailed or estimate.occupancy is None:
        return estimate.occupancy_note
    result = estimate.occupancy
    if result.occupancy >= 1.0:
        return "100%"
    return f"{result.occupancy:.0%}, limited by {result.limiter.value}"


def _loop_lines(loops: Sequence[LoopFact], first_line: int, line_count: int) -> list[str]:
    """Trip counts of the kernel's own loops, at their listing line number. Assumed trip counts and
    OpenMP worksharing loops are left out: the assumptions and the "work" line state them."""
    lines: list[str] = []
    seen: set[int] = set()
    for loop in loops:
        listing = loop.line - first_line + 1
        if not 1 <= listing <= line_count or listing in seen:
            continue  # a loop of an inlined callee: its line is not in the listing
        if loop.origin == "assumed" or loop.parallel:
            continue  # stated already: among the assumptions / in the "work" line
        seen.add(listing)
        # the loop's variable and condition are on its line already; say where the count came from
        how = loop.note if loop.origin == "constant" else f"{loop.origin}: {loop.note}"
        lines.append(f"loop at line {listing}: {loop.trip_count:.4g} iterations ({how})")
        if len(lines) == MAX_LOOPS:
            break
    return lines


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        item = item.strip()
        if item:
            seen.setdefault(item, None)
    return list(seen)

"""CUDA kernels: the launch shape and arguments from the chosen launch site (or the options),
template arguments bound, parameters bound to values and to their arrays' sizes, the body
walked."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path

from perflsp.analysis.compiled_facts import access_widths, kernel_shift, operations
from perflsp.analysis.ctype import F32, INT, CType, parse_type
from perflsp.analysis.extents import Extent, copied_from, cuda_extent, leading_name
from perflsp.analysis.finish import Extents, count_text, dims_text, finish, uncertain_facts
from perflsp.analysis.grid_sizes import grid_sized_parameters
from perflsp.analysis.host_types import class_member_types, host_types
from perflsp.analysis.linear import Linear
from perflsp.analysis.models import KernelFacts, StackFrames
from perflsp.analysis.notes import Note, NoteKind, assumed, problem_size_unknown
from perflsp.analysis.struct_layout import pointee_struct_name, struct_layout
from perflsp.analysis.unit import AnalysisUnit
from perflsp.analysis.walk_branches import learn_size
from perflsp.analysis.walk_values import Callee, LaunchShape, Val
from perflsp.analysis.walker import KernelWalker
from perflsp.compiled.model import CompiledFunction, CompiledUnit
from perflsp.compiled.names import argument_value, cuda_kernel
from perflsp.compiled.profile import SourceProfile
from perflsp.kernels.consteval import ConstEnv, Value, assumed_notes, assumed_reads
from perflsp.kernels.definitions import parameter_names
from perflsp.kernels.host_fills import HostFill
from perflsp.kernels.models import CudaFunction, LaunchSite
from perflsp.kernels.program import ProgramModel

Shape = tuple[float, float, float]


def _choose_site(unit: AnalysisUnit, kernel: CudaFunction, launches: list[LaunchSite]) -> LaunchSite | None:
    candidates = list(launches) or [s for s in unit.options.external_launches if s.name == kernel.name]
    if not candidates:
        return None
    named = unit.options.instantiation
    if named is not None and kernel.template_params:
        # the instantiation judged is named: its launches are the ones to read
        written = [site for site in candidates if _same_arguments(site.template_args, named)]
        candidates = written or candidates
    override = unit.options.launch_override
    if override is not None:
        for site in candidates:
            if site.block.value == override[1] and (site.grid.value in (None, override[0])):
                return site
    for site in candidates:
        if site.grid.known and site.block.known:
            return site
    return candidates[0]


def cuda_facts(unit: AnalysisUnit, kernel: CudaFunction, launches: list[LaunchSite],
               compiled: CompiledUnit | None = None) -> tuple[KernelFacts, int | None, int]:
    """The kernel's facts; with `compiled` (its translation unit compiled for the GPU judged),
    its operations are the compiled code's, each block weighted by how often the walk says it runs."""
    options = unit.options
    cost = options.cost
    site = _choose_site(unit, kernel, launches)
    assumptions: list[Note] = []
    arguments_read = assumed_reads()
    grid, block = _launch_shape(unit, site, assumptions)
    callee = unit.function_node(kernel)
    if callee is None:
        return uncertain_facts("the kernel's definition could not be parsed"), None, 0
    known_block = block
    shape_known = grid is not None and block is not None
    grid_guessed = grid is None
    aliases = dict(unit.type_aliases)
    template_values = _bind_template(unit.model, kernel, site, aliases, assumptions, _template_env(unit, site),
                                     unit.options.instantiation)
    if not shape_known:
        kernel_text = _text_with_helpers(unit, _node_text(callee))
        stride = _block_stride(kernel_text, lambda name: template_values.get(name, _constant(unit, name)))
        grid, block, shape_note = production_shape(kernel_text, grid, block,
                                                   cost.assumed_problem_size, block_stride=stride)
        assumptions.insert(0, shape_note)
    shift = kernel_shift(unit.options.compiled, kernel.body_hash, kernel.span.start.line) if compiled is not None else None
    if compiled is not None and shift is None:
        compiled = None  # edited since the file was compiled: the next compile counts it
        edited_since = True
    else:
        edited_since = False
    compiled_fn = _compiled_function(compiled, kernel, aliases, template_values, site.function if site else None) \
        if compiled is not None else None
    body = callee.node.child_by_field_name("body")
    grid_sized = cache(partial(grid_sized_parameters, unit.model, kernel, site))  # read once, if asked

    def walked(learned: dict[str, tuple[float, str | None]]) -> tuple[KernelWalker, SourceProfile | None, Extents]:
        profile = SourceProfile() if compiled_fn is not None else None
        walker = KernelWalker(callee.data, cost, LaunchShape(grid, block), aliases, unit.callees,
                              line_offset=kernel.span.start.line if callee.data is not unit.data else 0,
                              constant_lookup=unit.constant, path=unit.kernels.path, profile=profile)
        walker.shape_assumed = not shape_known
        walker.scopes[0].update(unit.globals)
        for name, value in template_values.items():
            walker.bind(name, Val(INT, value, Linear.constant(value), static=True))
        extents = _bind_params(unit, walker, kernel, site, aliases)
        walker.array_extents = extents
        walker.host_fill = partial(_parameter_fill, unit, kernel, site)
        walker.grid_sized = grid_sized
        # a size parameter the thread index is checked against (`if (i < n)`) is the extent the
        # launch's threads cover: the launch, given or assumed, is sized from it
        walker.size_parameters = {p.name for p in kernel.params
                                  if p.name is not None and _unknown_scalar(walker.lookup(p.name))}
        for name, (extent, loop) in learned.items():
            learn_size(walker, name, extent, loop)
        walker.walk_statement(body)
        return walker, profile, extents

    walker, profile, extents = walked({})
    if walker.offset_before_size and walker.learned_extents:
        # a pointer was moved by a size read as the thread extent only further on (`p + n` before
        # `for (i = tid; i < n; ...)`): walked again with that size known from the start
        walker, profile, extents = walked(dict(walker.learned_extents))
    covering = _covering_grid(grid, block, walker.thread_extents) if grid_guessed else None
    if covering is not None:
        # a guessed grid larger than the known size its threads are checked against (`if (i < n)`,
        # a grid-stride loop up to n; the grid set through the occupancy API): the launch covers
        # that size once, as its author sizes it; its threads past it would only test and leave
        grid, note = covering
        assumptions[0] = note
        walker, profile, extents = walked(dict(walker.learned_extents))
    result = walker.result()
    assert grid is not None and block is not None  # production_shape fills what the site left open
    threads_per_block = int(math.prod(known_block)) if known_block else None
    work_items = float(math.prod(grid) * math.prod(block))
    items_note = f"{count_text(work_items)} threads ({dims_text(grid)} blocks × {dims_text(block)} threads)"
    if not shape_known:
        items_note += ", assumed"
    per_item, compiled_note = operations(
        result.counts, cost.int_per_thread, cost, compiled, compiled_fn, profile, result.notes,
        threads=work_items, work_items=work_items,
        shift=(unit.kernels.path, shift) if shift and unit.kernels.path else None, edited_since=edited_since,
        missing=f"function for `{kernel.name}` (not instantiated in {Path(compiled.source).name}?)" if compiled else "")
    shared_bytes = int(result.shared_bytes)
    if site is not None and site.shared_mem_bytes is not None and isinstance(site.shared_mem_bytes.value, (int, float)):
        shared_bytes += int(site.shared_mem_bytes.value)
    assumptions.extend(assumed(NoteKind.PROGRAM_ARGUMENTS, note) for note in assumed_notes(arguments_read))
    facts = finish(cost, per_item, work_items, items_note, result, assumptions, "tx", extents,
                    sizes_assumed=not shape_known, one_item_expected=shape_known, data_offsets=True,
                    compiled=compiled_note is not None,
                    widths=access_widths(compiled_fn, (unit.kernels.path, shift) if shift and unit.kernels.path else None)
                    if compiled_note else None, block_atoms=("bx", "by", "bz"), shape_assumed=not shape_known)
    if compiled_note:
        facts.evidence.insert(0, compiled_note)
        facts.operations = "compiled"
        if compiled is not None and compiled_fn is not None:
            facts.stack = StackFrames(compiled.stack_bytes(compiled_fn), work_items, compiled_fn.registers)
    return facts, threads_per_block, shared_bytes


def _compiled_function(compiled: CompiledUnit, kernel: CudaFunction, aliases: dict[str, CType],
                       values: dict[str, float], launched_in: str | None = None) -> CompiledFunction | None:
    """The kernel's function in the compiled unit: of a template's instantiations, the one whose
    arguments are those the analysis bound (written at the launch, deduced, or assumed), and
    whose lambda arguments are defined in the function of the launch (`launched_in`)."""
    wanted: list[CType | float | None] = []
    for param in kernel.template_params:
        wanted.append(aliases.get(param.name) if param.kind == "type" else values.get(param.name))
    # `for_each<Stream<float>::copy()::{lambda(int)#1}>`: the closure of a lambda written in `copy`
    own_lambda = re.compile(rf"\b{re.escape(launched_in.split('::')[-1].split('<')[0])}\(.*\{{lambda") \
        if launched_in else None

    def score(args: list[str]) -> float:
        # with nothing bound, a template instantiated for several types is read as its float one
        # (a lambda's: the one written in a float instantiation of its class)
        points = 0.001 * sum(arg == "float" or ("{lambda" in arg and "<float>" in arg) for arg in args)
        if own_lambda is not None:
            points += 0.5 * sum(own_lambda.search(arg) is not None for arg in args)
        for want, arg in zip(wanted, args):
            if isinstance(want, CType) and "{lambda" not in arg:  # (a closure is no type to match)
                got = parse_type(arg, {})
                points += got.kind == want.kind and got.size_bytes == want.size_bytes and got.pointer == want.pointer
            elif want is not None:
                points += argument_value(arg) == want
        return points

    return cuda_kernel(compiled, kernel.qualified_name, len(kernel.params), score)


_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^;{}()<>]*>\s*)?\(")
_NOT_CALLS = frozenset(("if", "for", "while", "switch", "return", "sizeof", "__syncthreads"))
_HELPER_DEPTH = 4  # levels of `__device__` calls followed for the axes a kernel reads
_HELPER_LIMIT = 32  # helpers read at most (a kernel calling into a large device library)


def _unknown_scalar(value: Val | None) -> bool:
    return value is not None and value.value is None and value.ctype.is_int and not value.ctype.pointer and not value.lin.atoms


def _node_text(callee: Callee) -> str:
    return callee.data[callee.node.start_byte : callee.node.end_byte].decode("utf-8", errors="replace")


def _text_with_helpers(unit: AnalysisUnit, kernel_text: str) -> str:
    """The kernel's text followed by that of the `__device__` functions it calls, transitively:
    a kernel that indexes `blockIdx` only inside a helper (`int i = global_index();`, a tiled
    body in a `__device__` function) spans a grid all the same."""
    texts = [kernel_text]
    seen: set[str] = set()
    frontier = [kernel_text]
    for _ in range(_HELPER_DEPTH):
        called: list[str] = []
        for text in frontier:
            for name in _CALLED.findall(_COMMENTS.sub(" ", text)):
                if name in seen or len(texts) + len(called) > _HELPER_LIMIT:
                    continue
                seen.add(name)
                if name not in _NOT_CALLS and name in unit.callees:
                    called.append(_node_text(unit.callees[name]))
        texts.extend(called)
        frontier = called
        if not frontier:
            break
    return "\n".join(texts)


_AXIS_USE = re.compile(r"\b(?:hip)?(threadIdx|blockDim|blockIdx|gridDim|ThreadIdx|BlockDim|BlockIdx|GridDim)\s*[._]\s*([xyz])\b")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_PRODUCTION_BLOCKS = {1: (256.0, 1.0, 1.0), 2: (16.0, 16.0, 1.0), 3: (8.0, 8.0, 4.0)}


# `blockIdx.x * C + threadIdx.x` (C a name or a number, the thread index or a plain copy of it,
# either order): a 1-D kernel whose global index strides its blocks by C runs blocks of C threads
# (`blockIdx.x * BLOCK + tid`, `blockIdx.x * BLOCK * 2 + threadIdx.x`: two elements a thread)
_STRIDE = r"blockIdx\s*\.\s*x\s*\*\s*([A-Za-z_]\w*|\d+)(?:\s*\*\s*(?:\d+|[A-Za-z_]\w*))?"
_THREAD_COPY = re.compile(r"\b([A-Za-z_]\w*)\s*=\s*threadIdx\s*\.\s*x\s*;")


def _block_stride(kernel_text: str, value_of: Callable[[str], float | None]) -> float | None:
    """The block size a 1-D kernel's `blockIdx.x * C + threadIdx.x` index implies: one C, a whole
    number of warps up to 1,024 threads, where every such index folds to it; None otherwise."""
    text = _COMMENTS.sub(" ", kernel_text)
    thread = "|".join([r"threadIdx\s*\.\s*x", *(re.escape(n) for n in set(_THREAD_COPY.findall(text)))])
    pattern = re.compile(rf"\b{_STRIDE}\s*\+\s*(?:{thread})\b(?!\s*[%/*\[(.])|(?:{thread})\s*\+\s*{_STRIDE}\b(?!\s*[\[(.])")
    found: set[float] = set()
    for m in pattern.finditer(text):
        word = m.group(1) or m.group(2)
        value = float(word) if word.isdigit() else value_of(word)
        if value is None:
            return None
        found.add(float(value))
    if len(found) != 1:
        return None
    (size,) = found
    return size if 32 <= size <= 1024 and size % 32 == 0 else None


def _constant(unit: AnalysisUnit, name: str) -> float | None:
    known = unit.constant(name)
    return known[0] if known is not None else None


def _covering_grid(grid: tuple[float, float, float] | None, block: tuple[float, float, float] | None,
                   extents: list[float]) -> tuple[tuple[float, float, float], Note] | None:
    """The 1-D grid that covers the largest known size bounding the flat thread index once, and
    its note, where the guessed grid holds more threads than that; None otherwise."""
    if grid is None or block is None or not extents or grid[1] != 1.0 or grid[2] != 1.0 \
            or block[1] != 1.0 or block[2] != 1.0:
        return None
    size = max(extents)
    if size >= grid[0] * block[0]:
        return None
    covering = (float(max(1, math.ceil(size / block[0]))), 1.0, 1.0)
    threads = covering[0] * block[0]
    return covering, assumed(NoteKind.LAUNCH_SHAPE,
                             f"grid unknown: assumed to cover the {count_text(size)} indices its threads are checked "
                             f"against once ({count_text(threads)} threads, {dims_text(covering)} blocks × "
                             f"{dims_text(block)})", subject="grid", value=threads, unit="threads")


def production_shape(kernel_text: str, grid: tuple[float, float, float] | None,
                     block: tuple[float, float, float] | None, threads: float, block_stride: float | None = None,
                     ) -> tuple[tuple[float, float, float], tuple[float, float, float], Note]:
    """The launch shape assumed when the source cannot say it: production scale, `threads`
    threads over the grid axes the kernel reads (data well beyond L2), and a common block
    shape over the block axes it reads. An axis the kernel never reads gets one block (or
    thread): more would repeat the same work on the same data. A kernel that never reads
    `blockIdx`/`gridDim` is one block. A grid the source gives is kept (`OC / 32` blocks of a
    `block_size` passed in): only the block is assumed. `block_stride`: the block size a 1-D
    kernel's `blockIdx.x * C` index implies (`_block_stride`), taken for its block."""
    grid_given = grid is not None
    read: dict[str, set[int]] = {"thread": set(), "block": set()}
    for m in _AXIS_USE.finditer(_COMMENTS.sub(" ", kernel_text)):
        family = "thread" if m.group(1).lower() in ("threadidx", "blockdim") else "block"
        read[family].add("xyz".index(m.group(2)))
    if block is None and block_stride is not None and read["thread"] <= {0}:
        block = (block_stride, 1.0, 1.0)
    if block is None:
        axes = sorted(read["thread"]) or [0]
        sizes = _PRODUCTION_BLOCKS[len(axes)]
        dims = [1.0, 1.0, 1.0]
        for axis, size in zip(axes, sizes):
            dims[axis] = size
        block = (dims[0], dims[1], dims[2])
    if grid is None:
        axes = sorted(read["block"])
        dims = [1.0, 1.0, 1.0]
        if axes:
            extent = threads ** (1.0 / len(axes))  # problem extent per grid axis read
            for axis in axes:
                dims[axis] = max(1.0, round(extent / block[axis]))
        grid = (dims[0], dims[1], dims[2])
    total = math.prod(grid) * math.prod(block)
    if grid_given:
        note = assumed(NoteKind.LAUNCH_SHAPE, f"block assumed {dims_text(block)} threads over the axes the kernel "
                       f"reads ({count_text(total)} threads in the {dims_text(grid)} blocks of the launch)",
                       subject="block", value=total, unit="threads")
        return grid, block, note
    note = problem_size_unknown(f"{count_text(total)} threads, {dims_text(grid)} blocks × {dims_text(block)}", total,
                                "threads")
    return grid, block, note


def _launch_shape(unit: AnalysisUnit, site: LaunchSite | None, assumptions: list[Note]
                  ) -> tuple[tuple[float, float, float] | None, tuple[float, float, float] | None]:
    override = unit.options.launch_override
    if override is not None:
        return tuple(float(x) for x in override[0]), tuple(float(x) for x in override[1])  # type: ignore[return-value]
    if site is None:
        assumptions.append(assumed(NoteKind.LAUNCH_SHAPE, "no launch site in this file: launch shape unknown"))
        return None, None
    grid = block = None
    if unit.kernels.has_launch(site):
        # folded where the kernel is launched, with what the launching function's callers pass
        grid = _as_dim(unit.fold_at(site.grid.span.start_byte if site.grid.span else site.span.start_byte, site.grid.text))
        block = _as_dim(unit.fold_at(site.block.span.start_byte if site.block.span else site.span.start_byte, site.block.text))
    grid = grid or _as_dim(site.grid.value)
    block = block or _as_dim(site.block.value)
    if grid is None:
        assumptions.append(assumed(NoteKind.LAUNCH_SHAPE, f"grid `{site.grid.text}` unknown ({site.grid.reason})",
                                   subject="grid"))
    if block is None:
        assumptions.append(assumed(NoteKind.LAUNCH_SHAPE, f"block `{site.block.text}` unknown ({site.block.reason})",
                                   subject="block"))
    # a grid the host fixes apart from the block (`OC / 32` blocks of `block_size` threads) stays
    return (tuple(float(x) for x in grid) if grid else None,  # type: ignore[return-value]
            tuple(float(x) for x in block) if block else None)


def _as_dim(value: object) -> tuple[int, int, int] | None:
    """A launch dimension folded to a shape of at least one thread or block along each axis (a
    count folded to 0, from a default the program overrides at run time, is no shape)."""
    if isinstance(value, tuple):
        return value if all(isinstance(v, (int, float)) and v >= 1 for v in value) else None
    if isinstance(value, (int, float)) and value > 0:
        return (int(value), 1, 1)
    return None


def _same_arguments(written: tuple[str, ...] | list[str], named: tuple[str, ...]) -> bool:
    """Whether a launch's template arguments are the named instantiation's, as written
    (`k<double, 256>` and `double,256`; a launch naming macros or constants is not compared)."""
    return len(written) == len(named) and all("".join(w.split()) == "".join(n.split()) for w, n in zip(written, named))


def _template_env(unit: AnalysisUnit, site: LaunchSite | None) -> ConstEnv:
    """What a launch's template arguments can name: the file's macros and constants, and the
    launching function's constants (`constexpr int TILE = 16;` before `k<TILE><<<...>>>`)."""
    if site is None or not unit.kernels.has_launch(site):
        return unit.env  # no site, or one in another file (its arguments come folded)
    return unit.env_at(site.span.start_byte)


def _bind_template(model: ProgramModel, kernel: CudaFunction, site: LaunchSite | None, aliases: dict[str, CType],
                   assumptions: list[Note], env: ConstEnv, named: tuple[str, ...] | None = None) -> dict[str, float]:
    values: dict[str, float] = {}
    args = list(site.template_args) if site is not None else []
    if kernel.specialization_args:
        args = list(kernel.specialization_args)
    elif named is not None and len(named) == len(kernel.template_params):
        args = list(named)  # the instantiation judged, named from outside
    for index, param in enumerate(kernel.template_params):
        arg = args[index] if index < len(args) else param.default
        if param.kind == "type":
            launcher_parameters = model.template_type_parameters(site.span.start_byte) \
                if site is not None and arg is not None and any(s is site for s in model.kernels.launches) else []
            if arg is not None and arg.strip() in launcher_parameters and arg.strip() not in aliases:
                # `k<T><<<...>>>(...)` from a templated method: T is the launcher's own parameter,
                # instantiated elsewhere (`template class Stream<float>;`)
                aliases[param.name] = F32
                assumptions.append(assumed(NoteKind.TEMPLATE_ARGUMENT,
                                           f"template type `{arg.strip()}` of the launching code: assumed float",
                                           subject=arg.strip()))
            elif arg is not None:
                type_text = model.expand(arg, env).strip()
                aliases[param.name] = parse_type(type_text or arg, aliases)
            else:
                aliases[param.name] = F32
                assumptions.append(assumed(NoteKind.TEMPLATE_ARGUMENT,
                                           f"template type `{param.name}` not visible at a launch site: assumed float",
                                           subject=param.name))
        elif param.kind == "value":
            value = model.evaluate(arg, env) if arg is not None else None
            if isinstance(value, (int, float)):
                values[param.name] = float(value)
                # later parameters' defaults may name earlier ones (`int B, int T = B / 2`)
                env = model.scoped({param.name: value}, env)
            else:
                assumptions.append(assumed(NoteKind.TEMPLATE_ARGUMENT, f"template value `{param.name}` unknown",
                                           subject=param.name))
    return values


def _lambda_argument(unit: AnalysisUnit, site: LaunchSite, text: str) -> tuple[str, int] | None:
    """The lambda a launch passes (its text and where it is written): written at the launch,
    or handed to the launching function by its caller (`for_each(n, [=] __device__ (...) {...})`
    calling `template <class F> void for_each(size_t n, F f) { k<<<g, b>>>(n, f); }`)."""
    if not any(s is site for s in unit.kernels.launches):
        return None  # a launch in another file: its text is not this model's
    text = text.strip()
    if text.startswith("["):
        return text, site.span.start_byte
    if not re.fullmatch(r"[A-Za-z_]\w*", text):
        return None
    launcher = unit.model.enclosing_function(site.span.start_byte)
    if launcher is None:
        return None
    for node in unit.model.caller_argument_nodes(launcher, text):
        written = unit.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace").strip()
        if written.startswith("["):
            return written, node.start_byte
    return None


def _bind_lambda_argument(unit: AnalysisUnit, walker: KernelWalker, name: str, text: str, offset: int,
                          extents: Extents) -> bool:
    """A lambda passed to the kernel (`for_each<<<g, b>>>(n, [=] __device__ (int i) {...})`):
    `name(...)` in the kernel inlines it, its captures bound to the variables where it is
    written (device pointers and the class's member arrays are global memory; an init-capture
    `a = this->d_a` is its initializer's). False when it does not parse."""
    wrapped = f"void __perflsp_lambda() {{ auto __perflsp_f = {unit.model.expand(text)}; }}\n".encode("utf-8", errors="replace")
    parsed = unit.model.parse_function(wrapped)
    body = parsed.node.child_by_field_name("body") if parsed is not None else None
    lambda_ = None
    stack = [body] if body is not None else []
    while stack and lambda_ is None:
        node = stack.pop()
        if node.type == "lambda_expression":
            lambda_ = node
        stack.extend(node.named_children)
    if lambda_ is None:
        return False
    types = dict(host_types(unit, unit.model.enclosing_function(offset), offset))
    for parameter in unit.model.template_type_parameters(offset):
        walker.aliases.setdefault(parameter, F32)  # `(T)0.4` in a lambda of a templated method
    head = text.split("]", 1)[0]
    for captured, source in re.findall(r"([A-Za-z_]\w*)\s*=\s*(?:this\s*->\s*)?([A-Za-z_]\w*)", head):
        if source in types:
            types[captured] = types[source]
    captures: dict[str, Val] = {}
    for captured in set(re.findall(r"[A-Za-z_]\w*", text)):
        if captured not in types:
            continue
        ctype, _ = types[captured]
        if ctype.pointer:
            captures[captured] = Val(ctype, root=captured, space="global")
            extent = cuda_extent(unit, captured)
            extents[captured] = (extent.bytes, extent.host_memory)
        else:
            captures[captured] = Val(ctype, None, Linear(const_known=False))
    walker.bind_lambda(name, Callee(lambda_, wrapped), captures)
    return True


def _bind_functor_argument(unit: AnalysisUnit, walker: KernelWalker, name: str, text: str, site: LaunchSite) -> bool:
    """A function object passed to the kernel (`apply<<<g, b>>>(x, y, Saxpy{2.0f}, n)`, or a
    variable `Saxpy f;` of the launching function): `name(...)` in the kernel inlines its
    `operator()`, its members bound as unknown values (pointer members as global memory)."""
    if not any(s is site for s in unit.kernels.launches):
        return False
    text = text.strip()
    m = re.match(r"([A-Za-z_]\w*)\s*(?:<[^<>]*>)?\s*[{(]", text)
    class_name = m.group(1) if m is not None else None
    if class_name is None and re.fullmatch(r"[A-Za-z_]\w*", text):
        launcher = unit.model.enclosing_function(site.span.start_byte)
        start = launcher.start_byte if launcher is not None else max(0, site.span.start_byte - 4000)
        before = unit.data[start : site.span.start_byte].decode("utf-8", errors="replace")
        declared = re.findall(r"\b([A-Za-z_]\w*)\s*(?:<[^<>;]*>)?\s+" + re.escape(text) + r"\s*[;{(=]", before)
        class_name = declared[-1] if declared else None
    if class_name is None or class_name in ("return", "const", "auto"):
        return False
    operator = unit.model.call_operator(class_name)
    if operator is None:
        return False
    members: dict[str, Val] = {}
    for member, (ctype, _) in class_member_types(unit, class_name, walker.aliases).items():
        members[member] = Val(ctype, root=member, space="global") if ctype.pointer else Val(ctype, None, Linear(const_known=False))
    walker.bind_lambda(name, Callee(operator.node, operator.data, operator.path, operator.line_base), members)
    return True


def _bind_struct_members(unit: AnalysisUnit, walker: KernelWalker, name: str, type_text: str,
                         fold: Callable[[str], Value | None] | None = None) -> bool:
    """A struct the file or its headers declare, passed by value (`struct Arrays { float *x, *y; }`,
    `k(Arrays arr)`): `arr.x` is its member, a pointer member one global array of its own, a
    number member what `fold` gives its path at the launch (`params.octaves = 3;` before
    `k<<<...>>>(params)`). False for a type whose members are not visible, or hold neither a
    pointer nor a number that folds (read as an accessor instead)."""
    words = [w for w in re.findall(r"[A-Za-z_]\w*", re.sub(r"<.*>", "", type_text)) if w not in ("const", "struct", "class", "volatile")]
    if not words:
        return False
    members = class_member_types(unit, words[-1].split("::")[-1], walker.aliases)
    values = {member: fold(member) if fold is not None and not ctype.pointer else None
              for member, (ctype, _) in members.items()}
    if not any(ctype.pointer for ctype, _ in members.values()) \
            and not any(isinstance(v, (int, float)) for v in values.values()):
        return False
    bound: dict[str, Val] = {}
    for member, (ctype, _) in members.items():
        value = values[member]
        if ctype.pointer:
            bound[member] = Val(ctype, root=f"{name}.{member}", space="global")
        elif isinstance(value, (int, float)):
            bound[member] = Val(ctype, float(value), Linear.constant(float(value)))
        else:
            bound[member] = Val(ctype, None, Linear(const_known=False))
    walker.bind_members(name, bound)
    return True


_DIM3 = CType("int", 12, 3)


def _bind_vector_lanes(walker: KernelWalker, name: str, ctype: CType, fold: Callable[[str], Value | None]) -> bool:
    """A CUDA vector passed by value (`int3 dims`, set `{nx, ny, nz}` or `make_int3(...)` before
    the launch): `dims.x` is what its lane folds to there. False where no lane folds."""
    lane = ctype.element
    lanes = {member: fold(member) for member in ("x", "y", "z", "w")[:ctype.lanes]}
    if not any(isinstance(v, (int, float)) for v in lanes.values()):
        return False
    walker.bind_members(name, {member: Val(lane, float(v), Linear.constant(float(v))) if isinstance(v, (int, float))
                               else Val(lane, None, Linear(const_known=False)) for member, v in lanes.items()})
    return True


def _fold_member(unit: AnalysisUnit, start: int, passed: str, member: str) -> Value | None:
    return unit.fold_at(start, f"{passed}.{member}")


def _launcher_parameter_extent(unit: AnalysisUnit, site: LaunchSite, name: str) -> Extent | None:
    """The allocation behind `name` when it is a parameter of the function that launches the
    kernel: what its caller passes (one level), not a variable of the same name elsewhere in the
    file (`main` allocating pinned host buffers `a` while `run(float *a)` launches on device
    copies). None when `name` is not such a parameter."""
    launcher = unit.model.enclosing_function(site.span.start_byte)
    if launcher is None or name not in parameter_names(launcher, unit.model.data):
        return None
    for node in unit.model.caller_argument_nodes(launcher, name):
        passed = leading_name(unit.ctx.text(node))
        if passed:
            return cuda_extent(unit, passed)
    return Extent(None)


def _parameter_fill(unit: AnalysisUnit, kernel: CudaFunction, site: LaunchSite | None, name: str) -> HostFill | None:
    """What the host stores in the array the launch passes as parameter `name`: the host array
    the file copies into it."""
    if site is None or not unit.kernels.has_launch(site):
        return None
    index = next((i for i, p in enumerate(kernel.params) if p.name == name), None)
    if index is None or index >= len(site.args):
        return None
    device = leading_name(site.args[index].text)
    host = copied_from(unit, device) if device else None
    return unit.model.host_fill(host) if host else None


def _bind_params(unit: AnalysisUnit, walker: KernelWalker, kernel: CudaFunction, site: LaunchSite | None,
                 aliases: dict[str, CType]) -> Extents:
    """Bind the kernel's parameters from its launch site; returns the arrays' extents."""
    extents: Extents = {}
    for index, param in enumerate(kernel.params):
        if param.name is None:
            continue
        ctype = parse_type(param.type, aliases)
        arg = site.args[index] if site is not None and index < len(site.args) else None
        if arg is not None and site is not None and not ctype.pointer:
            # a lambda or a function object the kernel applies (`F f` ... `f(i)`)
            lambda_ = _lambda_argument(unit, site, arg.text)
            if lambda_ is not None and _bind_lambda_argument(unit, walker, param.name, *lambda_, extents):
                continue
            if _bind_functor_argument(unit, walker, param.name, arg.text, site):
                continue
        if ctype.pointer:
            walker.bind(param.name, Val(ctype, root=param.name, space="global"))
            struct_name = pointee_struct_name(param.type) if ctype.kind == "struct" else None
            layout = struct_layout(unit.model, struct_name, aliases) if struct_name else None
            if layout is not None:
                walker.layouts[param.name] = layout
            if site is not None and index < len(site.arg_extents):
                extents[param.name] = site.arg_extents[index]
            elif arg is not None and arg.span is not None and site is not None and site.span.end_byte <= len(unit.data):
                name = leading_name(arg.text)
                if name:
                    extent = _launcher_parameter_extent(unit, site, name) or cuda_extent(unit, name)
                    extents[param.name] = (extent.bytes, extent.host_memory)
            continue
        fold = None
        if arg is not None and arg.span is not None and site is not None and unit.kernels.has_launch(site) \
                and re.fullmatch(r"[A-Za-z_]\w*", arg.text.strip()):
            start, passed = arg.span.start_byte, arg.text.strip()
            fold = partial(_fold_member, unit, start, passed)
        if re.fullmatch(r"(?:const\s+)?dim3", param.type.strip()):
            ctype = _DIM3  # (three unsigned lanes, as `uint3`)
        if ctype.kind == "struct" and _bind_struct_members(unit, walker, param.name, param.type, fold):
            continue
        if ctype.lanes > 1 and fold is not None and _bind_vector_lanes(walker, param.name, ctype, fold):
            continue
        if ctype.kind == "struct" and not param.is_reference:
            # an accessor object (`PackedTensorAccessor`, a struct of pointers): its subscripts
            # are global-memory accesses with unknown strides
            walker.bind(param.name, Val(CType("unknown", 4, pointer=1), root=param.name, space="global",
                                        dims=(0.0,) * 6))
            continue
        value = None
        if arg is not None and arg.span is not None and site is not None and unit.kernels.has_launch(site):
            # folded where the kernel is launched, with what the launching function's callers pass
            value = unit.fold_at(arg.span.start_byte, arg.text)
        if value is None and arg is not None:
            value = arg.value
        if isinstance(value, (int, float)):
            walker.bind(param.name, Val(ctype, float(value), Linear.constant(float(value))))
        else:
            walker.bind(param.name, Val(ctype, None, Linear(const_known=False)))
    return extents

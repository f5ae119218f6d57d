"""The static roofline engine: from a parsed file to per-kernel facts and per-GPU verdicts.

    report = analyze(data, tree, file_kernels, gpus)

Each kernel is analysed on its own text, macro-expanded with the file's (and its local
headers') macros and re-parsed, so a syntax error elsewhere in the file does not spoil it.
Its launch site (same file) supplies the launch shape, template arguments and constant
arguments; `AnalysisOptions` can supply them from outside (the program's arguments, a known
launch shape, registers from ptxas).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from tree_sitter import Node, QueryCursor, Tree

from perflsp import __version__
from perflsp.analysis.costs import CostModel
from perflsp.analysis.ctype import F32, INT, CType, parse_type
from perflsp.analysis.estimate import estimate_for_gpu
from perflsp.analysis.extents import cuda_extent, leading_name, omp_extent
from perflsp.analysis.linear import Linear
from perflsp.analysis.memory import dram_traffic
from perflsp.analysis.models import FileReport, KernelFacts, KernelReport, LoopFact, OpCounts
from perflsp.analysis.walker import Callee, KernelWalker, LaunchShape, Val
from perflsp.hardware.models import Gpu
from perflsp.kernels.consteval import ConstEnv, try_evaluate
from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.launches import enclosing_function
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite, OmpRegion
from perflsp.kernels.extract import extract
from perflsp.kernels.preprocess import expand_macros
from perflsp.source.files import SkippedFile, load_file
from perflsp.kernels.symbols import file_env, function_env
from perflsp.source.parser import parse, query
from perflsp.source.positions import LineIndex

ENGINE_VERSION = f"{__version__}+engine.1"
Dim3 = tuple[int, int, int]


@dataclass(frozen=True)
class AnalysisOptions:
    argv: tuple[str, ...] | None = None  # the program's arguments (argv[1:]) when known
    launch_override: tuple[Dim3, Dim3] | None = None  # (grid, block) known from outside
    registers: tuple[tuple[str, int], ...] = ()  # kernel qualified name -> registers per thread (ptxas)
    include_env: ConstEnv | None = field(default=None, compare=False, hash=False)  # macros of local headers
    external_launches: tuple[LaunchSite, ...] = field(default=(), compare=False, hash=False)
    cost: CostModel = CostModel()

    def registers_for(self, name: str) -> int | None:
        return dict(self.registers).get(name)


class AnalysisUnit:
    """Per-file state shared by the kernels of one document version."""

    def __init__(self, data: bytes, tree: Tree, kernels: FileKernels, options: AnalysisOptions,
                 lines: LineIndex | None = None):
        self.data = data
        self.tree = tree
        self.kernels = kernels
        self.options = options
        self.ctx = ExtractionContext(data, tree, lines or LineIndex(data), kernels.path)
        env = file_env(self.ctx, options.include_env if options.include_env is not None
                       else IncludeResolver().env_for(None, data))
        if options.argv is not None:
            base = env
            while base.parent is not None:
                base = base.parent
            base.argv = ("program", *options.argv)
        self.env = env

    @cached_property
    def type_aliases(self) -> dict[str, CType]:
        aliases: dict[str, CType] = {}
        for node in self.tree.root_node.named_children:
            self._collect_aliases(node, aliases, depth=0)
        # typedefs of the local headers (`typedef real8 Real_t;`), resolved through each other
        header_aliases = self._header_type_aliases()
        for _ in range(3):
            for name, text in header_aliases.items():
                if name not in aliases or aliases[name].kind in ("unknown", "struct"):
                    aliases[name] = parse_type(text, aliases)
        return aliases

    def _header_type_aliases(self) -> dict[str, str]:
        out: dict[str, str] = {}
        env: ConstEnv | None = self.env
        while env is not None:
            for name, text in env.type_aliases.items():
                out.setdefault(name, text)
            env = env.parent
        return out

    def _headers(self) -> tuple[Path, ...]:
        env: ConstEnv | None = self.env
        while env is not None:
            if env.headers:
                return env.headers
            env = env.parent
        return ()

    def _collect_aliases(self, node: Node, aliases: dict[str, CType], depth: int) -> None:
        if node.type == "type_definition":
            type_node = node.child_by_field_name("type")
            for declarator in node.children_by_field_name("declarator"):
                stars = self.ctx.text(declarator).count("*")
                name = re.sub(r"[^\w]", "", self.ctx.text(declarator))
                aliases.setdefault(name, parse_type(self.ctx.text(type_node) + "*" * stars, aliases))
        elif node.type == "alias_declaration":
            name = node.child_by_field_name("name")
            type_node = node.child_by_field_name("type")
            if name is not None and type_node is not None:
                aliases.setdefault(self.ctx.text(name), parse_type(self.ctx.text(type_node), aliases))
        elif node.type in ("namespace_definition", "declaration_list", "preproc_if", "preproc_ifdef", "preproc_else",
                           "linkage_specification") and depth < 6:
            for child in node.named_children:
                self._collect_aliases(child, aliases, depth + 1)

    @cached_property
    def globals(self) -> dict[str, Val]:
        """File-scope `__device__`/`__constant__` arrays and variables."""
        out: dict[str, Val] = {}
        for node in self.tree.root_node.named_children:
            if node.type != "declaration":
                continue
            text = self.ctx.text(node)
            head = text.split("=", 1)[0]
            space = "const" if "__constant__" in head else ("global" if "__device__" in head or "__managed__" in head else None)
            if space is None:
                continue
            base = parse_type(self.ctx.text(node.child_by_field_name("type")), self.type_aliases)
            for declarator in node.children_by_field_name("declarator"):
                name = re.match(r"\W*(\w+)", self.ctx.text(declarator))
                if name:
                    out[name.group(1)] = Val(CType(base.kind, base.size_bytes, base.lanes, base.pointer + 1, base.wide),
                                             root=name.group(1), space=space)
        return out

    @cached_property
    def callees(self) -> _Callees:
        """`__device__` functions (and host-device helpers) by simple name, macro-expanded:
        this file's, then those of the local headers it includes. Built on first lookup of
        each name: a kernel pays only for the helpers it calls."""
        return _Callees(self)

    def function_node(self, fn: CudaFunction) -> Callee | None:
        text = self.data[fn.span.start_byte : fn.span.end_byte]
        expanded = expand_macros(text.decode("utf-8", errors="replace"), self.env,
                                 keep_constants=True).encode("utf-8", errors="replace")
        if expanded == text and not fn.recovered:
            node = self.tree.root_node.descendant_for_byte_range(fn.body_span.start_byte, fn.body_span.start_byte)
            while node is not None and node.type != "function_definition":
                node = node.parent
            if node is not None:
                return Callee(node, self.data)
        tree = parse(expanded)
        node = _first_function(tree.root_node)
        return Callee(node, expanded) if node is not None else None

    def constant(self, name: str) -> tuple[float, str] | None:
        """A macro or file-scope constant by name (a compile-time constant) and the kind of its
        literal ("int", "f32" for `1e-9f`, "f64"), or None."""
        cache: dict[str, tuple[float, str] | None] = self.__dict__.setdefault("_constants", {})
        if name not in cache:
            value, _ = try_evaluate(name, self.env)
            if isinstance(value, (int, float)):
                body = self.env.all_macros().get(name, "")
                if isinstance(value, int):
                    kind = "int"
                elif re.search(r"\d[fF]\b|\.[fF]\b", body):
                    kind = "f32"
                else:
                    kind = "f64"
                cache[name] = (float(value), kind)
            else:
                cache[name] = None
        return cache[name]

    def fold_at(self, byte_offset: int, text: str) -> float | tuple | None:
        value, _ = try_evaluate(text, self.env_at(byte_offset))
        return value

    def env_at(self, byte_offset: int, depth: int = 0) -> ConstEnv:
        """Constants visible at a point: file constants, the enclosing function's locals, and
        its parameters as passed by its first caller in this file (two levels up)."""
        node = self.tree.root_node.descendant_for_byte_range(byte_offset, byte_offset)
        function = enclosing_function(node) if node is not None else None
        env = function_env(self.ctx, function, byte_offset, self.env)
        if function is not None and depth < 2:
            for name, value in self.caller_arguments(function, depth).items():
                env.unknown.pop(name, None)
                env.constants[name] = value
        return env

    def caller_arguments(self, function: Node, depth: int = 0) -> dict[str, float | tuple]:
        key = (function.start_byte, depth)
        cache = self.__dict__.setdefault("_caller_cache", {})
        if key in cache:
            return cache[key]
        cache[key] = {}
        declarator = function.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        if declarator is None:
            return {}
        name_node = declarator.child_by_field_name("declarator")
        params = declarator.child_by_field_name("parameters")
        if name_node is None or params is None:
            return {}
        name = self.ctx.text(name_node).split("::")[-1]
        param_names = []
        for p in params.named_children:
            m = re.search(r"(\w+)\s*(?:\[.*\])?\s*(?:=.*)?$", self.ctx.text(p))
            param_names.append(m.group(1) if m else None)
        values: dict[str, float | tuple] = {}
        for call in self._calls_to(name):
            args = call.child_by_field_name("arguments")
            if args is None:
                continue
            arg_nodes = [a for a in args.named_children if a.type != "comment"]
            if len(arg_nodes) != len(param_names):
                continue
            env = self.env_at(call.start_byte, depth + 1)
            for pname, arg in zip(param_names, arg_nodes):
                if pname is None:
                    continue
                value, _ = try_evaluate(self.ctx.text(arg), env)
                if value is not None and not isinstance(value, str):
                    values[pname] = value
            break
        cache[key] = values
        return values

    def _calls_to(self, name: str) -> list[Node]:
        """Call expressions whose callee's simple name is `name`: found by scanning the text for
        `name(` and querying just those spots (no walk over the whole tree)."""
        cache: dict[str, list[Node]] = self.__dict__.setdefault("_calls", {})
        if name in cache:
            return cache[name]
        found: dict[int, Node] = {}
        calls_query = query("calls")
        root = self.tree.root_node
        for m in re.finditer(rb"\b" + re.escape(name.encode()) + rb"\s*(?:<[^;{}()]*>\s*)?\(", self.data):
            cursor = QueryCursor(calls_query)
            cursor.set_byte_range(m.start(), m.end())
            for _, groups in cursor.matches(root):
                fn = groups["callee"][0]
                callee = re.sub(r"<.*", "", self.ctx.text(fn)).split("::")[-1].strip()
                if callee == name:
                    call = groups["call"][0]
                    found[call.start_byte] = call
        cache[name] = [found[k] for k in sorted(found)]
        return cache[name]


@lru_cache(maxsize=256)
def _parsed_header_cached(path: Path, mtime_ns: int, size: int) -> tuple[bytes, Tree, tuple[CudaFunction, ...]] | None:
    loaded = load_file(path)
    if isinstance(loaded, SkippedFile):
        return None
    tree = parse(loaded.data)
    extracted = extract(loaded.data, tree, str(path))
    return loaded.data, tree, tuple(extracted.device_functions)


def _parsed_header(path: Path) -> tuple[bytes, Tree, tuple[CudaFunction, ...]] | None:
    """A local header's `__device__` functions (parsed once per version of the file)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _parsed_header_cached(path, stat.st_mtime_ns, stat.st_size)


def _callee_from(data: bytes, tree: Tree, fn: CudaFunction, env: ConstEnv) -> Callee | None:
    text = data[fn.span.start_byte : fn.span.end_byte]
    expanded = expand_macros(text.decode("utf-8", errors="replace"), env).encode("utf-8", errors="replace")
    if expanded == text:
        node = tree.root_node.descendant_for_byte_range(fn.body_span.start_byte, fn.body_span.start_byte)
        while node is not None and node.type != "function_definition":
            node = node.parent
        if node is not None:
            return Callee(node, data)
    node = _first_function(parse(expanded).root_node)
    if node is None:
        return None
    return Callee(node, expanded)


class _Callees:
    """A lazy name -> Callee mapping over a unit's device functions (see AnalysisUnit.callees)."""

    def __init__(self, unit: AnalysisUnit):
        self._unit = unit
        self._built: dict[str, Callee | None] = {}
        self._local: dict[str, CudaFunction] = {}
        for fn in unit.kernels.device_functions:
            self._local.setdefault(fn.name, fn)
        self._headers: list[tuple[bytes, Tree, dict[str, CudaFunction]]] | None = None

    def _header_functions(self) -> list[tuple[bytes, Tree, dict[str, CudaFunction]]]:
        if self._headers is None:
            self._headers = []
            for header in self._unit._headers():
                parsed = _parsed_header(header)
                if parsed is not None:
                    data, tree, functions = parsed
                    by_name: dict[str, CudaFunction] = {}
                    for fn in functions:
                        by_name.setdefault(fn.name, fn)
                    self._headers.append((data, tree, by_name))
        return self._headers

    def get(self, name: str, default: Callee | None = None) -> Callee | None:
        if name not in self._built:
            callee = None
            if name in self._local:
                callee = self._unit.function_node(self._local[name])
            else:
                for data, tree, by_name in self._header_functions():
                    if name in by_name:
                        callee = _callee_from(data, tree, by_name[name], self._unit.env)
                        if callee is not None:
                            break
            self._built[name] = callee
        found = self._built[name]
        return found if found is not None else default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None


def _first_function(node: Node) -> Node | None:
    stack = [node]
    while stack:
        n = stack.pop(0)
        if n.type == "function_definition":
            return n
        stack.extend(n.named_children)
    return None


def analysis_key(kernel: CudaFunction | OmpRegion, launches: Sequence[LaunchSite], gpus: Sequence[Gpu],
                 options: AnalysisOptions) -> str:
    """Cache key: the kernel's normalised text, its launch sites' folded values, the GPUs and
    the options; an edit elsewhere in the file leaves it unchanged."""
    parts = [ENGINE_VERSION, kernel.body_hash, repr(options)]
    for site in launches:
        parts.append(repr((site.template_args, site.grid.value, site.block.value,
                           site.shared_mem_bytes.value if site.shared_mem_bytes else None,
                           tuple(a.value for a in site.args))))
    parts.extend(f"{g.id}:{g.memory_bandwidth_gbs}:{sorted((p.value, pk.tflops) for p, pk in g.peaks.items())}" for g in gpus)
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=16).hexdigest()


def analyze(data: bytes, tree: Tree, kernels: FileKernels, gpus: Sequence[Gpu],
            options: AnalysisOptions = AnalysisOptions(), lines: LineIndex | None = None) -> FileReport:
    unit = AnalysisUnit(data, tree, kernels, options, lines)
    report = FileReport(path=kernels.path)
    for kernel in kernels.kernels:
        report.kernels.append(analyze_kernel(unit, kernel, gpus))
    for region in kernels.omp_regions:
        report.kernels.append(analyze_kernel(unit, region, gpus))
    return report


def analyze_kernel(unit: AnalysisUnit, kernel: CudaFunction | OmpRegion, gpus: Sequence[Gpu]) -> KernelReport:
    launches = unit.kernels.launches_of(kernel) if isinstance(kernel, CudaFunction) else []
    try:
        if isinstance(kernel, CudaFunction):
            facts, threads, shared = _cuda_facts(unit, kernel, launches)
        else:
            facts, threads, shared = _omp_facts(unit, kernel)
    except RecursionError:
        facts, threads, shared = _uncertain("the kernel is nested too deeply to analyse"), None, 0
    except (ArithmeticError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        # an engine defect on unusual code must not take the whole file (or the server) down
        facts, threads, shared = _uncertain(f"engine error on this kernel: {type(exc).__name__}: {exc}"), None, 0
    registers = unit.options.registers_for(kernel.qualified_name if isinstance(kernel, CudaFunction) else kernel.name)
    estimates = [estimate_for_gpu(facts, gpu, threads, registers, shared, unit.options.cost) for gpu in gpus]
    return KernelReport(kernel=kernel, launches=launches, facts=facts, estimates=estimates)


def _uncertain(reason: str) -> KernelFacts:
    return KernelFacts(OpCounts(), None, "unknown", OpCounts(), 0.0, "unknown", uncertain=reason)


# ---------------------------------------------------------------------------------------------
# CUDA kernels


def _choose_site(unit: AnalysisUnit, kernel: CudaFunction, launches: list[LaunchSite]) -> LaunchSite | None:
    candidates = list(launches) or [s for s in unit.options.external_launches if s.name == kernel.name]
    if not candidates:
        return None
    override = unit.options.launch_override
    if override is not None:
        for site in candidates:
            if site.block.value == override[1] and (site.grid.value in (None, override[0])):
                return site
    for site in candidates:
        if site.grid.known and site.block.known:
            return site
    return candidates[0]


def _cuda_facts(unit: AnalysisUnit, kernel: CudaFunction, launches: list[LaunchSite]) -> tuple[KernelFacts, int | None, int]:
    options = unit.options
    cost = options.cost
    site = _choose_site(unit, kernel, launches)
    assumptions: list[str] = []
    grid, block = _launch_shape(unit, site, assumptions)
    callee = unit.function_node(kernel)
    if callee is None:
        return _uncertain("the kernel's definition could not be parsed"), None, 0
    known_block = block
    shape_known = grid is not None and block is not None
    if not shape_known:
        kernel_text = callee.data[callee.node.start_byte : callee.node.end_byte].decode("utf-8", errors="replace")
        grid, block, shape_note = production_shape(kernel_text, grid, block,
                                                   cost.assumed_problem_size)
        assumptions.insert(0, shape_note)
    aliases = dict(unit.type_aliases)
    template_values = _bind_template(kernel, site, aliases, assumptions, _template_env(unit, site))
    walker = KernelWalker(callee.data, cost, LaunchShape(grid, block), aliases, unit.callees,
                          line_offset=kernel.span.start.line if callee.data is not unit.data else 0,
                          constant_lookup=unit.constant)
    walker.scopes[0].update(unit.globals)
    for name, value in template_values.items():
        walker.bind(name, Val(INT, value, Linear.constant(value), static=True))
    extents = _bind_params(unit, walker, kernel, site, aliases)
    body = callee.node.child_by_field_name("body")
    walker.walk_statement(body)
    result = walker.result()
    threads_per_block = int(math.prod(known_block)) if known_block else None
    work_items = float(math.prod(grid) * math.prod(block))
    items_note = f"{_int(work_items)} threads ({_dims(grid)} blocks × {_dims(block)} threads)"
    if not shape_known:
        items_note += ", assumed"
    per_item = _calibrated(result.counts, cost, cost.int_per_thread)
    shared_bytes = int(result.shared_bytes)
    if site is not None and site.shared_mem_bytes is not None and isinstance(site.shared_mem_bytes.value, (int, float)):
        shared_bytes += int(site.shared_mem_bytes.value)
    facts = _finish(unit, per_item, work_items, items_note, result, assumptions, "tx", extents,
                    sizes_assumed=not shape_known, one_item_expected=shape_known)
    return facts, threads_per_block, shared_bytes


_AXIS_USE = re.compile(r"\b(?:hip)?(threadIdx|blockDim|blockIdx|gridDim|ThreadIdx|BlockDim|BlockIdx|GridDim)\s*[._]\s*([xyz])\b")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_PRODUCTION_BLOCKS = {1: (256.0, 1.0, 1.0), 2: (16.0, 16.0, 1.0), 3: (8.0, 8.0, 4.0)}


def production_shape(kernel_text: str, grid: tuple[float, float, float] | None,
                     block: tuple[float, float, float] | None, threads: float
                     ) -> tuple[tuple[float, float, float], tuple[float, float, float], str]:
    """The launch shape assumed when the source cannot say it: production scale, `threads`
    threads over the grid axes the kernel reads (data well beyond L2), and a common block
    shape over the block axes it reads. An axis the kernel never reads gets one block (or
    thread): more would repeat the same work on the same data. A kernel that never reads
    `blockIdx`/`gridDim` is one block."""
    read: dict[str, set[int]] = {"thread": set(), "block": set()}
    for m in _AXIS_USE.finditer(_COMMENTS.sub(" ", kernel_text)):
        family = "thread" if m.group(1).lower() in ("threadidx", "blockdim") else "block"
        read[family].add("xyz".index(m.group(2)))
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
    note = (f"problem size unknown: assumed large ({_int(total)} threads, {_dims(grid)} blocks × {_dims(block)}), "
            "data beyond L2")
    return grid, block, note


def _launch_shape(unit: AnalysisUnit, site: LaunchSite | None, assumptions: list[str]
                  ) -> tuple[tuple[float, float, float] | None, tuple[float, float, float] | None]:
    override = unit.options.launch_override
    if override is not None:
        return tuple(float(x) for x in override[0]), tuple(float(x) for x in override[1])  # type: ignore[return-value]
    if site is None:
        assumptions.append("no launch site in this file: launch shape unknown")
        return None, None
    grid = site.grid.value if isinstance(site.grid.value, tuple) else None
    block = site.block.value if isinstance(site.block.value, tuple) else None
    if unit.options.argv is not None:
        grid = grid or _as_dim(unit.fold_at(site.grid.span.start_byte if site.grid.span else site.span.start_byte, site.grid.text))
        block = block or _as_dim(unit.fold_at(site.block.span.start_byte if site.block.span else site.span.start_byte, site.block.text))
    if grid is None:
        assumptions.append(f"grid `{site.grid.text}` unknown ({site.grid.reason})")
    if block is None:
        assumptions.append(f"block `{site.block.text}` unknown ({site.block.reason})")
    if grid is None or block is None:
        return None, (tuple(float(x) for x in block) if block else None)  # type: ignore[return-value]
    return tuple(float(x) for x in grid), tuple(float(x) for x in block)  # type: ignore[return-value]


def _as_dim(value: object) -> tuple[int, int, int] | None:
    if isinstance(value, tuple):
        return value  # type: ignore[return-value]
    if isinstance(value, (int, float)) and value > 0:
        return (int(value), 1, 1)
    return None


def _template_env(unit: AnalysisUnit, site: LaunchSite | None) -> ConstEnv:
    """What a launch's template arguments can name: the file's macros and constants, and the
    launching function's constants (`constexpr int TILE = 16;` before `k<TILE><<<...>>>`)."""
    if site is None or not any(s is site for s in unit.kernels.launches):
        return unit.env  # no site, or one in another file (its arguments come folded)
    return unit.env_at(site.span.start_byte)


def _bind_template(kernel: CudaFunction, site: LaunchSite | None, aliases: dict[str, CType],
                   assumptions: list[str], env: ConstEnv | None = None) -> dict[str, float]:
    values: dict[str, float] = {}
    args = list(site.template_args) if site is not None else []
    if kernel.specialization_args:
        args = list(kernel.specialization_args)
    for index, param in enumerate(kernel.template_params):
        arg = args[index] if index < len(args) else param.default
        if param.kind == "type":
            if arg is not None:
                type_text = expand_macros(arg, env).strip() if env is not None else arg
                aliases[param.name] = parse_type(type_text or arg, aliases)
            else:
                aliases[param.name] = F32
                assumptions.append(f"template type `{param.name}` not visible at a launch site: assumed float")
        elif param.kind == "value":
            value, _ = try_evaluate(arg, env) if arg is not None else (None, None)
            if isinstance(value, (int, float)):
                values[param.name] = float(value)
                if env is not None:
                    # later parameters' defaults may name earlier ones (`int B, int T = B / 2`)
                    env = ConstEnv(parent=env, constants={param.name: value})
            else:
                assumptions.append(f"template value `{param.name}` unknown")
    return values


def _bind_params(unit: AnalysisUnit, walker: KernelWalker, kernel: CudaFunction, site: LaunchSite | None,
                 aliases: dict[str, CType]) -> dict[str, tuple[float | None, bool]]:
    """Bind the kernel's parameters from its launch site; returns the arrays' extents."""
    extents: dict[str, tuple[float | None, bool]] = {}
    for index, param in enumerate(kernel.params):
        if param.name is None:
            continue
        ctype = parse_type(param.type, aliases)
        arg = site.args[index] if site is not None and index < len(site.args) else None
        if ctype.pointer:
            walker.bind(param.name, Val(ctype, root=param.name, space="global"))
            if site is not None and index < len(site.arg_extents):
                extents[param.name] = site.arg_extents[index]
            elif arg is not None and arg.span is not None and site is not None and site.span.end_byte <= len(unit.data):
                name = leading_name(arg.text)
                if name:
                    extent = cuda_extent(unit, name)
                    extents[param.name] = (extent.bytes, extent.host_memory)
            continue
        if ctype.kind == "struct" and not param.is_reference:
            # an accessor object (`PackedTensorAccessor`, a struct of pointers): its subscripts
            # are global-memory accesses with unknown strides
            walker.bind(param.name, Val(CType("unknown", 4, pointer=1), root=param.name, space="global",
                                        dims=(0.0,) * 6))
            continue
        value = arg.value if arg is not None else None
        if value is None and arg is not None and unit.options.argv is not None and arg.span is not None:
            value = unit.fold_at(arg.span.start_byte, arg.text)
        if isinstance(value, (int, float)):
            walker.bind(param.name, Val(ctype, float(value), Linear.constant(float(value))))
        else:
            walker.bind(param.name, Val(ctype, None, Linear(const_known=False)))
    return extents


# ---------------------------------------------------------------------------------------------
# OpenMP target regions


def _omp_facts(unit: AnalysisUnit, region: OmpRegion) -> tuple[KernelFacts, int | None, int]:
    cost = unit.options.cost
    if region.body_span is None:
        return _uncertain("no statement follows the `#pragma omp target` directive"), None, 0
    assumptions: list[str] = []
    pragma_node = unit.tree.root_node.descendant_for_byte_range(region.span.start_byte, region.span.start_byte)
    function = enclosing_function(pragma_node) if pragma_node is not None else None
    host_env = unit.env_at(region.span.start_byte)
    host_types = _host_types(unit, function, region.span.start_byte)
    body_end = region.body_span.end_byte
    body_text = unit.data[region.body_span.start_byte : body_end].decode("utf-8", errors="replace")
    expanded = expand_macros(body_text, unit.env)
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
            expanded = expand_macros(body_text, unit.env)
    wrapped = f"void __perflsp_region() {{\n{expanded}\n}}\n".encode("utf-8", errors="replace")
    tree = parse(wrapped)
    fn = _first_function(tree.root_node)
    if fn is None:
        return _uncertain("the offloaded statement could not be parsed"), None, 0
    body = fn.child_by_field_name("body")
    statement = next((c for c in body.named_children if c.type not in ("comment", "preproc_call")), None) if body else None
    threads = None
    teams = None
    limit = region.clause("thread_limit")
    if limit is not None and limit.value is not None and isinstance(limit.value.value, (int, float)):
        threads = int(limit.value.value)
    override = unit.options.launch_override
    if override is not None:
        teams = math.prod(override[0])
        threads = math.prod(override[1])
    num_teams = region.clause("num_teams")
    if teams is None and num_teams is not None and num_teams.value is not None and isinstance(num_teams.value.value, (int, float)):
        teams = int(num_teams.value.value)
    words = set(region.directive.split())
    spmd = ("teams" in words and not words & {"distribute", "for", "loop", "simd"}
            and _OMP_SPMD_CALLS.search(expanded) is not None and _nested_worksharing_loop(statement) is None
            if statement is not None else False)
    if spmd and (teams is None or threads is None):
        # CUDA-style region (every thread of every team runs it, indexing itself with
        # omp_get_team_num()/omp_get_thread_num()) whose launch shape the source does not say
        threads = threads or 256
        teams = teams or max(1, int(cost.assumed_problem_size // threads))
        assumptions.insert(0, f"problem size unknown: assumed large ({_int(float(teams * threads))} threads, "
                              f"{teams} teams × {threads}), data beyond L2")
    shape = LaunchShape((float(teams), 1.0, 1.0) if teams else None, (float(threads), 1.0, 1.0) if threads else None)
    walker = KernelWalker(wrapped, cost, shape, dict(unit.type_aliases), unit.callees,
                          line_offset=region.body_span.start.line - 1)
    walker.scopes[0].update(unit.globals)
    extents = _bind_host_variables(unit, walker, host_types, host_env, expanded)
    parallel_levels = 0
    if words & {"distribute", "for", "loop", "simd"}:
        collapse = region.clause("collapse")
        parallel_levels = int(collapse.value.value) if collapse and collapse.value and isinstance(collapse.value.value, (int, float)) else 1
    work_items, items_note, unknown_atoms = _walk_region(walker, statement, parallel_levels, assumptions)
    result = walker.result()
    if parallel_levels == 0 and "teams" in words and teams and threads and work_items == 1.0:
        # SPMD-style region: every thread of every team runs the body, indexing itself with
        # omp_get_team_num()/omp_get_thread_num()
        work_items = float(teams * threads)
        items_note = f"{_int(work_items)} threads ({teams} teams × {threads} threads) run the region"
    if unknown_atoms:
        known_part = work_items or 1.0
        if override is not None:
            # the runtime sizes the launch from the loop's trip count: the launch tells it
            total = max(float(teams * threads), known_part)
            items_note = f"{_int(total)} iterations (from the launch: {teams} teams × {threads} threads)"
        else:
            total = max(cost.assumed_problem_size, known_part)
            assumptions.insert(0, f"problem size unknown: assumed large ({_int(total)} iterations), data beyond L2")
            items_note = "iteration count unknown"
        share = (total / known_part) ** (1.0 / len(unknown_atoms))
        for atom in unknown_atoms:
            walker.cardinality[atom] = max(1.0, share)
        work_items = total
    per_item = _calibrated(result.counts, cost, cost.int_per_omp_iteration)
    fast_atom = f"o{max(parallel_levels, 1) - 1}"
    sizes_assumed = any(a.startswith("problem size unknown") for a in assumptions)
    serial = not words & {"teams", "parallel", "distribute", "for", "loop", "simd"} and \
        (statement is None or _nested_worksharing_loop(statement) is None)
    return _finish(unit, per_item, work_items, items_note, result, assumptions, fast_atom, extents,
                   sizes_assumed=sizes_assumed, one_item_expected=serial), threads, 0


_OMP_SPMD_CALLS = re.compile(r"\bomp_get_(?:team|thread)_num\s*\(")


def _including_function_text(unit: AnalysisUnit) -> str | None:
    """The text of the function, in a file of the same folder, whose body `#include`s this
    file, or None."""
    if not unit.kernels.path:
        return None
    path = Path(unit.kernels.path)
    directive = re.compile(rb'#\s*include\s*"(?:[^"]*/)?' + re.escape(path.name.encode()) + rb'"')
    for includer in IncludeResolver().includers_of(path)[:4]:
        loaded = load_file(includer)
        if isinstance(loaded, SkippedFile):
            continue
        m = directive.search(loaded.data)
        span = _function_around(loaded.data, m.start()) if m is not None else None
        if span is not None:
            return loaded.data[span[0] : span[1]].decode("utf-8", errors="replace")
    return None


_FUNCTION_HEAD = re.compile(rb"[A-Za-z_][\w:<>,\s\*&]*?\b[A-Za-z_][\w:~]*\s*\([^;{}]*\)\s*(?:const\s*)?\{")


def _function_around(data: bytes, offset: int) -> tuple[int, int] | None:
    """Byte range of the function definition around `offset`, found from the tokens when the
    tree lost it (a file that tree-sitter parses as one ERROR node): the last `name(...) {`
    opened at brace depth 0 before `offset` whose body closes after it."""
    depth = 0
    starts: list[int] = []
    best: tuple[int, int] | None = None
    for m in re.finditer(rb"[{}]", data):
        if m.start() > offset and not starts:
            break
        if m.group() == b"{":
            if depth == 0:
                starts.append(m.start())
            depth += 1
        else:
            depth = max(0, depth - 1)
            if depth == 0 and starts:
                brace = starts.pop()
                if brace < offset < m.end():
                    best = (brace, m.end())
                    break
    if best is None:
        return None
    head_from = data.rfind(b"\n\n", 0, best[0])
    head_from = 0 if head_from < 0 else head_from
    head = None
    for m in _FUNCTION_HEAD.finditer(data, head_from, best[0] + 1):
        if m.end() - 1 == best[0]:
            head = m.start()
    return (head, best[1]) if head is not None else None


def _host_types(unit: AnalysisUnit, function: Node | None, offset: int) -> dict[str, tuple[CType, tuple[float, ...]]]:
    """Types of the enclosing function's parameters and locals (and file-scope variables),
    read from the macro-expanded function (`FP (*a)[N]` with `#define FP float`)."""
    cache: dict[int, dict] = unit.__dict__.setdefault("_host_type_cache", {})
    span = (function.start_byte, function.end_byte) if function is not None else _function_around(unit.data, offset)
    key = span[0] if span is not None else -1
    if key in cache:
        return cache[key]
    out: dict[str, tuple[CType, tuple[float, ...]]] = {}
    _collect_host_types(unit, [n for n in unit.tree.root_node.named_children if n.type == "declaration"], unit.data, out)
    text = unit.data[span[0] : span[1]].decode("utf-8", errors="replace") if span is not None else None
    if text is None:
        # a fragment `#include`d inside a function of another file (`{ #include "step.h" }`):
        # its variables are that function's
        text = _including_function_text(unit)
        function = None
    if text is not None:
        expanded = expand_macros(text, unit.env)
        if expanded != text or function is None:
            data = expanded.encode("utf-8", errors="replace")
            tree = parse(data)
            fn = _first_function(tree.root_node)
        else:
            data, fn = unit.data, function
        if fn is not None:
            nodes: list[Node] = []
            declarator = fn.child_by_field_name("declarator")
            while declarator is not None and declarator.type != "function_declarator":
                declarator = declarator.child_by_field_name("declarator")
            params = declarator.child_by_field_name("parameters") if declarator is not None else None
            if params is not None:
                nodes.extend(p for p in params.named_children if p.type.endswith("parameter_declaration"))
            stack = [fn.child_by_field_name("body")]
            while stack:
                n = stack.pop()
                if n is None:
                    continue
                for child in n.named_children:
                    if child.type == "declaration":
                        nodes.append(child)
                    elif child.type not in ("function_definition", "lambda_expression"):
                        stack.append(child)
            _collect_host_types(unit, nodes, data, out)
            # `T (*a)[N] = ...` parses as an expression in the grammar: read it from the text
            for m in _POINTER_TO_ARRAY.finditer(data.decode("utf-8", errors="replace")):
                base = parse_type(m.group(1), unit.type_aliases)
                dims = tuple(_fold_float(unit, d) for d in re.findall(r"\[([^\]]*)\]", m.group(3)))
                out[m.group(2)] = (CType(base.kind, base.size_bytes, base.lanes, 1 + len(dims), base.wide), (0.0, *dims))
    cache[key] = out
    return out


_POINTER_TO_ARRAY = re.compile(r"\b([A-Za-z_]\w*)\s*\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*((?:\[[^\]]*\]\s*)+)")


def _fold_float(unit: AnalysisUnit, text: str) -> float:
    value, _ = try_evaluate(text, unit.env)
    return float(value) if isinstance(value, (int, float)) else 0.0


def _collect_host_types(unit: AnalysisUnit, nodes: list[Node], data: bytes,
                        out: dict[str, tuple[CType, tuple[float, ...]]]) -> None:
    aliases = unit.type_aliases

    def text(node: Node | None) -> str:
        return data[node.start_byte : node.end_byte].decode("utf-8", errors="replace") if node is not None else ""

    for node in nodes:
        type_text = text(node.child_by_field_name("type"))
        base = parse_type(type_text, aliases)
        vector = re.search(r"(?:vector|unique_ptr|shared_ptr|array)\s*<\s*([^,>]+)", type_text)
        if vector:
            inner = parse_type(vector.group(1), aliases)
            base = CType(inner.kind, inner.size_bytes, inner.lanes, inner.pointer + 1, inner.wide)
        for declarator in node.children_by_field_name("declarator"):
            shape = _declarator_shape(unit, declarator, text)
            if shape is None:
                continue
            name, stars, dims = shape
            ctype = CType(base.kind, base.size_bytes, base.lanes, base.pointer + stars + len(dims), base.wide)
            out[name] = (ctype, dims if stars == 0 else (0.0, *dims))


def _declarator_shape(unit: AnalysisUnit, node: Node | None, text) -> tuple[str, int, tuple[float, ...]] | None:
    """(name, pointer depth, array dimensions) of a declarator: `*p`, `a[M][N]`, `(*a)[N]`."""
    stars = 0
    dims: list[float] = []
    while node is not None:
        kind = node.type
        if kind in ("identifier", "field_identifier"):
            return text(node), stars, tuple(dims)
        if kind in ("pointer_declarator", "abstract_pointer_declarator"):
            stars += 1
        elif kind == "array_declarator":
            size = node.child_by_field_name("size")
            value, _ = try_evaluate(text(size), unit.env) if size is not None else (None, None)
            dims.insert(0, float(value) if isinstance(value, (int, float)) else 0.0)
        nxt = node.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in node.named_children if c.type not in ("type_qualifier", "comment")), None)
        node = nxt
    return None


def _bind_host_variables(unit: AnalysisUnit, walker: KernelWalker, host_types: dict[str, tuple[CType, tuple[float, ...]]],
                         host_env: ConstEnv, text: str) -> dict[str, tuple[float | None, bool]]:
    extents: dict[str, tuple[float | None, bool]] = {}
    for name in set(re.findall(r"[A-Za-z_]\w*", text)):
        if name not in host_types:
            value, _ = try_evaluate(name, host_env)
            if isinstance(value, (int, float)):
                walker.bind(name, Val(INT if float(value).is_integer() else F32, float(value), Linear.constant(float(value))))
            continue
        ctype, dims = host_types[name]
        if ctype.pointer:
            walker.bind(name, Val(ctype, root=name, space="global", dims=dims if len(dims) > 1 else ()))
            elem = ctype.size_bytes if ctype.kind not in ("unknown", "struct") else 4
            if dims and all(dims):
                extents[name] = (elem * math.prod(dims), False)
            else:
                extent = omp_extent(unit, name, elem)
                extents[name] = (extent.bytes, extent.host_memory)
            continue
        value, _ = try_evaluate(name, host_env)
        if isinstance(value, (int, float)):
            walker.bind(name, Val(ctype, float(value), Linear.constant(float(value))))
        else:
            walker.bind(name, Val(ctype, None, Linear(const_known=False)))
    return extents


def _walk_region(walker: KernelWalker, statement: Node | None, levels: int, assumptions: list[str]
                 ) -> tuple[float, str, list[str]]:
    """Walk the offloaded statement; the first `levels` loops of the nest are the parallel
    iteration space. Returns (product of the known trip counts, note, atoms whose trip count
    is unknown)."""
    if statement is None:
        return 1.0, "empty region", []
    node = statement
    if levels == 0:
        inner = _nested_worksharing_loop(node)
        if inner is None:
            walker.walk_statement(node)
            return 1.0, "1 (the region runs serially: no worksharing loop)", []
        node, levels = inner, 1
    items = 1.0
    notes = []
    unknown: list[str] = []
    for level in range(levels):
        loop = _unwrap_loop(node)
        if loop is None:
            break
        walker.scopes.append({})
        init = loop.child_by_field_name("initializer")
        cond = loop.child_by_field_name("condition")
        update = loop.child_by_field_name("update")
        var, start = walker._loop_init(init)
        trip, origin, note, step = walker._trip_count(var, start, cond, update, loop)
        atom = f"o{level}"
        if origin in ("assumed", "data-dependent"):
            unknown.append(atom)
        else:
            items *= max(trip, 1.0)
        walker.cardinality[atom] = max(1.0, trip)
        if var is not None:
            lin = (start.lin if start is not None else Linear.constant(0.0)).add(
                Linear.atom(atom).scale(step.value if step is not None and step.value else 1.0))
            walker.assign(var, Val(start.ctype if start is not None else INT, None, lin))
        notes.append(f"{var or '?'}: {trip:g} ({note})")
        walker.loops.append(LoopFact(walker.line(loop), var, trip, origin if origin != "grid-stride" else "constant",  # type: ignore[arg-type]
                                     f"parallel: {note}"))
        node = loop.child_by_field_name("body")
    walker.walk_statement(node)
    return items, "iterations " + " × ".join(notes), unknown


def _unwrap_loop(node: Node | None) -> Node | None:
    while node is not None and node.type == "compound_statement":
        statements = [c for c in node.named_children if c.type not in ("comment", "preproc_call")]
        if len(statements) != 1:
            return None
        node = statements[0]
    return node if node is not None and node.type == "for_statement" else None


def _nested_worksharing_loop(node: Node) -> Node | None:
    """In `#pragma omp target` + `{ #pragma omp teams distribute parallel for ... }`, the loop
    after the nested pragma."""
    stack = [node]
    while stack:
        n = stack.pop(0)
        for child in n.named_children:
            if child.type == "preproc_call" and re.search(r"\b(for|distribute|loop)\b", child.text.decode("utf-8", "replace")):
                nxt = child.next_named_sibling
                while nxt is not None and nxt.type in ("comment", "preproc_call"):
                    nxt = nxt.next_named_sibling
                if nxt is not None and nxt.type == "for_statement":
                    return nxt
            if child.type == "compound_statement":
                stack.append(child)
    return None


# ---------------------------------------------------------------------------------------------


def _calibrated(counts: OpCounts, cost: CostModel, fixed_ints: float) -> OpCounts:
    """Integer instructions as the hardware executes them: address and loop arithmetic as
    counted, source-level integer operations scaled by what the compiler fuses, plus the fixed
    per-item overhead."""
    arithmetic = max(0.0, counts.int32 - counts.int_address - counts.int_loop)
    counts.int32 = counts.int_address + counts.int_loop + arithmetic * cost.int_arith_factor + fixed_ints
    return counts


def _finish(unit: AnalysisUnit, per_item: OpCounts, work_items: float, items_note: str, result, assumptions: list[str],
            fast_atom: str = "tx", extents: dict[str, tuple[float | None, bool]] | None = None, *,
            sizes_assumed: bool = False, one_item_expected: bool = True) -> KernelFacts:
    cost = unit.options.cost
    traffic = dram_traffic(result.accesses, result.cardinality, work_items, cost, fast_atom, extents)
    total = per_item.scaled(work_items)
    evidence = _evidence(per_item, work_items, traffic)
    all_assumptions = assumptions + result.assumptions
    facts = KernelFacts(
        per_item=per_item, work_items=work_items, work_items_note=items_note, total=total,
        dram_bytes=traffic.dram_bytes, dram_note=traffic.note, loops=result.loops,
        assumptions=all_assumptions, evidence=evidence + result.notes, traffic=traffic,
    )
    if result.truncated:
        facts.assumptions.append("analysis stopped at its work limit: counts are a lower bound")
    facts.uncertain = _degenerate(per_item, work_items, traffic, cost, sizes_assumed, one_item_expected)
    return facts


def _degenerate(per_item: OpCounts, work_items: float, traffic, cost: CostModel, sizes_assumed: bool,
                one_item_expected: bool) -> str | None:
    """Why an analysis says too little to give a verdict on, or None. A ratio of two numbers
    the analysis did not really find (no memory traffic, a parallel launch seen as one item,
    traffic that is only the per-launch floor at production scale) is no evidence either way.
    A launch of one thread, a serial target region, or a tiny footprint at sizes the source
    states are real and keep their verdict."""
    if per_item.global_loads + per_item.global_stores + per_item.atomics <= 0:
        return "no global-memory access found in the kernel (accesses hidden behind calls or types the engine cannot see?)"
    if work_items <= 1.0 and not one_item_expected:
        return "the region's parallel loop was not found: the analysis saw one work item"
    if sizes_assumed and traffic.footprint_bytes < cost.min_dram_bytes * 0.01:
        return (f"at production scale the DRAM traffic found ({traffic.footprint_bytes:.0f} B) is far below the "
                "per-launch floor: the accesses that matter were not found")
    return None


def _evidence(per_item: OpCounts, work_items: float, traffic) -> list[str]:
    lines = []
    loads = f"{per_item.global_loads:.3g} loads ({per_item.global_load_bytes:.3g} B)"
    stores = f"{per_item.global_stores:.3g} stores ({per_item.global_store_bytes:.3g} B)"
    flops = []
    if per_item.fp64:
        flops.append(f"{per_item.fp64:.3g} FP64")
    if per_item.fp32:
        flops.append(f"{per_item.fp32:.3g} FP32")
    if per_item.fp16:
        flops.append(f"{per_item.fp16:.3g} FP16")
    ops = ", ".join(flops) or "no FP"
    lines.append(f"per work item: {loads} + {stores}, {ops} FLOP, {per_item.int32:.3g} integer instructions")
    lines.append(f"DRAM: {traffic.note}")
    return lines


def _dims(d: tuple[float, float, float] | None) -> str:
    if d is None:
        return "?"
    parts = [str(int(x)) for x in d]
    while len(parts) > 1 and parts[-1] == "1":
        parts.pop()
    return "×".join(parts)


def _int(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x:,.0f}"

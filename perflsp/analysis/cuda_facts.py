"""CUDA kernels: the launch shape and arguments from the chosen launch site (or the options),
template arguments bound, parameters bound to values and to their arrays' sizes, the body
walked."""

from __future__ import annotations

import math
import re

from perflsp.analysis.ctype import F32, INT, CType, parse_type
from perflsp.analysis.extents import cuda_extent, leading_name
from perflsp.analysis.finish import Extents, calibrated, count_text, dims_text, finish, uncertain_facts
from perflsp.analysis.linear import Linear
from perflsp.analysis.models import KernelFacts
from perflsp.analysis.unit import AnalysisUnit
from perflsp.analysis.walker import KernelWalker, LaunchShape, Val
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.models import CudaFunction, LaunchSite
from perflsp.kernels.program import ProgramModel

Shape = tuple[float, float, float]


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


def cuda_facts(unit: AnalysisUnit, kernel: CudaFunction, launches: list[LaunchSite]) -> tuple[KernelFacts, int | None, int]:
    options = unit.options
    cost = options.cost
    site = _choose_site(unit, kernel, launches)
    assumptions: list[str] = []
    grid, block = _launch_shape(unit, site, assumptions)
    callee = unit.function_node(kernel)
    if callee is None:
        return uncertain_facts("the kernel's definition could not be parsed"), None, 0
    known_block = block
    shape_known = grid is not None and block is not None
    if not shape_known:
        kernel_text = callee.data[callee.node.start_byte : callee.node.end_byte].decode("utf-8", errors="replace")
        grid, block, shape_note = production_shape(kernel_text, grid, block,
                                                   cost.assumed_problem_size)
        assumptions.insert(0, shape_note)
    aliases = dict(unit.type_aliases)
    template_values = _bind_template(unit.model, kernel, site, aliases, assumptions, _template_env(unit, site))
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
    assert grid is not None and block is not None  # production_shape fills what the site left open
    threads_per_block = int(math.prod(known_block)) if known_block else None
    work_items = float(math.prod(grid) * math.prod(block))
    items_note = f"{count_text(work_items)} threads ({dims_text(grid)} blocks × {dims_text(block)} threads)"
    if not shape_known:
        items_note += ", assumed"
    per_item = calibrated(result.counts, cost, cost.int_per_thread)
    shared_bytes = int(result.shared_bytes)
    if site is not None and site.shared_mem_bytes is not None and isinstance(site.shared_mem_bytes.value, (int, float)):
        shared_bytes += int(site.shared_mem_bytes.value)
    facts = finish(cost, per_item, work_items, items_note, result, assumptions, "tx", extents,
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
    note = (f"problem size unknown: assumed large ({count_text(total)} threads, {dims_text(grid)} blocks × {dims_text(block)}), "
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
        return value
    if isinstance(value, (int, float)) and value > 0:
        return (int(value), 1, 1)
    return None


def _template_env(unit: AnalysisUnit, site: LaunchSite | None) -> ConstEnv:
    """What a launch's template arguments can name: the file's macros and constants, and the
    launching function's constants (`constexpr int TILE = 16;` before `k<TILE><<<...>>>`)."""
    if site is None or not unit.kernels.has_launch(site):
        return unit.env  # no site, or one in another file (its arguments come folded)
    return unit.env_at(site.span.start_byte)


def _bind_template(model: ProgramModel, kernel: CudaFunction, site: LaunchSite | None, aliases: dict[str, CType],
                   assumptions: list[str], env: ConstEnv) -> dict[str, float]:
    values: dict[str, float] = {}
    args = list(site.template_args) if site is not None else []
    if kernel.specialization_args:
        args = list(kernel.specialization_args)
    for index, param in enumerate(kernel.template_params):
        arg = args[index] if index < len(args) else param.default
        if param.kind == "type":
            if arg is not None:
                type_text = model.expand(arg, env).strip()
                aliases[param.name] = parse_type(type_text or arg, aliases)
            else:
                aliases[param.name] = F32
                assumptions.append(f"template type `{param.name}` not visible at a launch site: assumed float")
        elif param.kind == "value":
            value = model.evaluate(arg, env) if arg is not None else None
            if isinstance(value, (int, float)):
                values[param.name] = float(value)
                # later parameters' defaults may name earlier ones (`int B, int T = B / 2`)
                env = model.scoped({param.name: value}, env)
            else:
                assumptions.append(f"template value `{param.name}` unknown")
    return values


def _bind_params(unit: AnalysisUnit, walker: KernelWalker, kernel: CudaFunction, site: LaunchSite | None,
                 aliases: dict[str, CType]) -> Extents:
    """Bind the kernel's parameters from its launch site; returns the arrays' extents."""
    extents: Extents = {}
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

"""Launch sites `k<<<grid, block, shmem, stream>>>(args)` and runtime launch calls
(`cudaLaunchKernel`, `hipLaunchKernelGGL`, ...): callee resolution and folded values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node

from perflsp.kernels.consteval import ConstEnv, as_dim3, try_evaluate
from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.definitions import declarations_before
from perflsp.kernels.models import ConstValue, CudaFunction, LaunchSite, Span
from perflsp.kernels.symbols import function_env


def extract_launches(ctx: ExtractionContext, env: ConstEnv, kernels: list[CudaFunction]) -> list[LaunchSite]:
    from perflsp.kernels.macro_launches import launching_macros, macro_launch_sites

    sites: list[LaunchSite] = []
    matches = ctx.matches["launch"]
    macros = launching_macros(env)
    if not matches and not macros:
        return sites  # (an edit's definition mostly launches nothing: no index of every kernel)
    by_name: dict[str, list[CudaFunction]] = {}
    for kernel in kernels:
        by_name.setdefault(kernel.name, []).append(kernel)
    for groups in matches:
        site = _chevron_site(ctx, groups, env, by_name) if "config" in groups else _api_site(ctx, groups, env, by_name)
        if site is not None:
            sites.append(site)
    if macros:
        sites.extend(macro_launch_sites(ctx, env, by_name, macros))
        sites.sort(key=lambda site: site.span.start_byte)
    return sites


def _chevron_site(ctx: ExtractionContext, groups: dict[str, list[Node]], env: ConstEnv,
                  by_name: dict[str, list[CudaFunction]]) -> LaunchSite:
    """`k<<<grid, block, shmem, stream>>>(args)`."""
    launch = groups["launch"][0]
    callee = groups["callee"][0]
    config = groups["config"][0]
    args = groups["args"][0]
    function = enclosing_function(launch)
    local = LocalEnv(ctx, function, launch.start_byte, env)
    config_args = [c for c in config.named_children if c.type != "comment"]
    values = [_fold(ctx, c, local, dim3=i < 2) for i, c in enumerate(config_args)]
    if len(values) < 2:
        values += [ConstValue("", None, None, "missing launch argument")] * (2 - len(values))
    call_args = tuple(_fold(ctx, a, local, dim3=False) for a in args.named_children if a.type != "comment")
    return site_of(ctx, by_name, ctx, callee, function, values, call_args,
                   (ctx.span(launch), ctx.span(config), ctx.span(callee)))


@dataclass(frozen=True, slots=True)
class _ApiForm:
    """Where a runtime launch call takes each part: argument positions."""

    grid: int
    block: int
    shared: int
    stream: int
    arguments: int  # the first of the kernel's arguments, or the array of pointers to them
    packed: bool  # the kernel's arguments are an array of pointers to them (`void *args[]`)


_RUNTIME_FORM = _ApiForm(1, 2, 4, 5, 3, packed=True)  # (func, grid, block, args, shmem, stream)
_API_FORMS = {
    "cudaLaunchKernel": _RUNTIME_FORM,
    "cudaLaunchCooperativeKernel": _RUNTIME_FORM,
    "hipLaunchKernel": _RUNTIME_FORM,
    "hipLaunchCooperativeKernel": _RUNTIME_FORM,
    "hipLaunchKernelGGL": _ApiForm(1, 2, 3, 4, 5, packed=False),  # (k, grid, block, shmem, stream, a, b, ...)
}


def _api_site(ctx: ExtractionContext, groups: dict[str, list[Node]], env: ConstEnv,
              by_name: dict[str, list[CudaFunction]]) -> LaunchSite | None:
    """`cudaLaunchCooperativeKernel((void *)k, grid, block, args, shmem, stream)` and the other
    runtime calls of `API_LAUNCHES`: the kernel's arguments are those the `void *args[] = {&a,
    &n}` array the call passes points to, where the launching function declares it so."""
    launch = groups["launch"][0]
    form = _API_FORMS.get(ctx.text(groups["api"][0]))
    items = [c for c in groups["api_args"][0].named_children if c.type != "comment"]
    if form is None or len(items) <= form.block:
        return None
    function = enclosing_function(launch)
    local = LocalEnv(ctx, function, launch.start_byte, env)
    values = [_fold(ctx, items[i], local, dim3=i in (form.grid, form.block))
              for i in (form.grid, form.block, form.shared, form.stream) if i < len(items)]
    if form.packed:
        packed = _packed_arguments(ctx, function, items[form.arguments], launch.start_byte) \
            if form.arguments < len(items) else []
    else:
        packed = items[form.arguments:]
    call_args = tuple(_fold(ctx, a, local, dim3=False) for a in packed)
    config = items[form.grid:max(form.block, form.stream if form.stream < len(items) else 0) + 1]
    kernel = _kernel_operand(items[0])
    return site_of(ctx, by_name, ctx, kernel, function, values, call_args,
                   (ctx.span(launch), ctx.span_bytes(config[0].start_byte, config[-1].end_byte), ctx.span(kernel)))


def _kernel_operand(node: Node) -> Node:
    """The kernel a runtime launch names, without the casts around it (`(void *)k`,
    `reinterpret_cast<const void *>(&k<float>)`, `HIP_KERNEL_NAME(k<T>)`)."""
    while True:
        if node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        elif node.type == "cast_expression" and node.child_by_field_name("value") is not None:
            node = node.child_by_field_name("value")  # type: ignore[assignment]
        elif node.type == "call_expression" and _single_argument(node) is not None \
                and _called_name(node) in ("reinterpret_cast", "static_cast", "const_cast", "HIP_KERNEL_NAME"):
            node = _single_argument(node)  # type: ignore[assignment]
        elif node.type == "pointer_expression" and node.child_by_field_name("argument") is not None \
                and node.text is not None and node.text.startswith(b"&"):
            node = node.child_by_field_name("argument")  # type: ignore[assignment]
        else:
            return node


def _called_name(call: Node) -> str:
    function = call.child_by_field_name("function")
    if function is not None and function.type == "template_function":
        function = function.child_by_field_name("name")
    return function.text.decode("utf-8", "replace") if function is not None and function.text else ""


def _single_argument(call: Node) -> Node | None:
    args = call.child_by_field_name("arguments")
    items = [c for c in args.named_children if c.type != "comment"] if args is not None else []
    return items[0] if len(items) == 1 else None


def _packed_arguments(ctx: ExtractionContext, function: Node | None, array: Node, before: int) -> list[Node]:
    """The values an array of pointers to a kernel's arguments points to, where the launching
    function declares it with them before the launch (`void *args[] = {&a, (void *)&n};`);
    none otherwise (the kernel's parameters then stay unknown)."""
    name = ctx.text(_kernel_operand(array)).strip()
    body = function.child_by_field_name("body") if function is not None else None
    if body is None or not name.isidentifier():
        return []
    found: list[Node] = []
    for declaration in declarations_before(body, before):  # (in source order: the last one before the launch)
        for declarator in declaration.children_by_field_name("declarator"):
            value = declarator.child_by_field_name("value")
            declared = declarator.child_by_field_name("declarator")
            while declared is not None and declared.type == "pointer_declarator":
                declared = declared.child_by_field_name("declarator")  # `void *args[]`
            if declared is not None and declared.type == "array_declarator" and value is not None \
                    and value.type == "initializer_list" and ctx.text(declared.child_by_field_name("declarator")) == name:
                found = [_kernel_operand(v) for v in value.named_children if v.type != "comment"]
    return found


def site_of(ctx: ExtractionContext, by_name: dict[str, list[CudaFunction]], written: ExtractionContext,
            callee: Node, function: Node | None, values: list[ConstValue], call_args: tuple[ConstValue, ...],
            spans: tuple[Span, Span, Span]) -> LaunchSite:
    """The launch site of `callee` (a node of `written`'s tree: `ctx`'s own, or a macro's
    expansion), in `function` of `ctx`; `spans`: the launch's, its configuration's, its callee's."""
    name, template_args = _callee_name(written, callee)
    resolved = _resolve(written, by_name.get(name, []), callee, name, template_args, len(call_args))
    return LaunchSite(
        callee=" ".join(written.text(callee).split()),
        name=name,
        template_args=template_args,
        kernel=resolved.qualified_name if resolved else None,
        grid=values[0],
        block=values[1],
        shared_mem_bytes=values[2] if len(values) > 2 else None,
        stream=values[3] if len(values) > 3 else None,
        args=call_args,
        span=spans[0],
        config_span=spans[1],
        callee_span=spans[2],
        function=function_name(ctx, function) if function else None,
    )


def _fold(ctx: ExtractionContext, node: Node, env: ConstEnv | Callable[[], ConstEnv], dim3: bool) -> ConstValue:
    return fold_text(ctx.text(node), ctx.span(node), env, dim3)


def fold_text(text: str, span: Span, env: ConstEnv | Callable[[], ConstEnv], dim3: bool) -> ConstValue:
    """A launch's argument: its text now; its value when first asked for (the environment too,
    when it is given as a function)."""

    def fold() -> tuple[object, str | None]:
        resolved = env() if callable(env) else env
        # launches in straight-line code share one environment snapshot: fold each text once
        memo = resolved.launch_folds
        if text not in memo:
            memo[text] = try_evaluate(text, resolved)
        value, reason = memo[text]
        if value is not None and dim3:
            try:
                value = as_dim3(value)
            except (TypeError, ValueError):
                value, reason = None, f"`{text}` is not a launch dimension"
        return value, reason

    return ConstValue.lazy(text, span, fold)


class LocalEnv:
    """The constants at a launch, computed on first use (launches are folded lazily). Launches
    of one function must be folded in source order for the incremental replay to pay off; out
    of order they are still correct."""

    __slots__ = ("_args", "_env")

    def __init__(self, ctx: ExtractionContext, function: Node | None, before: int, parent: ConstEnv):
        self._args: tuple[Any, ...] | None = (ctx, function, before, parent)
        self._env: ConstEnv | None = None

    def __call__(self) -> ConstEnv:
        if self._env is None:
            ctx, function, before, parent = self._args  # type: ignore[misc]
            self._env = function_env(ctx, function, before, parent)
            self._args = None
        return self._env


def _callee_name(ctx: ExtractionContext, callee: Node) -> tuple[str, tuple[str, ...]]:
    node = callee
    template_args: tuple[str, ...] = ()
    while True:
        if node.type == "qualified_identifier":
            inner = node.child_by_field_name("name")
            if inner is None:
                break
            node = inner
        elif node.type == "template_function":
            args = node.child_by_field_name("arguments")
            if args is not None:
                template_args = tuple(" ".join(ctx.text(a).split()) for a in args.named_children)
            inner = node.child_by_field_name("name")
            if inner is None:
                break
            node = inner
        elif node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        elif node.type == "pointer_expression":
            inner = node.child_by_field_name("argument")
            if inner is None:
                break
            node = inner
        else:
            break
    return ctx.text(node), template_args


def _resolve(ctx: ExtractionContext, kernels: list[CudaFunction], callee: Node, name: str,
             template_args: tuple[str, ...], arg_count: int) -> CudaFunction | None:
    written = "".join(ctx.text(callee).split())
    candidates = kernels  # those with the callee's simple name
    if not candidates:
        return None
    if "::" in written:
        qualified = written.split("<", 1)[0]
        narrowed = [k for k in candidates if k.qualified_name.endswith(qualified) or qualified.endswith(k.qualified_name)]
        candidates = narrowed or candidates
    if len(candidates) > 1:
        by_arity = [k for k in candidates if _accepts(k, arg_count)]
        candidates = by_arity or candidates
    if len(candidates) > 1 and template_args:
        exact = [k for k in candidates if k.specialization_args is not None
                 and tuple("".join(a.split()) for a in k.specialization_args) == tuple("".join(a.split()) for a in template_args)]
        primary = [k for k in candidates if k.specialization_args is None]
        candidates = exact or primary or candidates
    elif len(candidates) > 1:
        primary = [k for k in candidates if k.specialization_args is None]
        candidates = primary or candidates
    return candidates[0]


def _accepts(kernel: CudaFunction, arg_count: int) -> bool:
    if any(p.type.startswith("...") or p.type == "..." for p in kernel.params):
        return True
    return len(kernel.params) == arg_count


def enclosing_function(node: Node) -> Node | None:
    parent = node.parent
    while parent is not None:
        if parent.type == "function_definition":
            if parent.parent is not None and parent.parent.type in ("compound_statement", "ERROR"):
                # a "function" inside a function body is a misread macro use
                # (`OMP_FOR(i, n) { ... }`): the real function is further out
                outer = enclosing_function(parent)
                if outer is not None:
                    return outer
            return parent
        parent = parent.parent
    return None


def function_name(ctx: ExtractionContext, function: Node) -> str | None:
    """Qualified name of a function definition: enclosing namespaces/classes + its declarator."""
    from perflsp.kernels.cuda import _enclosing_scopes, _function_declarator

    declarator = _function_declarator(function)
    if declarator is None:
        return None
    name_node = declarator.child_by_field_name("declarator")
    if name_node is None:
        return None
    name = "".join(ctx.text(name_node).split())
    return "::".join([*_enclosing_scopes(ctx, function), name])

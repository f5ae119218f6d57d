"""Launch sites `k<<<grid, block, shmem, stream>>>(args)`: callee resolution and folded values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tree_sitter import Node

from perflsp.kernels.consteval import ConstEnv, as_dim3, try_evaluate
from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.models import ConstValue, CudaFunction, LaunchSite
from perflsp.kernels.symbols import function_env


def extract_launches(ctx: ExtractionContext, env: ConstEnv, kernels: list[CudaFunction]) -> list[LaunchSite]:
    sites: list[LaunchSite] = []
    matches = ctx.matches["launch"]
    if not matches:
        return sites  # (an edit's definition mostly launches nothing: no index of every kernel)
    by_name: dict[str, list[CudaFunction]] = {}
    for kernel in kernels:
        by_name.setdefault(kernel.name, []).append(kernel)
    for groups in matches:
        launch = groups["launch"][0]
        callee = groups["callee"][0]
        config = groups["config"][0]
        args = groups["args"][0]
        function = enclosing_function(launch)
        local = _LocalEnv(ctx, function, launch.start_byte, env)
        name, template_args = _callee_name(ctx, callee)
        config_args = [c for c in config.named_children if c.type != "comment"]
        values = [_fold(ctx, c, local, dim3=i < 2) for i, c in enumerate(config_args)]
        if len(values) < 2:
            values += [ConstValue("", None, None, "missing launch argument")] * (2 - len(values))
        call_args = tuple(_fold(ctx, a, local, dim3=False) for a in args.named_children if a.type != "comment")
        resolved = _resolve(ctx, by_name.get(name, []), callee, name, template_args, len(call_args))
        sites.append(LaunchSite(
            callee=" ".join(ctx.text(callee).split()),
            name=name,
            template_args=template_args,
            kernel=resolved.qualified_name if resolved else None,
            grid=values[0],
            block=values[1],
            shared_mem_bytes=values[2] if len(values) > 2 else None,
            stream=values[3] if len(values) > 3 else None,
            args=call_args,
            span=ctx.span(launch),
            config_span=ctx.span(config),
            callee_span=ctx.span(callee),
            function=function_name(ctx, function) if function else None,
        ))
    return sites


def _fold(ctx: ExtractionContext, node: Node, env: ConstEnv | Callable[[], ConstEnv], dim3: bool) -> ConstValue:
    """The argument's text now; its value when first asked for (the environment too, when it
    is given as a function)."""
    text = ctx.text(node)

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

    return ConstValue.lazy(text, ctx.span(node), fold)


class _LocalEnv:
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

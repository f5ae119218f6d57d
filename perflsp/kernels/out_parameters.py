"""Out-parameters: `getArgs(argc, argv, &n, &reps)` whose definition (in the same file)
assigns `*count = atoi(argv[i]);` leaves the caller's `n` with the value the callee's body
gives it, folded with the arguments the call passes; what cannot be followed leaves it unknown."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tree_sitter import Node

from perflsp.kernels.consteval import ConstEnv, NotConstant, ReadsApart, Value, try_evaluate
from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.definitions import function_definitions

DEREFERENCED = "*"  # (`*count` is bound in the callee's locals under this prefix)
_active: set[int] = set()  # callees being followed (a recursive one is not)


def _definitions(ctx: ExtractionContext) -> dict[str, Node]:
    index = ctx.function_index
    if index is None:
        index = ctx.function_index = function_definitions(ctx.tree.root_node, ctx.data)
    return index


def _returns_early(body: Node) -> bool:
    """Whether a `return` inside a branch or loop may end the callee before its last statement."""
    stack = [(child, False) for child in body.named_children]
    while stack:
        node, nested = stack.pop()
        if node.type == "return_statement" and nested:
            return True
        if node.type in ("function_definition", "lambda_expression"):
            continue
        inside = nested or node.type in ("if_statement", "for_statement", "while_statement", "do_statement",
                                         "switch_statement", "for_range_loop")
        stack.extend((child, inside) for child in node.named_children)
    return False


def out_parameter_value(ctx: ExtractionContext, address: Node, env: ConstEnv,
                        params_of: Callable[[Node], list[str]],
                        env_at_end: Callable[[Node, int, Mapping[str, Value]], ConstEnv]) -> tuple[Value, bool] | None:
    """(value, whether it rests on assumed program arguments) the call around `&x` (`address`)
    leaves in `x`, where a same-file definition of the callee assigns its pointer parameter in
    straight-line code (`*p = expr;`); None otherwise."""
    arguments = address.parent
    call = arguments.parent if arguments is not None else None
    if arguments is None or call is None or arguments.type != "argument_list" or call.type != "call_expression":
        return None
    function = call.child_by_field_name("function")
    if function is None or function.type != "identifier":
        return None
    callee = _definitions(ctx).get(ctx.text(function))
    body = callee.child_by_field_name("body") if callee is not None else None
    if callee is None or body is None or callee.start_byte in _active \
            or callee.start_byte <= address.start_byte < callee.end_byte or _returns_early(body):
        return None
    params = params_of(callee)
    passed = arguments.named_children
    position = next((i for i, arg in enumerate(passed) if arg.start_byte == address.start_byte), None)
    if position is None or len(passed) != len(params):
        return None
    with ReadsApart() as reads:
        bound: dict[str, Value] = {}
        for name, arg in zip(params, passed, strict=True):
            if arg.type == "pointer_expression" or ctx.text(arg) in ("argv", "argc"):
                continue
            value, _ = try_evaluate(ctx.text(arg), env)
            if isinstance(value, (int, float)):
                bound[name] = value
        _active.add(callee.start_byte)
        try:
            local = env_at_end(callee, body.end_byte - 1, bound)
            result = local.lookup(DEREFERENCED + params[position])
        except NotConstant:
            return None
        finally:
            _active.discard(callee.start_byte)
    if not isinstance(result, (int, float)):
        return None
    return result, reads.seen

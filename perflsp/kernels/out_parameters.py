"""Out-parameters: `getArgs(argc, argv, &n, &reps)` whose definition (in the same file, else
in another source of its folder) assigns `*count = atoi(argv[i]);` leaves the caller's `n` with
the value the callee's body gives it (`parse(argc, argv, &opts)` assigning `opts->nx`, the
caller's `opts.nx`), folded with the arguments the call passes; what cannot be followed leaves it unknown,
and so does a run of the callee that reaches (or may reach) a `return` inside a branch or loop
(`if (argc < 2) return 1;` is followed where `argc` is known). What the callee's run does not
set because the program's arguments skip it (`if (argc > 1) { ... }` without arguments) keeps
the caller's value, resting on those arguments, where the callee only dereferences its pointer."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from tree_sitter import Node

from perflsp.kernels.consteval import ConstEnv, NotConstant, ReadsApart, Value, evaluate, try_evaluate
from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.definitions import function_definitions
from perflsp.kernels.helper_runs import run
from perflsp.kernels.sample_options import WRITING, written
from perflsp.kernels.sibling_functions import sibling_function

DEREFERENCED = "*"  # (`*count` is bound in the callee's locals under this prefix)
RETURNED = "<returned>"  # (bound in a callee's locals where its run reaches a `return` inside a branch or loop)
_active: set[tuple[str | None, int]] = set()  # callees being followed, by file and start (a recursive one is not)


def file_definitions(ctx: ExtractionContext) -> dict[str, Node]:
    """The file's function definitions by simple name, read once per context."""
    index = ctx.function_index
    if index is None:
        index = ctx.function_index = function_definitions(ctx.tree.root_node, ctx.data)
    return index


def out_parameter_value(ctx: ExtractionContext, address: Node, env: ConstEnv,
                        params_of: Callable[[Node], list[str]],
                        env_at_end: Callable[[ExtractionContext, Node, int, Mapping[str, Value]], ConstEnv],
                        reference: bool = False) -> tuple[dict[str, Value | None], bool] | None:
    """What the call around `&x` (`address`) leaves in `x`, where a same-file definition of the
    callee assigns through its pointer parameter on a run that reaches its end: by path under
    `x` ("" for `x` itself through `*p = expr;`, ".n" for a field through `p->n = expr;`), the
    value or None where it is set but not known; and whether that rests on assumed program
    arguments. None where the call cannot be followed (nothing is known of `x` then).
    `reference`: `address` is the variable `x` itself, passed to a reference parameter
    (`int &threads`) that the callee assigns (`threads = ...;`)."""
    arguments = address.parent
    call = arguments.parent if arguments is not None else None
    if arguments is None or call is None or arguments.type != "argument_list" or call.type != "call_expression":
        return None
    function = call.child_by_field_name("function")
    if function is None or function.type != "identifier":
        return None
    if ctx.text(function) in WRITING:  # (a CUDA samples' option getter: its library's rules)
        return _sample_option(ctx, ctx.text(function), arguments.named_children, address, env)
    callee_ctx, callee = ctx, file_definitions(ctx).get(ctx.text(function))
    if callee is None:  # (defined in another source of the folder: one program's)
        callee_ctx, callee = sibling_function(ctx, ctx.text(function)) or (ctx, None)
    body = callee.child_by_field_name("body") if callee is not None else None
    key = (callee_ctx.path, callee.start_byte if callee is not None else -1)
    if callee is None or body is None or key in _active \
            or (callee_ctx is ctx and callee.start_byte <= address.start_byte < callee.end_byte):
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
            try:
                value = evaluate(ctx.text(arg), env, strings=True)  # (a known string too: `argv[i + 1]`)
            except NotConstant:
                continue
            if isinstance(value, (int, float, str)):
                bound[name] = value
        _active.add(key)
        try:
            local = env_at_end(callee_ctx, callee, body.end_byte - 1, bound)
            ends_early = RETURNED in local.constants or RETURNED in local.unknown  # (the callee's own locals)
            found = {} if ends_early else _written(local, params[position], reference)
            if reference:
                return (found, reads.seen) if found and not ends_early else None
            if ends_early or not found or None in found.values():
                # a loop or an early `return` the replay does not follow: the callee run on the values
                ran = _run(ctx, callee_ctx, callee, address, env, [bound.get(name) for name in params], position)
                if ran is not None:
                    return ran, reads.seen
            if ends_early:
                return None  # (the run ends, or may end, before the callee's last statement)
            skipped = _paths(local.assumed, params[position])  # (written where assumed arguments skip it)
        finally:
            _active.discard(key)
        if skipped - set(found) and _only_dereferenced(callee_ctx, body, params[position]):
            # what the run does not set through the pointer because the program's arguments skip
            # it (`if (argc > 1) { ... }` not taken) keeps the value it held, resting on them
            kept = _kept(ctx, address, env, skipped - set(found))
            return {**found, **kept}, reads.seen or bool(kept)
    return (found, reads.seen) if found else None


def _sample_option(ctx: ExtractionContext, name: str, passed: list[Node], address: Node, env: ConstEnv
                   ) -> tuple[dict[str, Value | None], bool] | None:
    """What `shrGetCmdLineArgumenti(argc, argv, "dimx", &dimx)` leaves in `dimx`: the option's
    value where the program's arguments give it, else nothing (`dimx` keeps its value)."""
    argv = env.program_arguments()
    if argv is None or len(passed) != 4 or passed[3].start_byte != address.start_byte:
        return None
    try:
        option = evaluate(ctx.text(passed[2]), env, strings=True)
    except NotConstant:
        return None
    if not isinstance(option, str):
        return None
    value = written(name, argv, option)[1]
    return ({"": value} if value is not None else {}), env.arguments_assumed()


def _run(ctx: ExtractionContext, callee_ctx: ExtractionContext, callee: Node, address: Node, env: ConstEnv,
         values: list[Value | None], position: int) -> dict[str, Value | None] | None:
    """What `helper_runs.run` of the callee leaves in `x` (of `&x`, argument `position`), by
    path; None where the run is not followed or writes nothing through it."""
    target = address.child_by_field_name("argument")
    held, _ = try_evaluate(ctx.text(target), env) if target is not None else (None, None)
    pointees: dict[int, dict[str, Value]] = {position: {"": held} if isinstance(held, (int, float)) else {}}
    try:
        outcome = run(callee_ctx.data, callee, values, pointees, env)
    except NotConstant:
        return None
    written = next(iter(outcome.written.values()), None)
    return dict(written) if written else None


def _only_dereferenced(ctx: ExtractionContext, body: Node, param: str) -> bool:
    """Whether the callee reads its pointer `param` only as `param->field` or `*param` (never
    hands it on, copies or indexes it): what its run sets through it, its replay sees."""
    stack = [body]
    while stack:
        node = stack.pop()
        if node.type == "identifier" and ctx.text(node) == param:
            parent = node.parent
            if parent is None or parent.type not in ("field_expression", "pointer_expression") \
                    or (parent.type == "pointer_expression" and ctx.text(parent.child_by_field_name("operator")) != "*"):
                return False
        stack.extend(node.named_children)
    return True


def _paths(names: set[str], param: str) -> set[str]:
    """The paths under the caller's variable of these callee names (`*p`: "", `p->n`: ".n")."""
    found = {"" for name in names if name == DEREFERENCED + param}
    return found | {"." + name[len(param) + 2:] for name in names if name.startswith(param + "->")} \
        | {name[len(param):] for name in names if name.startswith(param + ".")}


def _kept(ctx: ExtractionContext, address: Node, env: ConstEnv, suffixes: set[str]) -> dict[str, Value | None]:
    """The folded values the paths under `x` (of `&x`) hold now, by suffix."""
    target = address.child_by_field_name("argument")
    name = re.sub(r"\s+", "", ctx.text(target)).replace("->", ".") if target is not None else ""
    kept: dict[str, Value | None] = {}
    for suffix in suffixes:
        value, _ = try_evaluate(name + suffix, env)
        if isinstance(value, (int, float)):
            kept[suffix] = value
    return kept


def _written(local: ConstEnv, param: str, reference: bool = False) -> dict[str, Value | None]:
    """What a callee's locals say of `*param` and `param->field` (of `param` and `param.field`,
    a reference) by path under the caller's variable; None: set, not known."""
    found: dict[str, Value | None] = {}
    whole = param if reference else DEREFERENCED + param
    for key in (*local.constants, *local.unknown):
        if key == whole:
            suffix = ""
        elif key.startswith(param + "."):
            suffix = key[len(param):]
        else:
            continue
        try:
            value = local.lookup(key)
        except NotConstant:
            value = None
        found[suffix] = value if isinstance(value, (int, float)) else None
    return found


def returned(env: ConstEnv, maybe: bool) -> None:
    """A `return` inside a branch or loop that the run reaches (`maybe`: may reach): said in
    the callee's locals under `RETURNED`."""
    if maybe:
        env.unknown.setdefault(RETURNED, "may have returned")
    else:
        env.constants[RETURNED] = 1


def ends_function(node: Node, body: Node) -> bool:
    """Whether nothing of the function runs after the `return` `node` (the last statement of
    branches that end the body, outside any loop or `switch`)."""
    while node.parent is not None and node.parent != body:
        parent = node.parent
        if parent.type in ("for_statement", "while_statement", "do_statement", "for_range_loop", "switch_statement"):
            return False
        if parent.type == "compound_statement" and [c for c in parent.named_children if c.type != "comment"][-1] != node:
            return False
        node = parent
    return node.parent == body and [c for c in body.named_children if c.type != "comment"][-1] == node

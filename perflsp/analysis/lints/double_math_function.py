"""Double-precision math library calls in single-precision GPU code.

`pow(x, 2.0)` with a float `x` calls the FP64 `pow` (C++ picks the double overload because `2.0`
is a double): dozens of FP64 instructions where `x * x` needs one FP32 multiply. The same holds
for `exp(-2.5e-3 * t)`, `sqrt(x + 1.0)`, ...

In CUDA C++ a float argument selects the float overload: `sqrt(x)` with a float `x` *is*
`sqrtf(x)`, and this rule stays silent. It fires when
- (C++) an argument is double only because of a double literal or a promoted expression, while
  the call is meant to be float (every non-literal argument is float);
- (C, `.c` files) the double-named function is called on float data at all: C has one `sqrt`,
  and it takes a double.
Fixes: `powf(x, 2.0f)` / `expf(...)` (the float function with float literals), and for
`pow(x, 2)` with a simple operand, `x * x`.
"""

from __future__ import annotations

from tree_sitter import Node

from perflsp.analysis.exprtypes import DOUBLE, DOUBLE_MATH, FLOAT, FLIT, call_name, double_literals, math_base_name
from perflsp.analysis.fixes import EditError, float_function_fix, square_fix
from perflsp.analysis.lints.context import GpuCode, LintContext, walk
from perflsp.analysis.models import Finding

CODE = "precision/double-math-function"
NAME = "double-math-function"
DEFAULT_SEVERITY = "warning"


def check(ctx: LintContext) -> list[Finding]:
    found: dict[int, Finding] = {}
    for code in ctx.gpu_code():
        for node in walk(code.node):
            if node.type != "call_expression" or node.start_byte in found:
                continue
            name = call_name(node)
            if name is None or math_base_name(name) not in DOUBLE_MATH or name.startswith("__"):
                continue
            actual, intended = code.typer.types(node)
            if intended is None or intended.scalar != FLOAT:
                continue
            if ctx.language == "c":
                why = f"in C, `{name}` takes and returns double"
            elif actual is not None and actual.scalar == DOUBLE:
                why = _why_double(ctx, code, node)
            else:
                continue
            found[node.start_byte] = _finding(ctx, code, node, name, why)
    return list(found.values())


def _why_double(ctx: LintContext, code: GpuCode, call: Node) -> str:
    args = call.child_by_field_name("arguments")
    for arg in args.named_children if args is not None else ():
        ty = code.typer.actual(arg)
        if ty is not None and ty.scalar == DOUBLE:
            literals = [ctx.text(lit) for lit in double_literals(arg)]
            intended = code.typer.intended(arg)
            if intended is not None and intended.scalar == FLIT and len(literals) == 1 and ctx.text(arg) == literals[0]:
                return f"the argument `{literals[0]}` is a double, so the FP64 overload is chosen"
            if literals:
                return f"the argument `{_short(ctx, arg)}` is double (because of `{literals[0]}`), so the FP64 overload is chosen"
            return f"the argument `{_short(ctx, arg)}` is double, so the FP64 overload is chosen"
    return "the FP64 overload is chosen"


def _finding(ctx: LintContext, code: GpuCode, call: Node, name: str, why: str) -> Finding:
    base = math_base_name(name)
    where = f" in `{code.instantiation}`" if code.instantiation else ""
    fixes = []
    for build in (square_fix, lambda d, t, s: float_function_fix(d, t, s, ctx.language)):
        try:
            fixes.append(build(ctx.data, ctx.tree, ctx.span(call)))
        except EditError:
            pass
    hint = " (or `x * x`)" if base == "pow" else ""
    message = f"`{name}` runs in double precision here: {why}{where}; use `{base}f`{hint}"
    return Finding(code=CODE, message=message, span=ctx.span(call), severity=DEFAULT_SEVERITY,
                   fixes=tuple(fixes), kernel=code.label)


def _short(ctx: LintContext, node: Node, limit: int = 40) -> str:
    text = " ".join(ctx.text(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

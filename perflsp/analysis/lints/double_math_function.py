"""`precision/double-math-function`: double-precision math library calls in single-precision GPU code.

What the rule reports, why, its fix and its example are declared once, in `RULE` below: the
registry (`perflsp.analysis.rules`) and docs/rules/ are generated from it.
"""

from __future__ import annotations

from tree_sitter import Node

from perflsp.analysis.exprtypes import (
    DOUBLE,
    DOUBLE_MATH,
    FLIT,
    FLOAT,
    call_name,
    double_literals,
    has_precision,
    math_base_name,
)
from perflsp.analysis.lints.context import GpuCode, LintContext
from perflsp.analysis.models import Finding, FixRequest
from perflsp.analysis.ruledef import Example, RuleInfo

_DOC = """\
## What it reports

A call of a double-precision math function (`pow`, `exp`, `sqrt`, `sin`, `log`, `fabs`, ...) that
runs in FP64 although the code around it is single precision:

```cuda
y[i] = pow(x[i], 2.0);               // pow(float, double) -> the double pow
y[i] = sinf(p) * exp(-2.5e-3 * t);   // the argument is double because of -2.5e-3
```

## Why it matters on GPUs

A double `pow` is dozens of FP64 instructions (and `exp` about twenty); on GPUs with 1/32 or 1/64
FP64 rate that dominates the kernel. `x * x` is one FP32 multiply.

## C++ versus C

In CUDA C++ (`.cu`, `.cpp`, headers) a float argument selects the float overload: `sqrt(x)` with a
float `x` *is* `sqrtf(x)`, and so are `exp(x)`, `pow(x, y)` with two floats and `pow(x, 2)`.
The rule therefore fires in C++ only when an argument is double (a double literal, a promoted
expression) while every other argument is float, i.e. the double overload is chosen by accident.
An argument that is a double variable is taken as intended.

In C (`.c` files) there is one `sqrt`, and it takes a double: any double-named function called on
float data is reported.

## Fix

- `Use powf`: the `f`-suffixed function with the double literals of its arguments made float
  (`powf(x[i], 2.0f)`, `expf(-2.5e-3f * t)`). `std::pow` keeps its name and gets float
  arguments, which selects the float overload.
- For `pow(v, 2)` with a simple operand (a variable, `x[i]`, `p.x`): `Replace with x[i] * x[i]`
  (the preferred fix; parenthesised where precedence needs it).
"""

_BAD = """\
__global__ void square(int n, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = pow(x[i], 2.0);   // pow(float, double): the FP64 pow
}
"""

_GOOD = """\
__global__ void square(int n, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] * x[i];
}
"""

RULE = RuleInfo(
    code="precision/double-math-function",
    name="double-math-function",
    default_severity="warning",
    has_fix=True,
    summary="a double-precision math function (`pow`, `exp`, ...) called from float code",
    fix_note="`powf(...)` / `x * x`",
    applies_to="kernels, `__device__` functions, OpenMP target regions",
    doc=_DOC,
    example=Example(bad=_BAD, good=_GOOD),
)
CODE = RULE.code
NAME = RULE.name
DEFAULT_SEVERITY = RULE.default_severity


def check(ctx: LintContext) -> list[Finding]:
    found: dict[int, Finding] = {}
    for code in ctx.gpu_code():
        for node in ctx.descendants(code.node):
            if node.type != "call_expression" or node.start_byte in found:
                continue
            name = call_name(node)
            if name is None or math_base_name(name) not in DOUBLE_MATH or name.startswith("__"):
                continue
            actual, intended = code.typer.types(node)
            if not has_precision(intended, FLOAT):
                continue
            if ctx.language == "c":
                why = f"in C, `{name}` takes and returns double"
            elif has_precision(actual, DOUBLE):
                why = _why_double(ctx, code, node)
            else:
                continue
            found[node.start_byte] = _finding(ctx, code, node, name, why)
    return list(found.values())


def _why_double(ctx: LintContext, code: GpuCode, call: Node) -> str:
    args = call.child_by_field_name("arguments")
    for arg in args.named_children if args is not None else ():
        ty = code.typer.actual(arg)
        if has_precision(ty, DOUBLE):
            literals = [ctx.text(lit) for lit in double_literals(arg)]
            intended = code.typer.intended(arg)
            if has_precision(intended, FLIT) and len(literals) == 1 and ctx.text(arg) == literals[0]:
                return f"the argument `{literals[0]}` is a double, so the FP64 overload is chosen"
            if literals:
                return f"the argument `{_short(ctx, arg)}` is double (because of `{literals[0]}`), so the FP64 overload is chosen"
            return f"the argument `{_short(ctx, arg)}` is double, so the FP64 overload is chosen"
    return "the FP64 overload is chosen"


def _finding(ctx: LintContext, code: GpuCode, call: Node, name: str, why: str) -> Finding:
    base = math_base_name(name)
    where = f" in `{code.instantiation}`" if code.instantiation else ""
    span = ctx.span(call)
    requests: tuple[FixRequest, ...] = (FixRequest("float-function", span, language=ctx.language),)
    if base == "pow":  # `pow(x, 2)` may become `x * x`, offered first
        requests = (FixRequest("square", span), *requests)
    hint = " (or `x * x`)" if base == "pow" else ""
    message = f"`{name}` runs in double precision here: {why}{where}; use `{base}f`{hint}"
    return Finding(code=CODE, message=message, span=span, severity=DEFAULT_SEVERITY, kernel=code.label,
                   fix_requests=requests)


def _short(ctx: LintContext, node: Node, limit: int = 40) -> str:
    text = " ".join(ctx.text(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

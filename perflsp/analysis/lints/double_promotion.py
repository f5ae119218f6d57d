"""`precision/double-promotion`: unsuffixed floating-point literals that drag single-precision GPU code into FP64.

What the rule reports, why, its fix and its example are declared once, in `RULE` below: the
registry (`perflsp.analysis.rules`) and docs/rules/ are generated from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tree_sitter import Node

from perflsp.analysis.ctype import CType
from perflsp.analysis.exprtypes import (
    ARITH_OPS,
    COMPARE_OPS,
    COMPOUND_FLOAT_OPS,
    DOUBLE,
    FLIT,
    FLOAT,
    call_name,
    double_literals,
    has_precision,
    is_float_math,
    is_runtime,
    type_of,
)
from perflsp.analysis.lints.context import GpuCode, LintContext
from perflsp.analysis.models import Finding, FixRequest
from perflsp.analysis.ruledef import Example, RuleInfo

_DOC = """\
## What it reports

An unsuffixed floating-point literal (`0.5`, `1.0`, `2.5e-3`) that meets single-precision data at
run time. In C and C++ such a literal is a `double`, and the usual arithmetic conversions turn the
whole operation into a double one:

```cuda
__global__ void halve(int n, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] * 0.5;   // x[i] -> double, FP64 multiply, double -> float
}
```

The rule fires where a double literal is
- an operand of `+ - * /` or of a comparison whose other operand is float (`x * 0.5`, `t > 0.0`);
- the value of a compound assignment to a float (`acc *= 0.5`);
- part of a run-time expression of literals and integers that ends up in a float
  (`float v = i * 0.5;`, `y[i] = n / 2.0;`, `sinf(i * 0.1)`, `(float)(i * 0.1)`,
  `return k * 0.25;` in a float function).

## Why it matters on GPUs

FP64 throughput is 1/2 of FP32 on data-centre parts (A100, H100) but 1/32 to 1/64 on GeForce,
RTX workstation and L4/L40-class GPUs. One stray literal in an inner loop can make a kernel that
the roofline calls bandwidth-bound FP32 into a compute-bound FP64 one, and adds two conversion
instructions per use. The compiler removes the promotion only when it can prove the double
result identical (nvcc 13 does for `x * 0.5`, a power of two, but not for `x * 0.1`).

## When it stays silent

- In double code: `d * 0.5` with a double `d` is intended.
- On integer literals (`i * 2`, index arithmetic) and literals with a suffix (`0.5f`, `0.5L`).
- On compile-time constants: `float h = 0.5;` and `float third = 1.0 / 3.0;` are converted once.
- In template code, for instantiations whose type parameter is not `float`: `sum<double>` is
  clean, `sum<float>` is reported with the instantiation named. A template never launched with
  explicit arguments is not judged.
- Behind an explicit cast to double: `(double)x * 0.5` says FP64 on purpose.

## Fix

`Write 0.5f`: appends `f` to the literal. Each finding carries its own one-character edit.
"""

_BAD = """\
__global__ void halve(int n, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] * 0.5;   // x[i] becomes a double: an FP64 multiply
}
"""

_GOOD = """\
__global__ void halve(int n, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] * 0.5f;
}
"""

RULE = RuleInfo(
    code="precision/double-promotion",
    name="double-promotion",
    default_severity="warning",
    has_fix=True,
    summary="an unsuffixed double literal promotes float arithmetic to FP64",
    fix_note="add the `f` suffix",
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
            if node.type not in _SINK_TYPES:
                continue  # (`_float_sinks` finds none there)
            for value, why in _float_sinks(ctx, code, node):
                for literal in double_literals(value):
                    if literal.start_byte not in found:
                        found[literal.start_byte] = _finding(ctx, code, literal, why)
    return list(found.values())


def _is(ty: CType | None, kind: CType) -> bool:
    return has_precision(ty, kind)


Sink = tuple[Node, str]  # (value, reason): a literal expression that meets float data at run time


def _float_sinks(ctx: LintContext, code: GpuCode, node: Node) -> Iterator[Sink]:
    """(value, reason) pairs: `value` is an intended-neutral expression (literals and integers)
    whose result ends up mixed with, or converted to, float at run time."""
    handler = _SINKS.get(node.type)
    if handler is not None:
        yield from handler(ctx, code, node)
    elif node.type == "return_statement" and _is(code.returns, FLOAT):
        value = next((c for c in node.named_children if c.type != "comment"), None)
        if value is not None and _is(code.typer.intended(value), FLIT) and is_runtime(value):
            yield value, "is computed in FP64 and then returned as a float"


def _binary_sinks(ctx: LintContext, code: GpuCode, node: Node) -> Iterator[Sink]:
    typer = code.typer
    op = node.child_by_field_name("operator")
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if op is None or left is None or right is None or (op.type not in ARITH_OPS and op.type not in COMPARE_OPS):
        return
    for value, partner in ((right, left), (left, right)):
        if _is(typer.intended(partner), FLOAT) and _is(typer.intended(value), FLIT):
            if _destination_is_double(code, node):
                return  # mixed-precision code computing into a double: the promotion is wanted
            yield value, f"promotes `{_short(ctx, partner)}` (float) and the `{op.type}` to FP64"


def _assignment_sinks(ctx: LintContext, code: GpuCode, node: Node) -> Iterator[Sink]:
    typer = code.typer
    op = node.child_by_field_name("operator")
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if op is None or left is None or right is None or not _is(typer.intended(left), FLOAT):
        return
    if not _is(typer.intended(right), FLIT):
        return
    if op.type in COMPOUND_FLOAT_OPS:
        yield right, f"makes `{_short(ctx, node)}` an FP64 operation on a float"
    elif op.type == "=" and is_runtime(right):
        yield right, "is computed in FP64 and then narrowed to float"


def _init_sinks(ctx: LintContext, code: GpuCode, node: Node) -> Iterator[Sink]:
    typer = code.typer
    value = node.child_by_field_name("value")
    declaration = node.parent
    type_node = declaration.child_by_field_name("type") if declaration is not None else None
    target = node.child_by_field_name("declarator")
    if value is None or type_node is None or target is None or target.type != "identifier":
        return
    if _is(type_of(ctx.text(type_node), typer.aliases), FLOAT) and _is(typer.intended(value), FLIT) and is_runtime(value):
        yield value, "is computed in FP64 and then narrowed to float"


def _call_sinks(ctx: LintContext, code: GpuCode, node: Node) -> Iterator[Sink]:
    name = call_name(node)
    args = node.child_by_field_name("arguments")
    if name is None or args is None or not is_float_math(name):
        return
    for arg in args.named_children:
        if _is(code.typer.intended(arg), FLIT) and is_runtime(arg):
            yield arg, f"is computed in FP64 and then passed to `{name}` as a float"


def _cast_sinks(ctx: LintContext, code: GpuCode, node: Node) -> Iterator[Sink]:
    typer = code.typer
    value = node.child_by_field_name("value")
    if value is not None and _is(typer.actual(node), FLOAT) and _is(typer.intended(value), FLIT) and is_runtime(value):
        yield value, "is computed in FP64 and then cast to float"


_SINKS: dict[str, Callable[[LintContext, GpuCode, Node], Iterator[Sink]]] = {
    "binary_expression": _binary_sinks,
    "assignment_expression": _assignment_sinks,
    "init_declarator": _init_sinks,
    "call_expression": _call_sinks,
    "cast_expression": _cast_sinks,
}
_SINK_TYPES = frozenset({*_SINKS, "return_statement"})  # where `_float_sinks` looks


_PASS_THROUGH = frozenset({"binary_expression", "parenthesized_expression", "unary_expression",
                           "conditional_expression", "cast_expression"})


def _destination_is_double(code: GpuCode, node: Node) -> bool:
    """Whether the full expression around `node` is stored into (or returned as) a double."""
    top = node
    while top.parent is not None and top.parent.type in _PASS_THROUGH:
        if top.parent.type == "cast_expression":
            return _is(code.typer.actual(top.parent), DOUBLE)
        operator = top.parent.child_by_field_name("operator")
        if top.parent.type == "binary_expression" and (operator is None or operator.type not in ARITH_OPS):
            return False
        top = top.parent
    parent = top.parent
    if parent is None:
        return False
    if parent.type == "init_declarator":
        declaration = parent.parent
        type_node = declaration.child_by_field_name("type") if declaration is not None else None
        target = parent.child_by_field_name("declarator")
        return (type_node is not None and target is not None and target.type == "identifier"
                and _is(type_of(_node_text(type_node), code.typer.aliases), DOUBLE))
    if parent.type == "assignment_expression" and parent.child_by_field_name("right") == top:
        left = parent.child_by_field_name("left")
        return left is not None and _is(code.typer.intended(left), DOUBLE)
    if parent.type == "return_statement":
        return _is(code.returns, DOUBLE)
    return False


def _finding(ctx: LintContext, code: GpuCode, literal: Node, why: str) -> Finding:
    text = ctx.text(literal)
    where = f" in `{code.instantiation}`" if code.instantiation else ""
    message = f"`{text}` is a double literal: it {why}{where}; write `{text}f`"
    span = ctx.span(literal)
    return Finding(code=CODE, message=message, span=span, severity=DEFAULT_SEVERITY, kernel=code.label,
                   fix_requests=(FixRequest("float-literal", span),))


def _node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _short(ctx: LintContext, node: Node, limit: int = 40) -> str:
    text = " ".join(ctx.text(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

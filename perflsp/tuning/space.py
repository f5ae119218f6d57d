"""A tuning space: named parameters with their value lists and restrictions, in Kernel Tuner's
terms (`tune_params`, `restrictions` as Python expressions over the parameter names).

Restrictions are evaluated here by a small expression evaluator (arithmetic, comparisons,
`and`/`or`/`not`, `min`/`max`/`abs`/`int`), never by `eval`: they come from comments in the
code and from cache files other people wrote. Kernel Tuner gets the same strings.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Value = int | float | str
Config = dict[str, Value]

MAX_SPACE = 2_000_000  # configurations enumerated at most (Kernel Tuner's own spaces are far smaller)


class SpaceError(ValueError):
    """A parameter list or restriction that cannot be used (the message names it)."""


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
           ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_CMPOPS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
           ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FUNCS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs, "int": int, "float": float}


@dataclass(frozen=True)
class Restriction:
    text: str
    tree: ast.Expression
    names: frozenset[str]

    @classmethod
    def parse(cls, text: str) -> Restriction:
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise SpaceError(f"restriction {text!r}: not an expression ({exc.msg})") from None
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Call):
                if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or node.keywords:
                    raise SpaceError(f"restriction {text!r}: only min, max, abs, int and float may be called")
            elif not isinstance(node, (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare,
                                       ast.Constant, ast.Load, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd,
                                       ast.IfExp, *_BINOPS, *_CMPOPS)):
                raise SpaceError(f"restriction {text!r}: `{type(node).__name__}` is not allowed")
        names -= set(_FUNCS)
        return cls(text.strip(), tree, frozenset(names))

    def holds(self, config: Mapping[str, Value]) -> bool:
        try:
            return bool(_eval(self.tree.body, config))
        except (ZeroDivisionError, TypeError, ValueError, OverflowError):
            return False


def _eval(node: ast.AST, env: Mapping[str, Value]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise SpaceError(f"unknown name `{node.id}`")
        return env[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ValueError("exponent too large")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env)
        unary: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.Not: operator.not_, ast.USub: operator.neg,
                                                                  ast.UAdd: operator.pos}
        return unary[type(node.op)](value)
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_eval(v, env) for v in node.values)
        return any(_eval(v, env) for v in node.values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, env)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body, env) if _eval(node.test, env) else _eval(node.orelse, env)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)  # only plain calls of _FUNCS pass validation
        return _FUNCS[node.func.id](*(_eval(a, env) for a in node.args))
    raise SpaceError(f"`{type(node).__name__}` is not allowed")


def evaluate(expression: str, config: Mapping[str, Value]) -> Any:
    """The value of an arithmetic expression over a configuration (e.g. a shared-memory size)."""
    return _eval(Restriction.parse(expression).tree.body, config)


@dataclass
class TuningSpace:
    """What Kernel Tuner tunes: `tune_params` (ordered), `restrictions`, and what perflsp knows
    about the parameters (which ones are block dimensions, the shared memory a configuration
    needs, the configuration the code has now)."""

    kernel_name: str
    tune_params: dict[str, list[Value]]
    restrictions: list[str] = field(default_factory=list)
    block_params: tuple[str, ...] = ()  # x, y, z order
    shared_memory_bytes: str | None = None  # expression over the parameters
    current: Config | None = None
    problem_size: tuple[int, ...] | None = None
    notes: list[str] = field(default_factory=list)
    code_values: dict[str, Value] | None = None  # what the code has now, also outside the value lists

    def __post_init__(self) -> None:
        for name, values in self.tune_params.items():
            if not name.isidentifier():
                raise SpaceError(f"parameter name {name!r} is not an identifier")
            if not values:
                raise SpaceError(f"parameter `{name}` has no values")
            if len(set(map(repr, values))) != len(values):
                raise SpaceError(f"parameter `{name}` lists a value twice")
        self._parsed = [Restriction.parse(r) for r in self.restrictions]
        for restriction in self._parsed:
            unknown = restriction.names - set(self.tune_params)
            if unknown:
                raise SpaceError(f"restriction {restriction.text!r} names {', '.join(sorted(unknown))}, "
                                 f"which {'is' if len(unknown) == 1 else 'are'} not a tuning parameter")

    # -- configurations ------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return list(self.tune_params)

    @property
    def cartesian_size(self) -> int:
        return math.prod(len(v) for v in self.tune_params.values())

    def key(self, config: Mapping[str, Value]) -> str:
        """Kernel Tuner's cache key: the values in parameter order, joined by commas."""
        return ",".join(str(config[name]) for name in self.tune_params)

    def problem(self, config: Mapping[str, Any]) -> str | None:
        """Why `config` is not a point of this space, or None when it is."""
        missing = [n for n in self.tune_params if n not in config]
        if missing:
            return f"no value for {', '.join(missing)}"
        extra = [n for n in config if n not in self.tune_params]
        if extra:
            return f"{', '.join(map(str, extra))} {'is' if len(extra) == 1 else 'are'} not a tuning parameter"
        for name, values in self.tune_params.items():
            if config[name] not in values or isinstance(config[name], bool):
                return f"{name}={config[name]!r} is not one of {_short(values)}"
        for restriction in self._parsed:
            if not restriction.holds(config):
                return f"violates `{restriction.text}`"
        return None

    def valid(self, config: Mapping[str, Any]) -> bool:
        return self.problem(config) is None

    def configs(self) -> Iterator[Config]:
        """Every configuration that satisfies the restrictions, in Kernel Tuner's order."""
        if self.cartesian_size > MAX_SPACE:
            raise SpaceError(f"the space has {self.cartesian_size:,} combinations before restrictions "
                             f"(at most {MAX_SPACE:,}): list fewer values")
        names = self.names
        for values in itertools.product(*self.tune_params.values()):
            config = dict(zip(names, values, strict=True))
            if all(r.holds(config) for r in self._parsed):
                yield config

    def valid_configs(self) -> list[Config]:
        return list(self.configs())

    def threads(self, config: Mapping[str, Value]) -> int | None:
        """Threads per block of a configuration (None when the space has no block dimensions)."""
        if not self.block_params:
            return None
        return math.prod(int(config[name]) for name in self.block_params)

    def shared_bytes(self, config: Mapping[str, Value]) -> int:
        if not self.shared_memory_bytes:
            return 0
        try:
            return int(evaluate(self.shared_memory_bytes, config))
        except (SpaceError, ZeroDivisionError, TypeError, ValueError):
            return 0

    def neighbours(self, config: Mapping[str, Value]) -> list[Config]:
        """Configurations one value step away in one parameter (valid ones only)."""
        out = []
        for name, values in self.tune_params.items():
            index = values.index(config[name])
            for step in (-1, 1):
                if 0 <= index + step < len(values):
                    candidate = dict(config)
                    candidate[name] = values[index + step]
                    if self.valid(candidate):
                        out.append(candidate)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel_name, "tune_params": self.tune_params, "restrictions": self.restrictions,
                "block_params": list(self.block_params), "shared_memory_bytes": self.shared_memory_bytes,
                "current": self.current, "notes": self.notes}


def _short(values: Sequence[Value]) -> str:
    text = ", ".join(map(str, values[:12]))
    return f"[{text}{', ...' if len(values) > 12 else ''}]"


def with_gpu_restrictions(space: TuningSpace, max_threads_per_block: int | None,
                          max_shared_bytes: int | None, gpu_name: str) -> TuningSpace:
    """`space` plus the GPU's limits: threads per block and shared memory per block."""
    restrictions = list(space.restrictions)
    if max_threads_per_block and space.block_params:
        restrictions.append(f"{'*'.join(space.block_params)} <= {max_threads_per_block}")
    if max_shared_bytes and space.shared_memory_bytes:
        restrictions.append(f"({space.shared_memory_bytes}) <= {max_shared_bytes}")
    notes = [*space.notes, f"limits of {gpu_name}: {max_threads_per_block} threads"
             + (f", {max_shared_bytes} bytes of shared memory per block" if space.shared_memory_bytes else "")]
    return TuningSpace(space.kernel_name, space.tune_params, restrictions, space.block_params,
                       space.shared_memory_bytes, space.current, space.problem_size, notes, space.code_values)


__all__ = [
    "MAX_SPACE",
    "Config",
    "Restriction",
    "SpaceError",
    "TuningSpace",
    "Value",
    "evaluate",
    "with_gpu_restrictions",
]

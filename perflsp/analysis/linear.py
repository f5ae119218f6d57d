"""Index expressions as linear forms over "atoms" (thread and block indices, loop variables).

`a[(blockIdx.x * blockDim.x + threadIdx.x) * N + k]` is `1·tx + B·bx + N·bx... + 1·k`: from
the coefficients and each atom's range we estimate how many distinct elements all threads
touch (the DRAM footprint) and whether neighbouring threads touch neighbouring elements
(coalescing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

UNKNOWN_COEFF = float("inf")  # a coefficient that is a runtime value: treated as "large"


def tile_atom(atom: str, low: int, values: float) -> str:
    """The atom of a thread index split into tiles: `(atom / low) % values`, each of its own
    range. `tx % 32` is (1, 32), a tile's column; `tx / 32` is (32, inf), its row; `(tx % 32) / 4`
    is (4, 8). `As[ty][tx % 32] = A[(tx / 32) * K + tx % 32]` reads rows K apart, 32
    consecutive elements each, where one opaque index would read 1,024 scattered ones."""
    if values == math.inf:
        return f"{atom}/{low}"
    return f"{atom}%{int(values)}" if low == 1 else f"{atom}/{low}%{int(values)}"


def tile_parts(atom: str) -> tuple[str, int, float] | None:
    """(thread atom, low, values) of a tile atom (see `tile_atom`); None for any other atom."""
    base, sep, rest = atom.partition("/")
    if sep:
        low_text, sep2, values_text = rest.partition("%")
        if low_text.isdigit() and (not sep2 or values_text.isdigit()):
            return base, int(low_text), float(values_text) if sep2 else math.inf
        return None
    base, sep, values_text = atom.partition("%")
    if sep and values_text.isdigit():
        return base, 1, float(values_text)
    return None


def tile_value(atom: str, index: int) -> int | None:
    """The tile atom's value at the thread index `index`; None for another atom."""
    parts = tile_parts(atom)
    if parts is None:
        return None
    _, low, values = parts
    value = index // low
    return value if values == math.inf else value % int(values)


def base_atom(atom: str) -> str:
    """The thread index a tile atom splits; any other atom itself."""
    parts = tile_parts(atom)
    return parts[0] if parts else atom


@dataclass(frozen=True, slots=True)
class Linear:
    """sum(coeff[atom] * atom) + const; `nonlinear` marks data-dependent or unanalysable parts."""

    coeffs: tuple[tuple[str, float], ...] = ()
    const: float = 0.0
    const_known: bool = True
    nonlinear: frozenset[str] = field(default_factory=frozenset)  # atoms used non-linearly

    @staticmethod
    def constant(value: float | None) -> Linear:
        if value is None:
            return Linear(const_known=False)
        return Linear(const=float(value))

    @staticmethod
    def atom(name: str) -> Linear:
        return Linear(coeffs=((name, 1.0),))

    @property
    def atoms(self) -> frozenset[str]:
        return frozenset(a for a, _ in self.coeffs) | self.nonlinear

    def coeff_map(self) -> dict[str, float]:
        return dict(self.coeffs)

    def add(self, other: Linear, sign: float = 1.0) -> Linear:
        merged = self.coeff_map()
        for atom, c in other.coeffs:
            known = c != UNKNOWN_COEFF and merged.get(atom, 0.0) != UNKNOWN_COEFF
            merged[atom] = merged.get(atom, 0.0) + sign * c if known else UNKNOWN_COEFF
        coeffs = tuple(sorted((a, c) for a, c in merged.items() if c != 0.0))
        return Linear(coeffs, self.const + sign * other.const, self.const_known and other.const_known,
                      self.nonlinear | other.nonlinear)

    def scale(self, factor: float | None) -> Linear:
        if factor is None:
            coeffs = tuple((a, UNKNOWN_COEFF) for a, _ in self.coeffs)
            return Linear(coeffs, 0.0, False, self.nonlinear)
        coeffs = tuple((a, c * factor if c != UNKNOWN_COEFF else c) for a, c in self.coeffs if c * factor != 0)
        return Linear(coeffs, self.const * factor, self.const_known, self.nonlinear)

    def mul(self, other: Linear) -> Linear:
        """Product: linear only when one side is a known constant."""
        if not other.coeffs and not other.nonlinear:
            return self.scale(other.const if other.const_known else None)
        if not self.coeffs and not self.nonlinear:
            return other.scale(self.const if self.const_known else None)
        return Linear(const_known=False, nonlinear=self.atoms | other.atoms)

    def opaque(self) -> Linear:
        """The result of a non-linear operation on this form: same atoms, no structure."""
        return Linear(const_known=False, nonlinear=self.atoms)

    def is_constant(self) -> bool:
        return not self.coeffs and not self.nonlinear


def value_range(form: Linear, cardinality: dict[str, float]) -> tuple[float, float] | None:
    """The least and the greatest value a form takes over its atoms' extents (`cardinality`);
    None where its constant or a coefficient is not known, an atom enters it non-linearly, or an
    atom's extent is not known or not finite."""
    if form.nonlinear or not form.const_known:
        return None
    low = high = form.const
    for atom, coeff in form.coeffs:
        extent = cardinality.get(atom)
        if coeff == UNKNOWN_COEFF or extent is None or not math.isfinite(extent):
            return None
        low += min(0.0, coeff * (max(extent, 1.0) - 1.0))
        high += max(0.0, coeff * (max(extent, 1.0) - 1.0))
    return low, high


def distinct_values(form: Linear, cardinality: dict[str, float], accesses: float) -> float:
    """How many distinct values the form takes over all atoms' ranges (capped by `accesses`)."""
    if "data" in form.nonlinear:
        return accesses
    nonlinear = 1.0
    for atom in form.nonlinear:
        nonlinear *= max(1.0, cardinality.get(atom, 1.0))
    items = sorted(((abs(c), max(1.0, cardinality.get(a, 1.0))) for a, c in form.coeffs), key=lambda x: x[0])
    distinct = 1.0
    extent = 0.0  # span of values covered so far, in elements
    for coeff, card in items:
        if card <= 1.0:
            continue
        if coeff == UNKNOWN_COEFF or coeff > extent:
            distinct *= card
            extent = extent + (coeff if coeff != UNKNOWN_COEFF else 1e18) * (card - 1)
        else:
            # overlapping ranges (a[i + k]): the values fill the span instead of multiplying
            extent = extent + coeff * (card - 1)
            distinct = min(distinct * card, extent + 1)
    # a part that is a function of atoms the linear part already ranges over (`(col & 1)` beside
    # `col`) takes one value per value of them: no more values than the atoms' combinations
    combinations = 1.0
    for atom in {a for a, _ in form.coeffs} | form.nonlinear:
        combinations *= max(1.0, cardinality.get(atom, 1.0))
    return max(1.0, min(distinct * nonlinear, combinations, accesses))


def contiguous_stride(form: Linear, thread_atom: str = "tx") -> float | None:
    """Elements between accesses of neighbouring threads (1 = coalesced); None if unrelated."""
    if thread_atom in form.nonlinear:
        return UNKNOWN_COEFF
    return form.coeff_map().get(thread_atom)

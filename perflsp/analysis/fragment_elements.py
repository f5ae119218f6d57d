"""`frag.num_elements` of a WMMA fragment (`for (int i = 0; i < frag.num_elements; i++)`): fixed
by the fragment's use, shape and element type. The CUDA programming guide's WMMA section
leaves the mapping of elements to threads unspecified but fixes the count per type (`mma.h`
declares each fragment's storage): each lane holds its share of the matrix over the warp's 32
lanes (rows × columns / 32: M×K for `matrix_a`, K×N for `matrix_b`, M×N for the accumulator),
except 16-bit `half` inputs, which every shape stores as 16 elements per lane."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perflsp.analysis.ctype import INT
from perflsp.analysis.linear import Linear
from perflsp.analysis.notes import Note, NoteKind, NoteSource
from perflsp.analysis.walk_values import WARP_SIZE, Val

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker

HALF_INPUT_ELEMENTS = 16
_HALF = ("half", "__half")


def elements_per_lane(use: str, shape: tuple[float | None, ...], element: str) -> float | None:
    """How many elements one lane's fragment holds; None when the shape is not known."""
    if len(shape) != 3 or any(d is None for d in shape):
        return None
    m, n, k = (float(d) for d in shape if d is not None)
    if use in ("matrix_a", "matrix_b") and element.split("::")[-1] in _HALF:
        return float(HALF_INPUT_ELEMENTS)
    rows_cols = {"matrix_a": m * k, "matrix_b": k * n, "accumulator": m * n}.get(use)
    return max(1.0, rows_cols / WARP_SIZE) if rows_cols is not None else None


def fragment_num_elements(walker: Walker, name: str) -> Val | None:
    """The value of `name.num_elements` for a declared fragment `name`, said once as evidence."""
    fragment = walker.fragments.get(name)
    if fragment is None:
        return None
    use, shape, element = fragment
    count = elements_per_lane(use, shape, element)
    if count is None:
        return None
    said = f"num_elements of {name}"
    if said not in walker.said_once:
        walker.said_once.add(said)
        dims = "×".join(f"{d:g}" for d in shape if d is not None)
        walker.notes.append(Note(NoteKind.TENSOR_CORE, NoteSource.SOURCE,
                                 f"`{name}.num_elements`: {count:g} per thread (a {dims} {use} fragment of "
                                 f"{element or 'its type'}, as the WMMA API fixes it)", subject=name, value=count))
    return Val(INT, count, Linear.constant(count), static=True)

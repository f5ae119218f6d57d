"""The tuning problem from the code: which parameters, which values, which restrictions.

A kernel names its knobs in a comment inside it or in the lines just above it:

    // perflsp:tune block_size_x=16,32,64,128 block_size_y=1,2,4,8 tile_size_x=1..4
    // perflsp:restrict block_size_x*block_size_y >= 32
    // perflsp:shared-memory (block_size_x*tile_size_x+14)*(block_size_y*tile_size_y+14)*4
    // perflsp:block block_size_x block_size_y
    __global__ void convolution_kernel(...)

- `tune NAME=values`: a compile-time knob, a `#define NAME <int>` or `const`/`constexpr` integer
  of the file, as the file's program model reads it (its macros and folded constants; the edit
  rewrites its value; Kernel Tuner passes it as `-DNAME=value`). Values are
  a comma list or an inclusive integer range `a..b`.
- `restrict EXPR`: a restriction over the parameters (Kernel Tuner's syntax, a Python expression).
- `shared-memory EXPR`: the bytes of shared memory one block needs; becomes a restriction with
  the GPU's shared memory per block, and feeds the occupancy of the static prior.
- `block NAMES`: which parameters are the block's x, y, z dimensions (default: the parameters
  named `block_size_x/y/z`); their product must not exceed the GPU's threads per block.

Without a marker, a kernel launched in the file with a literal 1-D block gets one parameter,
`block_size_x`, over the warp multiples up to the GPU's limit (the edit changes the launch, its
grid division and `__launch_bounds__` through `perflsp.analysis.fixes.set_block_size`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from perflsp.hardware.models import Gpu
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite
from perflsp.kernels.program import ProgramModel
from perflsp.tuning.space import SpaceError, TuningSpace, Value, with_gpu_restrictions

MARKER = re.compile(r"perflsp:(tune|restrict|shared-memory|block)\b[ \t]*(.*?)[ \t]*(?:\*/)?[ \t]*$", re.MULTILINE)
AUTO_BLOCK = "block_size_x"
LINES_ABOVE = 12


class ProblemError(ValueError):
    """The kernel has nothing to tune, or its marker cannot be read (the message says why)."""


@dataclass
class Knob:
    name: str
    kind: str  # "define" | "const" | "launch"
    current: Value | None


def _marker_text(data: bytes, kernel: CudaFunction, kernels: FileKernels) -> list[tuple[str, str]]:
    # the lines above the kernel, but not past the end of the definition before it
    floor = max((f.span.end_byte for f in [*kernels.kernels, *kernels.device_functions]
                 if f.span.end_byte <= kernel.span.start_byte), default=0)
    start = data[floor: kernel.span.start_byte].decode("utf-8", "replace")
    above = "\n".join(start.splitlines()[-LINES_ABOVE:])
    body = data[kernel.span.start_byte: kernel.span.end_byte].decode("utf-8", "replace")
    out = []
    for chunk in (above, body):
        for match in MARKER.finditer(chunk):
            out.append((match.group(1), match.group(2).strip()))
    return out


def parse_values(name: str, text: str) -> list[Value]:
    text = text.strip()
    if not text:
        raise ProblemError(f"perflsp:tune {name}=: no values")
    if re.fullmatch(r"-?\d+\s*\.\.\s*-?\d+", text):
        low, high = (int(x) for x in text.split(".."))
        if high < low or high - low > 4096:
            raise ProblemError(f"perflsp:tune {name}={text}: a range low..high of at most 4096 values")
        return list(range(low, high + 1))
    values: list[Value] = []
    for item in text.split(","):
        item = item.strip()
        if re.fullmatch(r"-?\d+", item):
            values.append(int(item))
        elif re.fullmatch(r"-?\d+\.\d*", item):
            values.append(float(item))
        else:
            raise ProblemError(f"perflsp:tune {name}: {item!r} is not a number")
    if len(set(values)) != len(values):
        raise ProblemError(f"perflsp:tune {name}: a value is listed twice")
    return values


@dataclass(frozen=True, slots=True)
class KnobDefinition:
    """Where and how the file defines a compile-time knob."""

    kind: str  # "define" | "const"
    value: int  # what the model folds it to
    start_byte: int  # the integer literal a tuned edit rewrites
    end_byte: int


def knob_definition(model: ProgramModel, name: str) -> KnobDefinition | None:
    """`name` as a knob: a macro the file itself `#define`s (also behind `#ifndef name`, Kernel
    Tuner's convention) or one of its file-scope `const`/`constexpr` values, written as an
    integer literal, with the value the model folds it to; None otherwise (a header's macro is
    not this file's to edit)."""
    written = _written_integer(model.tree.root_node, model.data, name)
    if written is None:
        return None
    value = model.evaluate(name)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return KnobDefinition(written[0], value, written[1], written[2])


def current_value(model: ProgramModel, name: str) -> tuple[str, Value] | None:
    """How the file defines `name` now: ("define" | "const", value), or None (`knob_definition`)."""
    found = knob_definition(model, name)
    return (found.kind, found.value) if found is not None else None


_MACRO_INTEGER = re.compile(rb"\s*\(?\s*(-?\d+)\s*\)?\s*(?://.*|/\*.*)?", re.DOTALL)
_CONST_INTEGER = re.compile(rb"-?\s*\d+")
_SCOPES = ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "linkage_specification",
           "namespace_definition", "declaration_list")


def _written_integer(root: Node, data: bytes, name: str) -> tuple[str, int, int] | None:
    """(kind, span of the literal) of the first file-scope definition of `name` as an integer."""
    def text(node: Node) -> bytes:
        return data[node.start_byte:node.end_byte]

    stack = list(reversed(root.named_children))
    while stack:
        node = stack.pop()
        if node.type in _SCOPES:
            stack.extend(reversed(node.named_children))
        elif node.type == "preproc_def":
            macro, value = node.child_by_field_name("name"), node.child_by_field_name("value")
            if macro is not None and value is not None and text(macro) == name.encode():
                m = _MACRO_INTEGER.fullmatch(text(value))
                return ("define", value.start_byte + m.start(1), value.start_byte + m.end(1)) if m else None
        elif node.type == "declaration" and any(c.type == "type_qualifier" and text(c) in (b"const", b"constexpr")
                                                for c in node.children):
            for declarator in node.children_by_field_name("declarator"):
                target, value = declarator.child_by_field_name("declarator"), declarator.child_by_field_name("value")
                if declarator.type == "init_declarator" and target is not None and value is not None \
                        and text(target) == name.encode():
                    return ("const", value.start_byte, value.end_byte) if _CONST_INTEGER.fullmatch(text(value)) else None
    return None


def auto_launch(kernels: FileKernels, kernel: CudaFunction) -> tuple[LaunchSite, int] | None:
    """The first launch of `kernel` with a literal 1-D block, and its threads per block."""
    for site in kernels.launches_of(kernel):
        value = site.block.value
        if isinstance(value, int):
            return site, value
        if isinstance(value, tuple) and value[1:] == (1, 1):
            return site, value[0]
    return None


def problem_for(model: ProgramModel, kernel: CudaFunction, gpu: Gpu | None) -> TuningSpace:
    """The tuning space of `kernel`, one of `model`'s (with `gpu`'s limits as restrictions when a
    GPU is given)."""
    data, kernels = model.data, model.kernels
    params: dict[str, list[Value]] = {}
    restrictions: list[str] = []
    shared: str | None = None
    block: tuple[str, ...] | None = None
    current: dict[str, Value] = {}
    notes: list[str] = []
    for kind, rest in _marker_text(data, kernel, kernels):
        if kind == "tune":
            for item in rest.split():
                name, sep, values = item.partition("=")
                if not sep or not name.isidentifier():
                    raise ProblemError(f"perflsp:tune: {item!r} is not NAME=values")
                if name in params:
                    raise ProblemError(f"perflsp:tune: `{name}` is named twice")
                params[name] = parse_values(name, values)
        elif kind == "restrict":
            if rest:
                restrictions.append(rest)
        elif kind == "shared-memory":
            shared = rest or None
        elif kind == "block":
            block = tuple(rest.replace(",", " ").split())
    for name in params:
        found = current_value(model, name)
        if found is None:
            raise ProblemError(f"perflsp:tune: `{name}` is neither a `#define {name} <integer>` nor a const integer "
                               "of this file: perflsp could not apply a tuned value")
        current[name] = found[1]
    if not params:
        auto = auto_launch(kernels, kernel)
        if auto is None:
            raise ProblemError(f"`{kernel.name}` has nothing to tune: no `perflsp:tune` marker and no launch with a "
                               "literal 1-D block in this file")
        limit = gpu.limits.max_threads_per_block if gpu is not None else 1024
        warp = gpu.warp_size if gpu is not None else 32
        params[AUTO_BLOCK] = list(range(warp, limit + 1, warp))
        site, current[AUTO_BLOCK] = auto
        block = (AUTO_BLOCK,)
        notes.append(f"block size of the launch at line {site.line + 1}")
    if block is None:
        block = tuple(n for n in ("block_size_x", "block_size_y", "block_size_z") if n in params)
    unknown = [b for b in block if b not in params]
    if unknown:
        raise ProblemError(f"perflsp:block names {', '.join(unknown)}, not tuning parameters")
    try:
        space = TuningSpace(kernel.name, params, restrictions, block, shared,
                            current if all(current.get(n) in params[n] for n in params) else None, notes=notes,
                            code_values=dict(current))
        if gpu is not None:
            space = with_gpu_restrictions(space, gpu.limits.max_threads_per_block, _shared_limit(gpu), gpu.name)
    except SpaceError as exc:
        raise ProblemError(str(exc)) from None
    if space.current is None and current:
        space.notes.append("the code's current values ("
                           + ", ".join(f"{k}={v}" for k, v in current.items()) + ") are not all in the value lists")
    return space


def _shared_limit(gpu: Gpu) -> int | None:
    limits = gpu.limits
    for attr in ("default_shared_memory_per_block_bytes", "max_shared_memory_per_block_bytes"):
        value = getattr(limits, attr, None)
        if isinstance(value, int):
            return value
    return None


def code_values(space: TuningSpace) -> dict[str, Value]:
    """The values the code has now (also those outside the value lists)."""
    return dict(space.code_values or space.current or {})


__all__ = ["AUTO_BLOCK", "Knob", "KnobDefinition", "ProblemError", "code_values", "current_value", "knob_definition",
           "parse_values", "problem_for"]

"""Map a profiled kernel name back to the kernel in the source it came from.

CUDA: ncu prints the demangled signature (`void ns::k<float, 4>(float *, int)`), sometimes the
mangled name; we keep the candidates with the same simple name, then narrow by namespace,
parameter count and template arguments (an explicit specialisation beats the primary template).
OpenMP offload: clang names each target region
`__omp_offloading_<device id>_<file id>_<mangled parent function>_l<line>`; the line is that of
the `#pragma omp target`, and the ids are the file's device and inode numbers, which also tell
apart two files with a region on the same line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from perflsp.kernels.models import CudaFunction, FileKernels, OmpRegion
from perflsp.source.demangling import demangle_many

_OMP_ENTRY = re.compile(r"^__omp_offloading_([0-9a-fA-F]+)_([0-9a-fA-F]+)_(.+)_l(\d+)(?:_(\d+))?$")
# Brackets are not counted: ncu prints lambdas as `[lambda(...) (instance 1)]`, not always balanced.
_OPEN = {"(": ")", "<": ">"}
_CLOSE = {v: k for k, v in _OPEN.items()}


@dataclass(frozen=True, slots=True)
class ParsedName:
    """A demangled function name taken apart."""

    qualified: str  # namespaces and classes, no template arguments on the last part: "ns::k"
    simple: str  # "k"
    template_args: tuple[str, ...] | None  # ("float", "4"); None when not a template instance
    params: tuple[str, ...] | None  # parameter types; None when the name carried no parameter list

    @property
    def display(self) -> str:
        """`ns::k<float, 4>` — the name with template arguments, without parameters."""
        if self.template_args is None:
            return self.qualified
        return f"{self.qualified}<{', '.join(self.template_args)}>"


@dataclass(frozen=True, slots=True)
class OmpEntry:
    device_id: int
    file_id: int
    parent: str  # mangled (or plain C) name of the enclosing host function
    line: int  # 1-based line of the target directive
    count: int | None = None  # newer clang: n-th region on that line


def _split_top(text: str, separator: str) -> list[str]:
    """Split at `separator` outside () and <>."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE and depth > 0:
            depth -= 1
        elif depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            i += len(separator)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _matching_open(text: str, close_index: int) -> int | None:
    closer = text[close_index]
    opener = _CLOSE[closer]
    depth = 0
    for i in range(close_index, -1, -1):
        if text[i] == closer:
            depth += 1
        elif text[i] == opener:
            depth -= 1
            if depth == 0:
                return i
    return None


def _strip_templates(component: str) -> str:
    if component.endswith(">"):
        start = _matching_open(component, len(component) - 1)
        if start is not None and start > 0:
            return component[:start].strip()
    return component.strip()


def parse_name(text: str) -> ParsedName:
    """Take apart `void ns::k<float, 4>(float *, int)`, `k(int)` or a bare `ns::k`."""
    s = text.strip()
    params: tuple[str, ...] | None = None
    if s.endswith(")"):
        start = _matching_open(s, len(s) - 1)
        if start is not None and start > 0:
            inner = s[start + 1 : -1].strip()
            params = () if inner in ("", "void") else tuple(p.strip() for p in _split_top(inner, ","))
            s = s[:start].rstrip()
    # A return type precedes template instances: keep the last top-level word.
    words = [w for w in _split_top(s, " ") if w]
    name = words[-1] if words else s
    # `k<float, 4>` -> template args
    template_args: tuple[str, ...] | None = None
    if name.endswith(">"):
        start = _matching_open(name, len(name) - 1)
        if start is not None and start > 0:
            inner = name[start + 1 : -1]
            template_args = tuple(a.strip() for a in _split_top(inner, ",")) if inner.strip() else ()
            name = name[:start]
    components = [_strip_templates(c) for c in _split_top(name, "::")]
    qualified = "::".join(components)
    return ParsedName(qualified=qualified, simple=components[-1], template_args=template_args, params=params)


def parse_omp_entry(name: str) -> OmpEntry | None:
    match = _OMP_ENTRY.match(name.strip())
    if not match:
        return None
    device, file_id, parent, line, count = match.groups()
    return OmpEntry(int(device, 16), int(file_id, 16), parent, int(line), int(count) if count else None)


@dataclass(frozen=True, slots=True)
class KernelRef:
    """What a profiled kernel was mapped to (stored with the profile)."""

    kind: Literal["cuda", "omp"]
    file: str | None
    line: int
    name: str  # CUDA: qualified name; OpenMP: `function@l<line>`
    body_hash: str

    def to_json(self) -> dict:
        return {"kind": self.kind, "file": self.file, "line": self.line, "name": self.name, "body_hash": self.body_hash}

    @classmethod
    def from_json(cls, data: dict) -> KernelRef:
        return cls(data["kind"], data.get("file"), int(data["line"]), data["name"], data["body_hash"])


MatchStatus = Literal["exact", "ambiguous", "not_found"]


@dataclass(frozen=True, slots=True)
class KernelMatch:
    reported_name: str
    parsed: ParsedName | None  # CUDA names and OpenMP parents, demangled and taken apart
    omp: OmpEntry | None
    status: MatchStatus
    ref: KernelRef | None
    kernel: CudaFunction | OmpRegion | None
    candidates: int
    reason: str

    @property
    def display_name(self) -> str:
        if self.omp is not None:
            parent = self.parsed.display if self.parsed else self.omp.parent
            return f"{parent}@l{self.omp.line}"
        return self.parsed.display if self.parsed else self.reported_name


def _narrow(candidates: list, keep) -> list:
    """Apply a filter only when it leaves something: a weaker clue never empties the list."""
    kept = [c for c in candidates if keep(c)]
    return kept or candidates


def _norm_args(args: Iterable[str]) -> tuple[str, ...]:
    return tuple(re.sub(r"\s+", "", a) for a in args)


def _names_match(qualified: str, wanted: str) -> bool:
    """`a::ns::k` matches `ns::k` and `k` on `::` boundaries."""
    return qualified == wanted or qualified.endswith("::" + wanted) or wanted.endswith("::" + qualified)


def _cuda_match(reported: str, parsed: ParsedName, files: Sequence[FileKernels]) -> KernelMatch:
    pairs = [(f, k) for f in files for k in f.kernels if k.name == parsed.simple]
    if not pairs:
        reason = f"no __global__ {parsed.simple} in the sources" if files else "no source files were given"
        return KernelMatch(reported, parsed, None, "not_found", None, None, 0, reason)
    total = len(pairs)
    wanted = parsed.qualified.replace("(anonymous namespace)::", "")
    pairs = _narrow(pairs, lambda p: _names_match(p[1].qualified_name, wanted))
    if parsed.params is not None:
        pairs = _narrow(pairs, lambda p: len(p[1].params) == len(parsed.params))
    if parsed.template_args:
        args = _norm_args(parsed.template_args)
        specialised = [
            p for p in pairs if p[1].specialization_args is not None and _norm_args(p[1].specialization_args) == args
        ]
        primary = [p for p in pairs if p[1].template_params and p[1].specialization_args is None]
        pairs = specialised or primary or pairs
    elif parsed.template_args is None:
        pairs = _narrow(pairs, lambda p: not p[1].template_params)
    return _result(reported, parsed, None, pairs, total, "cuda")


def _omp_match(reported: str, entry: OmpEntry, parsed: ParsedName | None, files: Sequence[FileKernels]) -> KernelMatch:
    pairs = [(f, r) for f in files for r in f.omp_regions if r.line == entry.line]
    if not pairs:
        reason = f"no OpenMP target region on line {entry.line}" if files else "no source files were given"
        return KernelMatch(reported, parsed, entry, "not_found", None, None, 0, reason)
    total = len(pairs)
    if parsed is not None:
        pairs = _narrow(
            pairs,
            lambda p: p[1].function is not None and _names_match(parse_name(p[1].function).qualified, parsed.qualified),
        )
    if len(pairs) > 1:
        pairs = _narrow(pairs, lambda p: _same_file_id(p[0].path, entry))
    return _result(reported, parsed, entry, pairs, total, "omp")


def _same_file_id(path: str | None, entry: OmpEntry) -> bool:
    if not path:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_ino == entry.file_id and st.st_dev == entry.device_id


def _result(reported, parsed, entry, pairs, total, kind) -> KernelMatch:
    pairs = sorted(pairs, key=lambda p: (p[0].path or "", p[1].line))
    file, kernel = pairs[0]
    name = kernel.qualified_name if kind == "cuda" else kernel.name
    ref = KernelRef(kind, file.path, kernel.line, name, kernel.body_hash)
    if len(pairs) == 1:
        return KernelMatch(
            reported, parsed, entry, "exact", ref, kernel, total, f"matched {name} at line {kernel.line}"
        )
    where = ", ".join(f"{f.path or '<buffer>'}:{k.line}" for f, k in pairs[:5])
    return KernelMatch(
        reported, parsed, entry, "ambiguous", ref, kernel, total, f"{len(pairs)} candidates ({where}); took the first"
    )


def map_kernels(
    reported_names: Iterable[str], files: Sequence[FileKernels], *, use_cxxfilt: bool = True
) -> dict[str, KernelMatch]:
    """Map each reported kernel name; mangled names are demangled in one batch."""
    names = list(dict.fromkeys(reported_names))
    omp_entries = {n: parse_omp_entry(n) for n in names}
    to_demangle = [e.parent if e else n for n, e in omp_entries.items()]
    demangled = demangle_many(to_demangle, use_cxxfilt=use_cxxfilt)
    result = {}
    for name in names:
        entry = omp_entries[name]
        if entry is not None:
            parent_text = demangled.get(entry.parent, entry.parent)
            parsed = parse_name(parent_text) if parent_text else None
            result[name] = _omp_match(name, entry, parsed, files)
        else:
            result[name] = _cuda_match(name, parse_name(demangled.get(name, name)), files)
    return result


def map_kernel(reported_name: str, files: Sequence[FileKernels], *, use_cxxfilt: bool = True) -> KernelMatch:
    return map_kernels([reported_name], files, use_cxxfilt=use_cxxfilt)[reported_name]

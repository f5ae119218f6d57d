"""JSON shapes of extraction results, shared by `perflsp kernels --json` and `check --json`."""

from __future__ import annotations

from typing import Any

from perflsp.kernels.models import ConstValue, CudaFunction, LaunchSite, OmpRegion


def const_json(value: ConstValue | None) -> dict[str, Any] | None:
    if value is None:
        return None
    out: dict[str, Any] = {"expression": value.text, "value": list(value.value) if isinstance(value.value, tuple) else value.value}
    if value.value is None:
        out["unknown"] = value.reason or "not a compile-time constant"
    if value.span is not None:
        out["range"] = value.span.to_json()
    return out


def launch_json(site: LaunchSite, file: str | None) -> dict[str, Any]:
    return {
        "entry": "launch",
        "kind": "cuda",
        "file": file,
        "line": site.line,
        "name": site.name,
        "callee": site.callee,
        "kernel": site.kernel,
        "template_args": list(site.template_args),
        "function": site.function,
        "grid": const_json(site.grid),
        "block": const_json(site.block),
        "shared_mem_bytes": const_json(site.shared_mem_bytes),
        "stream": const_json(site.stream),
        "args": [const_json(a) for a in site.args],
        "range": site.span.to_json(),
        "config_range": site.config_span.to_json(),
    }


def function_json(fn: CudaFunction, file: str | None, launches: list[LaunchSite]) -> dict[str, Any]:
    return {
        "entry": "kernel" if fn.is_kernel else "device_function",
        "kind": "cuda",
        "file": file,
        "line": fn.line,
        "name": fn.name,
        "qualified_name": fn.qualified_name,
        "space": fn.space,
        "template_params": [
            {"kind": t.kind, "name": t.name, "type": t.type, "default": t.default} for t in fn.template_params
        ],
        "specialization_args": list(fn.specialization_args) if fn.specialization_args is not None else None,
        "params": [
            {
                "name": p.name, "type": p.type, "element_type": p.element_type, "pointer_depth": p.pointer_depth,
                "const": p.is_const, "restrict": p.is_restrict, "reference": p.is_reference,
            }
            for p in fn.params
        ],
        "launch_bounds": None if fn.launch_bounds is None else {
            "max_threads": const_json(fn.launch_bounds.max_threads),
            "min_blocks": const_json(fn.launch_bounds.min_blocks),
        },
        "hash": fn.body_hash,
        "recovered": fn.recovered,
        "range": fn.span.to_json(),
        "name_range": fn.name_span.to_json(),
        "body_range": fn.body_span.to_json(),
        "launch_sites": [launch_json(s, file) for s in launches],
    }


def region_json(region: OmpRegion, file: str | None) -> dict[str, Any]:
    return {
        "entry": "kernel",
        "kind": "omp",
        "file": file,
        "line": region.line,
        "name": region.name,
        "directive": region.directive,
        "function": region.function,
        "clauses": [
            {
                "name": c.name,
                "text": c.text,
                "modifier": c.modifier,
                "items": [{"variable": i.variable, "sections": [list(s) for s in i.sections]} for i in c.items],
                "value": const_json(c.value),
            }
            for c in region.clauses
        ],
        "loops": [
            {"variable": lp.variable, "lower": lp.lower, "upper": lp.upper, "condition": lp.condition_op, "step": lp.step,
             "range": lp.span.to_json()}
            for lp in region.loops
        ],
        "hash": region.body_hash,
        "recovered": region.recovered,
        "range": region.span.to_json(),
        "name_range": region.span.to_json(),
        "body_range": region.body_span.to_json() if region.body_span else None,
    }

"""The functions an OpenMP target region can call.

A region calls ordinary C/C++ functions: those of a `#pragma omp declare target` block, or any
function the compiler makes a device function because a region calls it (OpenMP 5.0 implicit
declare target). None of them says `__device__`, so the `__device__` index of the program model
(`AnalysisUnit.callees`) does not hold them. `TargetCallees` adds every function defined in the
file and in the local headers it includes, then (a `declare target` function of another
translation unit, joined at link time) in the other sources of the file's folder, looked up by
simple name, macro-expanded, after the `__device__` ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from perflsp.analysis.unit import Callees
from perflsp.analysis.walk_values import Callee
from perflsp.kernels.program import ProgramModel


class TargetCallees(Callees):
    """`device` (the `__device__` functions) first, then the plain functions the program model
    finds (`ProgramModel.plain_function`). Built on first lookup of each name."""

    def __init__(self, device: Mapping[str, Callee], model: ProgramModel):
        super().__init__(model)
        self._device = device

    def _find(self, name: str) -> Callee | None:
        found = self._device.get(name)
        if found is None:
            parsed = self._model.plain_function(name)
            found = Callee(parsed.node, parsed.data, parsed.path, parsed.line_base) if parsed is not None else None
        return found

    def __iter__(self) -> Iterator[str]:
        names = dict.fromkeys(self._device)
        names.update(dict.fromkeys(self._model.plain_function_names()))
        return iter(names)

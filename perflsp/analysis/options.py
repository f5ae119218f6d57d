"""What the engine is told from outside the file: the program's arguments, a known launch
shape, registers from ptxas, the preprocessor's view of the local headers, launch sites in other
files, the cost model."""

from __future__ import annotations

from dataclasses import dataclass, field

from perflsp.analysis.costs import CostModel
from perflsp.compiled.model import CompiledSource
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.models import LaunchSite

Dim3 = tuple[int, int, int]


@dataclass(frozen=True)
class AnalysisOptions:
    argv: tuple[str, ...] | None = None  # the program's arguments (argv[1:]) when known
    launch_override: tuple[Dim3, Dim3] | None = None  # (grid, block) known from outside
    registers: tuple[tuple[str, int], ...] = ()  # kernel qualified name -> registers per thread (ptxas)
    include_env: ConstEnv | None = field(default=None, compare=False, hash=False)  # macros of local headers
    external_launches: tuple[LaunchSite, ...] = field(default=(), compare=False, hash=False)
    cost: CostModel = field(default_factory=CostModel)
    # the template arguments of the instantiation judged, in the template's order, when named from
    # outside (an evaluation row's signature: `k<double, 256>`); else those of the launch or call
    instantiation: tuple[str, ...] | None = None
    # the file's device code compiled per architecture (None: not compiled, the source engine answers)
    compiled: CompiledSource | None = field(default=None, compare=False, hash=False)

    def registers_for(self, name: str) -> int | None:
        return dict(self.registers).get(name)


DEFAULT_OPTIONS = AnalysisOptions()

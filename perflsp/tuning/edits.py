"""A tuned configuration as one validated edit: each knob's `#define` or const value rewritten
where the file's program model finds it (`problem.knob_definition`), the automatic block-size
parameter through `perflsp.analysis.fixes.set_block_size`; the whole edit re-parses cleanly
(`validated_fix`) or is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping

from perflsp.analysis.fixes import EditError, set_block_size, validated_fix
from perflsp.analysis.models import ByteEdit, Fix
from perflsp.kernels.models import CudaFunction
from perflsp.kernels.program import ProgramModel
from perflsp.tuning.problem import AUTO_BLOCK, auto_launch, knob_definition
from perflsp.tuning.space import TuningSpace, Value


def tuned_fix(model: ProgramModel, kernel: CudaFunction, space: TuningSpace, config: Mapping[str, Value],
              title: str) -> Fix:
    """The edit that gives the code of `model` `config`; raises EditError when it cannot be done
    safely."""
    data, tree, kernels = model.data, model.tree, model.kernels
    problem = space.problem(config)
    if problem is not None:
        raise EditError(f"the configuration is not a point of the space: {problem}")
    current = space.code_values or space.current or {}
    edits: list[ByteEdit] = []
    for name, value in config.items():
        if current.get(name) == value:
            continue
        if name == AUTO_BLOCK and space.block_params == (AUTO_BLOCK,):
            auto = auto_launch(kernels, kernel)
            if auto is None:
                raise EditError(f"no launch of `{kernel.name}` with a 1-D block to change")
            site = auto[0]
            edits.extend(set_block_size(model, site, int(value), allow_any_size=True).edits)
            continue
        knob = knob_definition(model, name)
        if knob is None:
            raise EditError(f"`{name}` is no longer defined as an integer in this file")
        edits.append(ByteEdit(knob.start_byte, knob.end_byte, str(value)))
    if not edits:
        raise EditError("the code already has this configuration")
    return validated_fix(data, tree, title, edits, kind="refactor", preferred=True)


__all__ = ["tuned_fix"]

"""Parameter sweeps over a base scenario: expansion, resumable execution on local or Ray workers, one results table.

The names below are loaded from their modules on first use (PEP 562), so that importing one
light module of the package (``openg2g.sweep.engines`` for the command line's choices) does not
import pandas and pyarrow with the runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openg2g.core.lazy import lazy_exports

if TYPE_CHECKING:
    from openg2g.sweep.engines import (
        ENGINES,
        Engine,
        LocalEngine,
        RayEngine,
        SerialEngine,
        check_ray_address,
        make_engine,
    )
    from openg2g.sweep.expand import encode_value, expand_block, expand_parameters, point_overrides, run_ids
    from openg2g.sweep.runner import SweepResult, execute_tasks, plan_sweep, results_table, run_sweep
    from openg2g.sweep.spec import (
        Distribution,
        LoadedSweep,
        ParameterBlock,
        RandomBlock,
        SweepError,
        SweepSpec,
        load_sweep,
    )
    from openg2g.sweep.tasks import RunTask, execute_task, run_scenario_files

_MODULES = {
    "engines": ("ENGINES", "Engine", "LocalEngine", "RayEngine", "SerialEngine", "check_ray_address", "make_engine"),
    "expand": ("encode_value", "expand_block", "expand_parameters", "point_overrides", "run_ids"),
    "runner": ("SweepResult", "execute_tasks", "plan_sweep", "results_table", "run_sweep"),
    "spec": ("Distribution", "LoadedSweep", "ParameterBlock", "RandomBlock", "SweepError", "SweepSpec", "load_sweep"),
    "tasks": ("RunTask", "execute_task", "run_scenario_files"),
}
__getattr__, __dir__ = lazy_exports(__name__, _MODULES)

__all__ = [
    "ENGINES",
    "Distribution",
    "Engine",
    "LoadedSweep",
    "LocalEngine",
    "ParameterBlock",
    "RandomBlock",
    "RayEngine",
    "RunTask",
    "SerialEngine",
    "SweepError",
    "SweepResult",
    "SweepSpec",
    "check_ray_address",
    "encode_value",
    "execute_task",
    "execute_tasks",
    "expand_block",
    "expand_parameters",
    "load_sweep",
    "make_engine",
    "plan_sweep",
    "point_overrides",
    "results_table",
    "run_ids",
    "run_scenario_files",
    "run_sweep",
]

"""Run a scenario file: load it, write the scenario as run beside its outputs, simulate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openg2g.engine.simulation import Simulation
from openg2g.scenario.loaded import LoadedScenario, write_resolved_scenario
from openg2g.scenario.loader import load_scenario

__all__ = ["RunResult", "run_scenario"]


@dataclass
class RunResult:
    """What :func:`run_scenario` returns: the summary (as in ``summary.json``) and the output folder."""

    summary: dict[str, Any]
    out_dir: Path | None


def run_scenario(
    scenario: str | Path | LoadedScenario,
    out_dir: Path | str | None = None,
    overrides: Sequence[str] = (),
    progress: bool = False,
    on_start: Callable[[Simulation], None] | None = None,
) -> RunResult:
    """Load (if needed), validate and run a scenario.

    :param scenario: a path, a bundled scenario's name, or an already loaded scenario.
    :param out_dir: output directory, ``None`` for no files; it keeps the scenario as run
        (``scenario.yaml``, written first), which ``openg2g plot`` reads to redraw the run.
    :param overrides: ``dotted.key=value`` assignments (as ``openg2g run --set``).
    :param progress: progress bar on stderr.
    :param on_start: called with the simulation before it runs (tests use it to interrupt).
    """
    loaded = scenario if isinstance(scenario, LoadedScenario) else load_scenario(scenario, overrides)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        write_resolved_scenario(loaded, out)
    sim = Simulation.from_scenario(loaded, out, progress=progress)
    if on_start is not None:
        on_start(sim)
    return RunResult(summary=sim.run(), out_dir=out)

"""A validated scenario and where it came from, and the simulation it describes.

:class:`LoadedScenario` is what :func:`openg2g.scenario.loader.load_scenario` returns; its
:meth:`~LoadedScenario.simulation_parts` are what
:meth:`openg2g.engine.simulation.Simulation.from_scenario` builds a run from: the components, the
periods and limits, the events and disturbances as commands, the bulk system's frequency, and the
recorders of the run's metrics, tables and plots. The scenario as it runs is written beside the
run's outputs (:func:`write_resolved_scenario`), re-runnable anywhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from openg2g import __version__
from openg2g.core.atomic import write_text_atomic
from openg2g.core.errors import OutputError, SimulationError
from openg2g.core.interfaces import Controller
from openg2g.engine.recording import Recorder
from openg2g.engine.simulation import Components, Scheduled
from openg2g.grid.frequency import SystemFrequency
from openg2g.record.metrics import MetricsRecorder
from openg2g.record.plots import PlotRecorder
from openg2g.record.progress import ProgressBar
from openg2g.record.tables import TableRecorder
from openg2g.scenario.build import build_components
from openg2g.scenario.disturbances import plan as plan_disturbances
from openg2g.scenario.events import build_event_command
from openg2g.scenario.schema import Scenario

__all__ = [
    "RESOLVED_SCENARIO",
    "LoadedScenario",
    "PathField",
    "path_fields",
    "resolved_scenario_text",
    "write_resolved_scenario",
]


@dataclass(frozen=True)
class LoadedScenario:
    """A validated scenario and where it came from.

    :param scenario: the validated model.
    :param path: the file it was read from.
    :param base_dir: directory that relative paths in the file are resolved against.
    :param sha256: hash of the validated scenario (after overrides), recorded in outputs.
    """

    scenario: Scenario
    path: Path
    base_dir: Path
    sha256: str

    def simulation_parts(
        self, out_dir: Path | str | None = None, progress: bool = False, components: Components | None = None
    ) -> dict[str, Any]:
        """The keyword arguments of :class:`~openg2g.engine.simulation.Simulation` for this
        scenario (:meth:`Simulation.from_scenario <openg2g.engine.simulation.Simulation.from_scenario>`).

        :param out_dir: where the tables and plots go; ``None``: only the metrics are recorded.
        :param progress: add a progress bar.
        :param components: prebuilt ``(sites, grid, controllers)``; default builds them. Controllers
            beyond the scenario's ``controllers`` list run every ``periods.control_s`` with no delay.
        """
        sc = self.scenario
        sites, grid, controllers = components or build_components(self)
        if len(controllers) < len(sc.controllers):
            raise SimulationError(
                f"the scenario lists {len(sc.controllers)} controllers but {len(controllers)} were given"
            )
        scheduled: list[Controller | Scheduled] = [
            Scheduled(c, spec.period_s, spec.delay_s, spec.voltage_noise_pu)
            for c, spec in zip(controllers, sc.controllers)
        ]
        scheduled += controllers[len(sc.controllers) :]
        disturbances = (
            plan_disturbances(sc.disturbances, sc.periods.grid_s, sc.duration_s)
            if sc.disturbances is not None
            else None
        )
        frequency = None
        if sc.grid.frequency is not None:
            first = min((float(r.start_s) for r in disturbances.records), default=None) if disturbances else None
            frequency = SystemFrequency(sc.grid.frequency, event_t_s=first)
        return {
            "sites": sites,
            "grid": grid,
            "controllers": scheduled,
            "duration_s": sc.duration_s,
            "periods": sc.periods,
            "v_min_pu": sc.grid.v_min_pu,
            "v_max_pu": sc.grid.v_max_pu,
            "events": [(e.t_s, build_event_command(e.command, e.fields())) for e in sc.events],
            "disturbances": disturbances,
            "frequency": frequency,
            "recorders": self.recorders(out_dir, progress),
            "seed": sc.seed,
            "name": sc.name,
            "load_aggregation": sc.grid.load_aggregation,
            "batch": sc.grid.batch,
            "flush_every_s": sc.outputs.flush_every_s,
            "about": {
                "scenario_sha256": self.sha256,
                "scenario_file": str(self.path),
                "openg2g_version": __version__,
            },
        }

    def recorders(self, out_dir: Path | str | None = None, progress: bool = False) -> list[Recorder]:
        """The recorders the scenario's ``outputs`` ask for: the metrics (always), and in ``out_dir``
        the tables with the app's overview, then the plots (``outputs.plots``); a progress bar last."""
        outputs = self.scenario.outputs
        recorders: list[Recorder] = [
            MetricsRecorder(float(outputs.metrics_start_s), tuple(self.scenario.grid.branch_ratings))
        ]
        if out_dir is not None:
            recorders.append(TableRecorder(out_dir, outputs.voltages == "all", outputs.branches == "all"))
            if outputs.plots:
                # the feeder map reads the grid from the scenario as run, written to the folder or not
                recorders.append(PlotRecorder(out_dir, yaml.safe_load(resolved_scenario_text(self))))
        if progress:
            recorders.append(ProgressBar())
        return recorders


RESOLVED_SCENARIO = "scenario.yaml"
"""File name of the resolved scenario in a run's output folder."""


@dataclasses.dataclass(frozen=True)
class PathField:
    """A field of scenario data naming a file or folder relative to the scenario's folder.

    :param holder: the mapping that holds the field (changed in place by :meth:`replace`).
    :param key: the field's key in ``holder``.
    :param suffix: what follows the path in the value (``":ClassName"`` of a controller file), else ``""``.
    """

    holder: dict[str, Any]
    key: str
    suffix: str = ""

    @property
    def path(self) -> str:
        """The path as written."""
        value = str(self.holder[self.key])
        return value[: len(value) - len(self.suffix)]

    def replace(self, path: str) -> None:
        """Make the field name ``path`` instead."""
        self.holder[self.key] = path + self.suffix


def path_fields(data: dict[str, Any]) -> list[PathField]:
    """The fields of scenario data (as read from the file, or a dumped :class:`Scenario`) that name
    files the scenario reads: a feeder file, a pandapower net file, PV and load profiles, trace
    libraries (folders) and controller files; names of bundled things (feeders, nets, the bundled
    trace library, stock controllers, policies) are not paths."""
    from openg2g.grid.feeder.library import list_feeders
    from openg2g.grid.nets.source import looks_like_net_file

    fields: list[PathField] = []
    grid = data.get("grid")
    if isinstance(grid, dict):
        feeder = grid.get("feeder")
        if isinstance(feeder, str) and feeder not in list_feeders():
            fields.append(PathField(grid, "feeder"))
        net = grid.get("pandapower")
        if isinstance(net, str) and looks_like_net_file(net):
            fields.append(PathField(grid, "pandapower"))
        for group in ("pv", "extra_loads"):
            for item in grid.get(group) or []:
                if isinstance(item, dict) and isinstance(item.get("profile"), str):
                    fields.append(PathField(item, "profile"))
    for site in data.get("datacenters") or []:
        if isinstance(site, dict) and isinstance(site.get("traces"), str) and site["traces"] != "bundled":
            fields.append(PathField(site, "traces"))
    for ctrl in data.get("controllers") or []:
        kind = ctrl.get("kind") if isinstance(ctrl, dict) else None
        if isinstance(kind, str):
            file_part, _, class_name = kind.rpartition(":")
            if file_part.endswith(".py"):
                fields.append(PathField(ctrl, "kind", f":{class_name}"))
    return fields


def resolved_scenario_text(loaded: LoadedScenario) -> str:
    """The scenario as it runs (overrides applied, defaults filled in) as YAML, re-runnable anywhere.

    Paths the scenario resolves against its own folder (:func:`path_fields`) are written absolute;
    a controller's own ``params`` are written as given.
    """
    data = loaded.scenario.model_dump(mode="json")
    for field in path_fields(data):
        field.replace(str((loaded.base_dir / field.path).resolve()))
    header = (
        f"# The scenario as run: {loaded.path} with its overrides applied and defaults filled in\n"
        f"# (validated scenario sha256 {loaded.sha256}); paths made absolute. Rerun: openg2g run <this file>\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def write_resolved_scenario(loaded: LoadedScenario, out_dir: Path) -> Path:
    """Write :func:`resolved_scenario_text` to ``out_dir/scenario.yaml`` (atomically); returns the path.

    :raises OutputError: it cannot be written (a full or read-only disk).
    """
    path = Path(out_dir) / RESOLVED_SCENARIO
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, resolved_scenario_text(loaded))
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc}") from exc
    return path

"""From a validated scenario to its components: the checks that need them, and the building.

The schema (:mod:`openg2g.scenario.schema`) checks a scenario as data; what needs the feeder,
the trace library or the controllers (buses that exist, models and batch sizes that were
measured, controller parameters) is checked here, and only here, by building those parts.
:class:`ComponentBuilder` then turns the scenario into ``(sites, grid, controllers)`` for the
engine, reusing what a run does not change (trace libraries, a compiled feeder, sites) when it
is asked again, as the Gymnasium env does every episode.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

from pydantic import ValidationError

from openg2g.control.registry import build_controller, resolve_controller
from openg2g.core.config import field_path
from openg2g.core.errors import ControllerError, G2GError
from openg2g.core.interfaces import Controller, DatacenterBackend, GridBackend
from openg2g.core.threads import one_blas_thread
from openg2g.datacenter import validate_site
from openg2g.datacenter.library import TraceLibrary
from openg2g.datacenter.replay import ReplayDatacenter
from openg2g.datacenter.ridethrough_site import RideThroughSite
from openg2g.grid.kinds import build_grid, validate_grid
from openg2g.scenario.schema import LoadedScenario, Scenario

__all__ = ["ComponentBuilder", "Components", "build_components", "check_components"]

Components = tuple[list[DatacenterBackend], GridBackend, list[Controller]]
"""``(sites, grid, controllers)`` of one run."""


def check_components(scenario: Scenario, base_dir: Path) -> list[tuple[str, str]]:
    """Every problem that needs the feeder, the trace libraries or the controllers, as
    ``(field path, message)``; empty if the scenario can be built."""
    return _check_controllers(scenario, base_dir) + _check_sites_and_grid(scenario, base_dir)


def _check_controllers(scenario: Scenario, base_dir: Path) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for i, spec in enumerate(scenario.controllers):
        try:
            resolve_controller(spec.kind, base_dir)
        except ControllerError as exc:
            problems.append((f"controllers.{i}.kind", str(exc)))
        else:
            try:
                build_controller(spec, base_dir)
            except ValidationError as exc:
                for err in exc.errors():
                    problems.append((f"controllers.{i}.params.{field_path(err['loc'])}", f"{spec.kind}: {err['msg']}"))
            except ControllerError as exc:
                problems.append((f"controllers.{i}", str(exc)))
        if spec.period_s is not None and spec.period_s % scenario.periods.grid_s:
            problems.append(
                (
                    f"controllers.{i}.period_s",
                    f"{spec.period_s} s is not a whole multiple of periods.grid_s ({scenario.periods.grid_s})",
                )
            )
    return problems


def _check_sites_and_grid(scenario: Scenario, base_dir: Path) -> list[tuple[str, str]]:
    problems = list(validate_grid(scenario.grid, scenario.datacenters, base_dir))
    for i, site in enumerate(scenario.datacenters):
        try:
            library = TraceLibrary.load(None if site.traces == "bundled" else base_dir / site.traces)
        except G2GError as exc:
            problems.append((f"datacenters.{i}.traces", str(exc)))
            continue
        problems.extend(validate_site(site, library, i))
    return problems


def _traces_key(base_dir: Path, traces: str) -> str:
    return "bundled" if traces == "bundled" else str(base_dir / traces)


class ComponentBuilder:
    """Builds the real backends and controllers of a scenario, reusing what does not change.

    Trace libraries are loaded once per folder; the feeder once per (grid spec, site buses);
    a site once per site spec (the ``max_sites`` most recent are kept). The engine resets every
    component at the start of a run, so reuse is safe. Controllers are built anew each time.

    :param max_sites: site objects kept.
    """

    def __init__(self, max_sites: int = 8):
        self._libraries: dict[str, TraceLibrary] = {}
        self._grids: dict[str, GridBackend] = {}
        self._sites: OrderedDict[str, DatacenterBackend] = OrderedDict()
        self._max_sites = max_sites

    def __call__(self, loaded: LoadedScenario) -> Components:
        with one_blas_thread():  # the same bits on any machine (openg2g.core.threads)
            return self._build(loaded)

    def _build(self, loaded: LoadedScenario) -> Components:
        sc = loaded.scenario
        sites = [self._site(loaded, i) for i in range(len(sc.datacenters))]
        grid_key = json.dumps(
            [
                str(loaded.base_dir),
                sc.grid.model_dump(mode="json"),
                [s.model_dump(mode="json", exclude={"training"}) for s in sc.datacenters],
            ],
            sort_keys=True,
        )
        grid = self._grids.get(grid_key)
        if grid is None:
            grid = build_grid(sc.grid, sc.datacenters, loaded.base_dir)
            self._grids = {grid_key: grid}
        controllers = [build_controller(spec, loaded.base_dir) for spec in sc.controllers]
        return sites, grid, controllers

    def _site(self, loaded: LoadedScenario, index: int) -> DatacenterBackend:
        spec = loaded.scenario.datacenters[index]
        key = json.dumps([str(loaded.base_dir), spec.model_dump(mode="json")], sort_keys=True)
        kept = self._sites.get(key)
        if kept is not None:
            self._sites.move_to_end(key)
            return kept
        traces = _traces_key(loaded.base_dir, spec.traces)
        if traces not in self._libraries:
            self._libraries[traces] = TraceLibrary.load(None if traces == "bundled" else Path(traces))
        site: DatacenterBackend = ReplayDatacenter.from_spec(spec, self._libraries[traces])
        if spec.ride_through is not None:
            site = RideThroughSite(site, spec.ride_through)
        self._sites[key] = site
        while len(self._sites) > self._max_sites:
            self._sites.popitem(last=False)
        return site


def build_components(loaded: LoadedScenario) -> Components:
    """Build the datacenter sites, the grid and the controllers a validated scenario describes."""
    return ComponentBuilder()(loaded)

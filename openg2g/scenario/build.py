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
from typing import Protocol

from pydantic import ValidationError

from openg2g.control.registry import build_controller, instantiate, load_plugin, resolve_controller
from openg2g.core.config import field_path
from openg2g.core.errors import ControllerError, G2GError
from openg2g.core.interfaces import DatacenterBackend, GridBackend
from openg2g.core.threads import one_blas_thread
from openg2g.datacenter import validate_site
from openg2g.datacenter.config import PluginSiteSpec
from openg2g.datacenter.library import TraceLibrary
from openg2g.datacenter.live.config import LiveSiteSpec
from openg2g.datacenter.replay import ReplayDatacenter
from openg2g.datacenter.ridethrough_site import RideThroughSite
from openg2g.engine.simulation import Components
from openg2g.grid.kinds import build_grid, validate_grid
from openg2g.scenario.schema import Scenario

__all__ = [
    "DATACENTER_GROUP",
    "ComponentBuilder",
    "Components",
    "ScenarioSource",
    "build_components",
    "build_plugin_site",
    "build_sites",
    "check_components",
]


class ScenarioSource(Protocol):
    """What building reads of a loaded scenario (:class:`openg2g.scenario.loaded.LoadedScenario`)."""

    @property
    def scenario(self) -> Scenario:
        """The validated scenario."""

    @property
    def base_dir(self) -> Path:
        """The folder its relative paths are resolved against."""


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
        if isinstance(site, PluginSiteSpec):
            try:
                build_plugin_site(site, base_dir)
            except ValidationError as exc:
                problems.extend((f"datacenters.{i}.params.{field_path(e['loc'])}", e["msg"]) for e in exc.errors())
            except G2GError as exc:
                problems.append((f"datacenters.{i}.kind", str(exc)))
            continue
        try:
            library = TraceLibrary.load(None if site.traces == "bundled" else base_dir / site.traces)
        except G2GError as exc:
            problems.append((f"datacenters.{i}.traces", str(exc)))
            continue
        problems.extend(validate_site(site, library, i))
    return problems


DATACENTER_GROUP = "openg2g.datacenters"
"""Package entry-point group of datacenter backends a site's ``kind`` can name."""


def build_plugin_site(spec: PluginSiteSpec, base_dir: Path) -> DatacenterBackend:
    """The site of a plug-in spec: the class ``spec.kind`` names (as a controller's ``kind``:
    :func:`openg2g.control.registry.load_plugin`), built as
    ``cls(name=..., bus=..., power_factor=..., **params)``.

    :raises ControllerError: the class cannot be found or imported, is not a
        :class:`~openg2g.core.interfaces.DatacenterBackend`, fails to build, or builds a site of
        another name or bus (the message names the site).
    """
    who = f"datacenter site {spec.name!r}"
    try:
        cls = load_plugin(spec.kind, base_dir, DATACENTER_GROUP, "datacenter backend")
    except ControllerError as exc:
        raise ControllerError(f"{who}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, DatacenterBackend)):
        raise ControllerError(f"{who}: {spec.kind!r} is not a subclass of openg2g.core.interfaces.DatacenterBackend")
    fields = {"name": spec.name, "bus": spec.bus, "power_factor": spec.power_factor}
    site = instantiate(cls, {**fields, **spec.params}, f"{who} (kind {spec.kind!r})")
    bus = site.info().bus
    if site.name != spec.name or bus != spec.bus:
        raise ControllerError(
            f"{who}: the class built a site named {site.name!r} at bus {bus!r}; it must keep the name and bus it is given"
        )
    return site


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

    def __call__(self, loaded: ScenarioSource) -> Components:
        with one_blas_thread():  # the same bits on any machine (openg2g.core.threads)
            return self._build(loaded)

    def _build(self, loaded: ScenarioSource) -> Components:
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

    def _site(self, loaded: ScenarioSource, index: int) -> DatacenterBackend:
        spec = loaded.scenario.datacenters[index]
        key = json.dumps([str(loaded.base_dir), spec.model_dump(mode="json")], sort_keys=True)
        kept = self._sites.get(key)
        if kept is not None:
            self._sites.move_to_end(key)
            return kept
        if isinstance(spec, PluginSiteSpec):
            self._keep(key, build_plugin_site(spec, loaded.base_dir))
            return self._sites[key]
        traces = _traces_key(loaded.base_dir, spec.traces)
        if traces not in self._libraries:
            self._libraries[traces] = TraceLibrary.load(None if traces == "bundled" else Path(traces))
        site: DatacenterBackend
        if isinstance(spec, LiveSiteSpec):
            from openg2g.datacenter.live.site import LiveSite  # its servers are contacted at reset only

            site = LiveSite.from_spec(spec, self._libraries[traces], loaded.base_dir)
            self._keep(key, site)
            return site
        site = ReplayDatacenter.from_spec(spec, self._libraries[traces])
        if spec.ride_through is not None:
            site = RideThroughSite(site, spec.ride_through)
        self._keep(key, site)
        return site

    def _keep(self, key: str, site: DatacenterBackend) -> None:
        self._sites[key] = site
        while len(self._sites) > self._max_sites:
            self._sites.popitem(last=False)


def build_sites(loaded: ScenarioSource) -> list[DatacenterBackend]:
    """Build the datacenter sites of a validated scenario alone (no grid, no controllers), as
    :func:`build_components` builds them."""
    builder = ComponentBuilder()
    with one_blas_thread():
        return [builder._site(loaded, i) for i in range(len(loaded.scenario.datacenters))]


def build_components(loaded: ScenarioSource) -> Components:
    """Build the datacenter sites, the grid and the controllers a validated scenario describes."""
    return ComponentBuilder()(loaded)

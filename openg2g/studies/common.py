"""Shared pieces of the studies: the base scenario as data, controller choices, feeder topology, tasks.

Studies build each run as ``--set`` overrides of a base scenario, executed through the sweep
machinery (:mod:`openg2g.sweep`), so they are resumable and run on the same engines.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from openg2g.core.errors import ScenarioError
from openg2g.scenario.loader import apply_override, read_yaml_mapping
from openg2g.scenario.schema import parse_seconds
from openg2g.sweep.expand import encode_value
from openg2g.sweep.runner import fingerprint
from openg2g.sweep.spec import SweepError
from openg2g.sweep.tasks import RunFn, RunTask, run_scenario_files

__all__ = [
    "BaseScenario",
    "Topology",
    "base_topology",
    "check_controller_choices",
    "controller_override",
    "feeder_topology",
    "make_task",
    "net_topology",
    "read_base",
    "safe_id",
    "study_buses",
    "three_phase_buses",
]


@dataclass(frozen=True)
class BaseScenario:
    """A base scenario file read as plain data (with the study's fixed overrides applied).

    :param path: absolute path of the file.
    :param sha256: hash of the file's bytes.
    :param data: the YAML mapping after overrides.
    :param fixed: the fixed overrides, applied first in every run.
    """

    path: Path
    sha256: str
    data: dict[str, Any]
    fixed: tuple[str, ...]

    @property
    def duration_s(self) -> Fraction:
        """Run duration (s) after overrides."""
        return parse_seconds(self.data.get("duration_s", 0))

    @property
    def feeder(self) -> str:
        """The ``grid.feeder`` the scenario names (a relative feeder file resolved against the scenario's folder)."""
        from openg2g.grid.feeder.library import resolve_feeder

        grid = self.data.get("grid")
        return resolve_feeder(str(grid.get("feeder", "") if isinstance(grid, dict) else ""), self.path.parent)

    def site_index(self, name: str | None) -> int:
        """Index of the datacenter site named ``name`` (None: the first).

        :raises SweepError: no sites, or no site of that name.
        """
        sites = self.data.get("datacenters") or []
        if not sites:
            raise SweepError([(f"{self.path}: datacenters", "the base scenario has no datacenter site")])
        if name is None:
            return 0
        names = [s.get("name") for s in sites]
        if name not in names:
            raise SweepError([(f"{self.path}: datacenters", f"no site named {name!r}; sites: {names}")])
        return names.index(name)

    def with_duration(self, duration_s: float) -> BaseScenario:
        """This base shortened (or lengthened) to ``duration_s``, kept as a fixed override too."""
        data = deep(self.data)
        data["duration_s"] = duration_s
        return replace(self, data=data, fixed=(*self.fixed, f"duration_s={encode_value(duration_s)}"))

    def events_within(self) -> list[dict[str, Any]]:
        """The scenario's events that fall within its (possibly shortened) duration."""
        end = self.duration_s
        return [e for e in self.data.get("events") or [] if parse_seconds(e.get("t_s", 0)) <= end]


def read_base(path: Path, overrides: Sequence[str] = ()) -> BaseScenario:
    """Read a base scenario file as data and apply ``overrides`` (validation happens per run).

    :raises SweepError: unreadable file or YAML (as for a scenario: file, line and reason), or
        an override that does not apply.
    """
    data = read_yaml_mapping(Path(path), "base scenario", SweepError)
    raw = Path(path).read_bytes()
    for assignment in overrides:
        apply_override(data, assignment, str(path))
    return BaseScenario(Path(path).resolve(), hashlib.sha256(raw).hexdigest(), data, tuple(overrides))


def controller_override(name: str, base_path: Path) -> list[dict[str, Any]]:
    """The ``controllers`` list for a controller choice.

    ``none`` is no controller. Another name takes the controllers of the sibling scenario
    ``<prefix>_<name>.yaml`` (its tuned parameters), where ``<prefix>`` is the base file's name
    up to its last ``_``; without such a file it is ``[{kind: name}]`` with default parameters.
    """
    if name == "none":
        return []
    prefix = base_path.stem.rsplit("_", 1)[0]
    sibling = base_path.parent / f"{prefix}_{name}.yaml"
    if sibling.is_file():
        controllers = read_yaml_mapping(sibling, "scenario", SweepError).get("controllers")
        if controllers:
            return list(controllers)
    return [{"kind": name}]


def check_controller_choices(base: BaseScenario, choices: Sequence[str], where: str) -> None:
    """Load and start the base scenario with each controller choice, as a run would, before any run
    (``openg2g validate`` and the studies): a choice that cannot be built (an unknown kind, a
    controller file that fails to import, parameters it refuses) is one input error, not a column
    of failed runs.

    :param where: how problems name the choices, e.g. ``"study.yaml: controllers"``.
    :raises ScenarioError: the first failing choice's problems, each naming ``where``, the choice,
        the scenario file and field.
    """
    from openg2g.scenario.loader import load_scenario
    from openg2g.scenario.preflight import check_start

    for choice in choices:
        controllers = json.dumps(controller_override(choice, base.path))
        try:
            check_start(load_scenario(base.path, [*base.fixed, f"controllers={controllers}"]))
        except ScenarioError as exc:
            raise ScenarioError([(f"{where} ({choice!r}): {loc}", msg) for loc, msg in exc.problems]) from None


@dataclass(frozen=True)
class Topology:
    """What a map of the feeder needs.

    :param name: feeder name.
    :param bus_phases: bus -> phases present.
    :param coords: bus -> (x, y) drawing coordinates.
    :param edges: ``(bus1, bus2)`` of every line, switch and transformer.
    :param source_side: the source bus and buses on its side of the substation transformer.
    """

    name: str
    bus_phases: Mapping[str, tuple[str, ...]]
    coords: Mapping[str, tuple[float, float]]
    edges: tuple[tuple[str, str], ...]
    source_side: tuple[str, ...]


def _point(geo: object) -> tuple[float, float] | None:
    """``(x, y)`` of a pandapower ``bus.geo`` GeoJSON point, None if it is not one."""
    try:
        x, y = json.loads(str(geo))["coordinates"][:2]
        return float(x), float(y)
    except (ValueError, TypeError, KeyError, IndexError):
        return None


def net_topology(source: str, base_dir: Path, trust_pickle: bool = False) -> Topology:
    """The topology of a pandapower net (``grid.pandapower``, see :mod:`openg2g.grid.nets.source`;
    ``trust_pickle`` as ``grid.trust_pickle``): every in-service bus with phases a, b and c (a
    balanced net), drawn at its ``geo`` point where it has one; the ext_grid buses are the source side."""
    from openg2g.grid.nets.source import BusNames, load_net

    net = load_net(source, base_dir, trust_pickle)
    names = BusNames(net)
    name = dict(zip(names.index, names.names))
    live = [int(i) for i in net.bus.index[net.bus.in_service.astype(bool)]]
    geo = net.bus.get("geo", {})
    coords = {name[i]: xy for i in live if (xy := _point(geo.get(i))) is not None}
    edges = [(name[int(a)], name[int(b)]) for a, b in zip(net.line.from_bus, net.line.to_bus)]
    edges += [(name[int(a)], name[int(b)]) for a, b in zip(net.trafo.hv_bus, net.trafo.lv_bus)]
    source_side = tuple(name[int(b)] for b in net.ext_grid.bus[net.ext_grid.in_service.astype(bool)])
    return Topology(source, {name[i]: ("a", "b", "c") for i in live}, coords, tuple(edges), source_side)


def base_topology(base: BaseScenario) -> Topology:
    """The topology of the base scenario's grid: its feeder's, or its pandapower net's."""
    raw = base.data.get("grid")
    grid: dict[str, Any] = raw if isinstance(raw, dict) else {}
    net = grid.get("pandapower")
    if not net:
        return feeder_topology(base.feeder)
    return net_topology(str(net), base.path.parent, trust_pickle=grid.get("trust_pickle") is True)


def feeder_topology(feeder: str) -> Topology:
    """The topology of a bundled feeder or a ``.dss`` file (see ``openg2g.grid.feeder.library``)."""
    from openg2g.grid.feeder.library import load_feeder

    f = load_feeder(feeder)
    m = f.model
    edges = [(ln.bus1, ln.bus2) for ln in m.lines if ln.in_service]
    edges += [(t.windings[0].bus, t.windings[1].bus) for t in m.transformers]
    return Topology(f.name, dict(f.bus_phases), dict(f.coords), tuple(edges), tuple(f.source_side_buses))


def three_phase_buses(topology: Topology) -> list[str]:
    """Buses with phases a, b and c, excluding the source side of the substation."""
    return [b for b, ph in topology.bus_phases.items() if {"a", "b", "c"} <= set(ph) and b not in topology.source_side]


def study_buses(given: Sequence[str] | None, topology: Topology | None, field: str, hint: str) -> list[str]:
    """The buses a study covers: ``given``, else every three-phase bus of ``topology``.

    Given buses are checked against ``topology`` when there is one: each must be a three-phase
    bus off the source side (a site needs one), so no run is spent on a bus that cannot host it.

    :param field: the option or study field the buses come from, for the error.
    :param hint: the error's message when neither buses nor a topology is given.
    :raises SweepError: no buses given and no topology, or given buses the feeder cannot host a
        site on (the message names them and lists the valid ones).
    """
    if given:
        buses = [str(b) for b in given]
        if topology is not None:
            valid = three_phase_buses(topology)
            bad = [b for b in buses if b.lower() not in {v.lower() for v in valid}]
            if bad:
                raise SweepError(
                    [
                        (
                            field,
                            f"{bad}: not three-phase buses of feeder {topology.name} off the source side; valid: {valid}",
                        )
                    ]
                )
        return buses
    if topology is None:
        raise SweepError([(field, hint)])
    return three_phase_buses(topology)


def safe_id(text: str) -> str:
    """``text`` made safe for a directory name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def make_task(
    base: BaseScenario,
    run_id: str,
    index: int,
    params: Mapping[str, Any],
    settings: Mapping[str, Any],
    out_dir: Path,
    run_fn: RunFn = run_scenario_files,
    plots: bool = False,
) -> RunTask:
    """A run of ``base`` with its fixed overrides, then ``settings`` (dotted key -> value).

    :param params: what the study reports about the run (becomes its ``run.json`` parameters).
    """
    overrides = (*([] if plots else ["outputs.plots=false"]), *base.fixed)
    overrides += tuple(f"{k}={encode_value(v)}" for k, v in settings.items())
    return RunTask(
        run_id=run_id,
        index=index,
        params=dict(params),
        scenario=str(base.path),
        overrides=overrides,
        out_dir=str(Path(out_dir).resolve() / run_id),
        fingerprint=fingerprint(base.sha256, overrides),
        run_fn=run_fn,
    )


def deep(value: Any) -> Any:
    """A deep copy (so studies never edit the base data in place)."""
    return copy.deepcopy(value)

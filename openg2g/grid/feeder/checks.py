"""Checks of a scenario's grid section and site buses against a feeder, as ``(field path, message)``
problems, never raising (:func:`openg2g.grid.kinds.validate_grid` gathers them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from openg2g.core.errors import FeederError, ScenarioError
from openg2g.grid.config import ExtraLoadSpec, GridSite, GridSpec, PVSpec
from openg2g.grid.feeder.capacitors import unsupported_capcontrol
from openg2g.grid.feeder.library import Feeder, load_feeder, resolve_feeder
from openg2g.grid.feeder.network import Switching, energized, node_index
from openg2g.grid.feeder.profile import Profile
from openg2g.grid.feeder.regulators import bank_auto_problem
from openg2g.grid.feeder.settle import PANDAPOWER_CANNOT_SETTLE, unsupported_static_controls

__all__ = ["check_against_feeder", "validate_feeder_grid"]


def _some(names: Sequence[str], n: int = 12) -> str:
    names = list(names)
    head = ", ".join(names[:n])
    return head + (f", ... ({len(names)} in all)" if len(names) > n else "")


def _live_buses(feeder: Feeder) -> set[str]:
    """Buses whose phases are all connected to the source in the file's switching state."""
    model = feeder.model
    nodes = node_index(model)
    live = energized(model, nodes, Switching.initial(model))
    return {
        bus for bus, phases in feeder.bus_phases.items() if phases and all(live[nodes.index[(bus, p)]] for p in phases)
    }


def _check_sites(feeder: Feeder, sites: Sequence[GridSite]) -> list[tuple[str, str]]:
    """Each site's bus exists, has three phases and is connected to the source."""
    problems: list[tuple[str, str]] = []
    buses = feeder.bus_phases
    live = _live_buses(feeder) if sites else set()
    three = [b for b, ph in buses.items() if len(ph) == 3 and b in live]
    for i, site in enumerate(sites):
        b = site.bus.lower()
        if b not in buses:
            problems.append(
                (
                    f"datacenters.{i}.bus",
                    f"unknown bus {site.bus!r} on feeder {feeder.name}; three-phase buses are {_some(three)}",
                )
            )
        elif len(buses[b]) != 3:
            problems.append(
                (
                    f"datacenters.{i}.bus",
                    (
                        f"bus {site.bus!r} has phases {''.join(buses[b])}, a site needs a three-phase bus "
                        f"(e.g. {_some(three, 6)})"
                    ),
                )
            )
        elif b not in live:
            problems.append(
                (
                    f"datacenters.{i}.bus",
                    (
                        f"bus {site.bus!r} is not connected to the source on feeder {feeder.name} (an island, or "
                        f"cut off by an open line or switch); connected three-phase buses are {_some(three, 6)}"
                    ),
                )
            )
    return problems


def _check_element_buses(feeder: Feeder, spec: GridSpec) -> list[tuple[str, str]]:
    """PV, storage, extra-load and monitored buses exist and have the phases their elements use."""
    problems: list[tuple[str, str]] = []
    buses = feeder.bus_phases
    bus_list = list(buses)

    def bus_ok(path: str, bus: str, need: Sequence[str] = ()) -> None:
        b = bus.lower()
        if b not in buses:
            problems.append((path, f"unknown bus {bus!r} on feeder {feeder.name}; buses are {_some(bus_list)}"))
            return
        missing = [p for p in need if p not in buses[b]]
        if missing:
            problems.append(
                (
                    path,
                    f"bus {bus!r} has phases {''.join(buses[b])}, missing {''.join(missing)} (needs {''.join(need)})",
                )
            )

    for i, pv in enumerate(spec.pv):
        bus_ok(f"grid.pv.{i}.bus", pv.bus, pv.phases)
    for i, st in enumerate(spec.storage):
        bus_ok(f"grid.storage.{i}.bus", st.bus)
    for i, ld in enumerate(spec.extra_loads):
        bus_ok(f"grid.extra_loads.{i}.bus", ld.bus, ld.phases)
    for i, b in enumerate(spec.monitored_buses or []):
        bus_ok(f"grid.monitored_buses.{i}", b)
    return problems


def _check_regulators(feeder: Feeder, spec: GridSpec) -> list[tuple[str, str]]:
    """Regulator banks exist, with a non-empty tap range and one tap per phase inside it (one value
    on a ganged bank); a bank in auto mode has controls that can run."""
    problems: list[tuple[str, str]] = []
    for bank, reg in spec.regulators.items():
        info = feeder.regulators.get(bank.lower())
        if info is None:
            problems.append(
                (
                    f"grid.regulators.{bank}",
                    f"unknown regulator bank {bank!r}; banks are {_some(list(feeder.regulators)) or 'none'}",
                )
            )
            continue
        if reg.mode == "auto":
            why = bank_auto_problem(feeder, bank.lower())
            if why is not None:
                problems.append((f"grid.regulators.{bank}.mode", f"auto: {why}"))
        lo = info.min_tap if reg.min_tap is None else reg.min_tap
        hi = info.max_tap if reg.max_tap is None else reg.max_tap
        if lo >= hi:
            problems.append((f"grid.regulators.{bank}", f"empty tap range: min_tap {lo} >= max_tap {hi}"))
        if reg.taps is not None:
            if len(reg.taps) != len(info.phases):
                problems.append(
                    (
                        f"grid.regulators.{bank}.taps",
                        (
                            f"{len(reg.taps)} taps given, bank {bank} regulates {len(info.phases)} phase(s) "
                            f"({', '.join(info.phases)}): give one tap per phase"
                        ),
                    )
                )
            bad = [t for t in reg.taps if not lo <= t <= hi]
            if bad:
                problems.append((f"grid.regulators.{bank}.taps", f"taps {bad} out of range [{lo}, {hi}]"))
            if feeder.is_ganged(bank.lower()) and len(set(reg.taps)) > 1:
                problems.append(
                    (
                        f"grid.regulators.{bank}.taps",
                        (
                            f"taps {list(reg.taps)} differ per phase, but bank {bank} is one ganged "
                            f"{len(info.phases)}-phase regulator with a single tap: give the same tap on every phase"
                        ),
                    )
                )
    return problems


def _check_branch_ratings(feeder: Feeder, spec: GridSpec) -> list[tuple[str, str]]:
    """Each rated branch exists, and its normal rating stays at or below its emergency one when
    one of the two is the file's (or OpenDSS's default)."""
    lines = {f"line.{ln.name}".lower(): ln for ln in feeder.model.lines}
    transformers = {f"transformer.{t.name}".lower(): t for t in feeder.model.transformers}
    problems: list[tuple[str, str]] = []
    for name, r in spec.branch_ratings.items():
        path = f"grid.branch_ratings.{name}"
        key = name.lower()
        if key in lines:
            file_normal, file_emergency = lines[key].ratings_a()
            normal, emergency, unit = r.normal_a or file_normal, r.emergency_a or file_emergency, "A"
        elif key in transformers:
            file_normal, file_emergency = transformers[key].ratings_kva()
            normal, emergency, unit = r.normal_kva or file_normal, r.emergency_kva or file_emergency, "kVA"
        else:
            kind = "lines" if key.startswith("line.") else "transformers"
            known = lines if kind == "lines" else transformers
            problems.append(
                (path, f"unknown branch {name!r} on feeder {feeder.name}; {kind} are {_some(tuple(known))}")
            )
            continue
        if emergency < normal:
            problems.append(
                (
                    path,
                    f"the normal rating ({normal:g} {unit}) is above the emergency rating ({emergency:g} {unit}); give both",
                )
            )
    return problems


def _check_capacitors(feeder: Feeder, spec: GridSpec) -> list[tuple[str, str]]:
    """Capacitors exist; in automatic control, the feeder has capacitor controls and each one can run."""
    problems: list[tuple[str, str]] = []
    for cap in spec.capacitors:
        if cap.lower() not in feeder.capacitors:
            problems.append(
                (
                    f"grid.capacitors.{cap}",
                    f"unknown capacitor {cap!r}; capacitors are {_some(feeder.capacitors) or 'none'}",
                )
            )
    if spec.capacitor_control == "auto":
        if not feeder.model.capcontrols:
            problems.append(
                ("grid.capacitor_control", f"auto, but feeder {feeder.name} has no CapControl to run (give fixed)")
            )
        for cc in feeder.model.capcontrols:
            why = unsupported_capcontrol(cc, feeder.model)
            if why is not None:
                problems.append(("grid.capacitor_control", f"auto on feeder {feeder.name}: {why}"))
    return problems


def _check_initial_controls(feeder: Feeder, spec: GridSpec) -> list[tuple[str, str]]:
    """With ``initial_controls: static``, every control that settles can run (a bank whose taps the
    scenario states does not act)."""
    if spec.initial_controls != "static":
        return []
    if spec.solver == "pandapower":
        return [("grid.initial_controls", f"static on feeder {feeder.name}: {PANDAPOWER_CANNOT_SETTLE}")]
    held = {
        t
        for bank, reg in spec.regulators.items()
        if reg.taps is not None and bank.lower() in feeder.bank_units
        for t, _ in feeder.bank_units[bank.lower()]
    }
    return [
        ("grid.initial_controls", f"static on feeder {feeder.name}: {why}")
        for why in unsupported_static_controls(feeder.model, held)
    ]


def _check_solver(feeder: Feeder, spec: GridSpec) -> list[tuple[str, str]]:
    """The pandapower reference mode has no table for static elements (center-tapped and
    multi-winding transformers, reactors): it would leave them out of the network; it balances a
    single-phase source, and has no place for the feeder's own generation (generators, PV and
    storage of the file, generators holding their voltage)."""
    if spec.solver != "pandapower":
        return []
    model = feeder.model
    missing = [
        ("static elements", [p.name for p in model.primitives]),
        ("generation", [g.name for g in model.generators] + [g.name for g in model.regulated_generators]),
        ("single-phase source", [f"vsource at {model.source.bus}"] if model.source.phase is not None else []),
    ]
    return [
        (
            "grid.solver",
            (
                f"solver pandapower cannot represent the {what} of feeder {feeder.name} ({_some(names, 4)}); "
                "use the exact solver"
            ),
        )
        for what, names in missing
        if names
    ]


def _check_monitored_level(feeder: Feeder, spec: GridSpec) -> list[tuple[str, str]]:
    """``monitored_min_kv`` leaves some bus to monitor."""
    if spec.monitored_min_kv is None:
        return []
    kv = feeder.model.bus_kv
    buses = [b.lower() for b in spec.monitored_buses] if spec.monitored_buses else list(kv)
    if any(kv.get(b, 0.0) >= spec.monitored_min_kv * (1.0 - 1e-6) for b in buses):
        return []
    levels = ", ".join(f"{x:g}" for x in sorted({round(v, 4) for v in kv.values()}, reverse=True))
    return [
        (
            "grid.monitored_min_kv",
            f"no monitored bus of feeder {feeder.name} is at {spec.monitored_min_kv:g} kV or above (levels: {levels} kV)",
        )
    ]


def check_against_feeder(feeder: Feeder, spec: GridSpec, sites: Sequence[GridSite]) -> list[tuple[str, str]]:
    """Problems of ``spec``/``sites`` on an already loaded ``feeder`` (see :func:`validate_grid`)."""
    on_net_only = [("grid.site_transformers", "available on pandapower nets only (grid.pandapower)")]
    return [
        *_check_solver(feeder, spec),
        *_check_sites(feeder, sites),
        *_check_element_buses(feeder, spec),
        *_check_monitored_level(feeder, spec),
        *_check_regulators(feeder, spec),
        *_check_capacitors(feeder, spec),
        *_check_initial_controls(feeder, spec),
        *_check_branch_ratings(feeder, spec),
        *(on_net_only if spec.site_transformers else []),
    ]


def validate_feeder_grid(spec: GridSpec, sites: Sequence[GridSite], base_dir: Path | None) -> list[tuple[str, str]]:
    """Problems of a scenario on a feeder (``grid.feeder``): the feeder loads (unknown names list
    the bundled ones), and :func:`check_against_feeder`; PV and extra-load profiles are readable."""
    assert spec.feeder is not None  # GridSpec holds exactly one of feeder and pandapower
    try:
        feeder = load_feeder(resolve_feeder(spec.feeder, base_dir))
    except FeederError as exc:  # an unknown name's message lists the bundled feeders
        return [("grid.feeder", str(exc))]
    problems = check_against_feeder(feeder, spec, sites)
    folder = Path(".") if base_dir is None else base_dir
    profiled: tuple[tuple[str, Sequence[PVSpec | ExtraLoadSpec]], ...] = (
        ("grid.pv", spec.pv),
        ("grid.extra_loads", spec.extra_loads),
    )
    for path, items in profiled:
        for i, item in enumerate(items):
            if item.profile is not None:
                try:
                    Profile.read(folder / item.profile, f"{path}.{i}.profile")
                except ScenarioError as exc:
                    problems.extend(exc.problems)
    return problems

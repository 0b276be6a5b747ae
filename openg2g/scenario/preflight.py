"""Pre-flight: build and start a scenario's run as ``openg2g run`` would, and fire its events.

The last layer of validation (after the schema and the loader's checks against feeder, trace
library and controller registry): what only built components know. ``openg2g validate``,
``openg2g run`` and each sweep run call :func:`check_start` before anything is simulated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from openg2g.core.commands import ShiftReplicas, command_name, is_datacenter_command
from openg2g.core.errors import CommandError, G2GError, ScenarioError, raised_in_user_code
from openg2g.core.interfaces import SiteInfo
from openg2g.engine.actuators import ActuatorOwners, claim_declared
from openg2g.scenario.events import build_event_command
from openg2g.scenario.loaded import LoadedScenario

__all__ = ["check_start"]


def _no_measurements(sites: Sequence[SiteInfo]) -> list[str]:
    """``site/model`` of models whose latency or throughput was never measured (imported traces)."""
    return [
        f"{site.site}/{m.model}"
        for site in sites
        for m in site.models.values()
        if not all(math.isfinite(x) for x in (*m.itl_s, *m.throughput_tok_s))
    ]


def check_start(loaded: LoadedScenario) -> None:
    """Build and start the run's components as ``openg2g run`` does, then fire every event on them.

    Catches what only the built components know: a controller's parameters against the feeder,
    the sites and the trace library (unknown bus, site, model or bank, an imported trace without
    the latency data a model-based controller fits its curves to), two controllers declaring one
    setting (:mod:`openg2g.engine.actuators`), and events that would be
    rejected when they fire (a tap beyond the bank's range, an unknown bank, a model the site does
    not serve, a replica count beyond the site's capacity), and the commands of the scenario's
    disturbances likewise (an unknown bus or line, a fault on a node the bus lacks). Events and
    disturbances are applied in time order to the components as the scenario starts them, without
    the controllers' commands in between.

    This executes controller code (a scenario naming a controller file runs that file). It contacts
    no live site's servers (:mod:`openg2g.datacenter.live`): their replay twins start instead.

    :raises ScenarioError: every problem, each naming file, field path and reason.
    """
    from openg2g.control.registry import describe_controller
    from openg2g.datacenter.live.site import LiveSite
    from openg2g.engine.simulation import Simulation
    from openg2g.scenario.build import build_components

    sc, where = loaded.scenario, str(loaded.path)
    try:
        components = build_components(loaded)
    except G2GError as exc:
        raise ScenarioError([(f"{where}: (building the run)", str(exc))]) from None
    sites, grid, controllers = components
    # a live site's servers are not loaded by a check: its replay twin starts in its place, and
    # events aimed at it are checked by the live site itself
    live = {site.name: site for site in sites if isinstance(site, LiveSite)}
    components = ([s.stand_in() if isinstance(s, LiveSite) else s for s in sites], grid, controllers)
    sites = components[0]
    sim = Simulation.from_scenario(loaded, components=components)
    problems: list[tuple[str, str]] = []
    missing = _no_measurements([site.info() for site in sites])
    for i, (spec, controller) in enumerate(zip(sc.controllers, controllers)):
        who = describe_controller(spec, loaded.base_dir)
        try:
            controller.reset(sim.context(float(spec.period_s or sc.periods.control_s)), sc.seed)
        except Exception as exc:  # noqa: BLE001 - user controller code may fail in any way; report it
            reason = (
                str(exc)
                if isinstance(exc, G2GError)
                else f"reset() raised {type(exc).__name__}: {exc}{raised_in_user_code(exc)}"
            )
            hint = (
                f" (no latency/throughput measurements for {', '.join(missing)}: an imported power trace "
                "carries none, and model-based controllers fit their curves to them)"
                if missing
                else ""
            )
            problems.append((f"controllers.{i}", f"{who} cannot start: {reason}{hint}"))
    if not problems:  # each controller declares its settings for the run it was reset for
        problems = [(f"controllers.{i}", msg) for i, msg in claim_declared(ActuatorOwners(), controllers)]
    if problems:
        raise ScenarioError([(f"{where}: {loc}", msg) for loc, msg in problems])
    try:
        sim.start()
    except G2GError as exc:
        raise ScenarioError([(f"{where}: (starting the run)", str(exc))]) from None
    by_site = {site.name: site for site in sites}
    # (time, order, where it comes from, command): the events, then the disturbances' commands
    fired = [(e.t_s, i, f"events.{i}", build_event_command(e.command, e.fields())) for i, e in enumerate(sc.events)]
    if sim.disturbances is not None and sc.disturbances is not None:
        index = {record.name: j for j, record in enumerate(sim.disturbances.records)}
        fired += [
            (t, len(fired) + k, f"disturbances.events.{index[name]}", command)
            for k, (t, command, name) in enumerate(sim.disturbances.commands)
        ]
    for t_s, _, loc, command in sorted(fired, key=lambda item: (item[0], item[1])):
        try:  # routed as the engine routes (a shift is offered to its destination first)
            if is_datacenter_command(command):
                targets = [command.to_site, command.site] if isinstance(command, ShiftReplicas) else [command.site]
                for name in targets:
                    if name in live:
                        live[name].check_command(command)
                    else:
                        by_site[name].apply(command, float(t_s))
            else:
                grid.apply(command, float(t_s))
        except CommandError as exc:
            name = command_name(type(command))
            problems.append((loc, f"at t={float(t_s):g} s {name} would be rejected: {exc}"))
    if problems:
        raise ScenarioError([(f"{where}: {loc}", msg) for loc, msg in problems])

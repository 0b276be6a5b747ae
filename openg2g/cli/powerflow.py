"""``openg2g powerflow FEEDER``: one power flow with the feeder's own loads plus an optional
balanced datacenter load, printed as a table (every node's voltage, substation power, the most
loaded branches) or as JSON.

By default (``--controls static``) the feeder file's RegControls, CapControls and SwtControls
settle first, as OpenDSS's own ``Solve`` lets them (its default ``controlmode=static``,
:mod:`openg2g.grid.feeder.settle`): the answer a distribution engineer compares with OpenDSS's.
``--controls off`` holds the taps, capacitor and switch states the file leaves (OpenDSS's
``controlmode=off``, the default with ``--solver pandapower``, which cannot settle them); a bank
given with ``--taps`` is held either way. The output says which, in how many control iterations,
and the taps, capacitor and switch states solved at.

``--json`` prints one object: ``feeder``, ``kind`` (``feeder`` or ``pandapower net``), ``solver``,
``controls`` (``static`` or ``off``), ``control_iterations`` (the solves of the settle, OpenDSS's
control iterations; ``null`` with controls off), ``taps`` (bank -> per-phase tap steps),
``capacitors`` (name -> closed), ``switches`` (each line a SwtControl operates -> closed),
``v_pu`` (``"<bus>.<node>"`` -> voltage magnitude in pu of the bus's base, to 9 decimals, for every
node of the feeder, source side and neutrals included: node ``a``/``b``/``c`` is OpenDSS's 1/2/3,
a neutral keeps its number, ``"n3.4"``) and ``bus_kv`` (bus -> its base voltage, kV line to line,
as the table's ``kV`` column).

``--fault "bus1=671.1 phases=1 r=0.01"`` (repeatable) solves through faults, given by OpenDSS's
own ``Fault`` properties ``bus1``, ``bus2``, ``phases`` and ``r`` (:mod:`openg2g.grid.feeder.faults`),
placed once the controls have settled (``--controls static``) and with them held: the voltages
printed are the faulted ones.

``FEEDER`` may also be a pandapower net (a ``.json``/pickle file or a ``pandapower.networks``
name such as ``case118``, see :mod:`openg2g.grid.nets.source`), solved balanced
(``openg2g powerflow case118 --dc 59=200``): its tap changers stay at their ``tap_pos``, so it
reports ``controls: off``, and ``v_pu`` holds its buses' phases.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from openg2g.core.config import MIN_POWER_FACTOR
from openg2g.core.errors import G2GError, ScenarioError
from openg2g.core.jsontext import json_text

if TYPE_CHECKING:
    from openg2g.core.commands import ApplyFault
    from openg2g.core.interfaces import GridBackend
    from openg2g.core.state import DatacenterState, GridState
    from openg2g.scenario.schema import GridSpec, SiteSpec

__all__ = ["parse_dc", "register"]

_WORST_BRANCHES = 5
"""Branches listed, most loaded first."""

_JSON_DIGITS = 9
"""Decimals of a voltage in ``--json`` (pu): far below the solver's agreement with OpenDSS (1e-6),
and above the last digits two equal nets read from different formats may differ in."""


def parse_dc(text: str) -> tuple[str, float, float]:
    """``BUS=MW[@PF]`` -> (bus, MW, pf)."""
    try:
        bus, rest = text.split("=", 1)
        mw_s, _, pf_s = rest.partition("@")
        mw, pf = float(mw_s), float(pf_s) if pf_s else 0.95
    except ValueError:
        raise ValueError(f"--dc {text!r}: expected BUS=MW or BUS=MW@PF, e.g. 671=3@0.95") from None
    if not (mw >= 0 and math.isfinite(mw)):
        raise ValueError(f"--dc {text!r}: MW must be >= 0")
    if not MIN_POWER_FACTOR <= pf <= 1:
        raise ValueError(f"--dc {text!r}: power factor must be in [{MIN_POWER_FACTOR}, 1]")
    return bus.strip(), mw, pf


def _parse_taps(text: str) -> tuple[str, list[int]]:
    """``BANK=A,B,C`` -> (bank, taps)."""
    try:
        bank, rest = text.split("=", 1)
        return bank.strip(), [int(x) for x in rest.split(",")]
    except ValueError:
        raise ValueError(f"--taps {text!r}: expected BANK=A,B,C with integer steps, e.g. reg1=10,8,11") from None


def _parse_faults(texts: list[str]) -> list[ApplyFault]:
    """Each ``--fault`` text -> its fault, named ``fault1``, ``fault2``, ... in order.

    :raises CommandError: a bad property (the message quotes the text and names the property).
    """
    from openg2g.grid.feeder.faults import parse_fault

    return [parse_fault(text, f"fault{i + 1}") for i, text in enumerate(texts)]


def _specs(
    args: argparse.Namespace, dcs: list[tuple[str, float, float]], taps: dict[str, list[int]]
) -> tuple[list[SiteSpec], GridSpec]:
    """The sites and grid spec of the command line.

    :raises ScenarioError: a value the scenario schema refuses, located as in a scenario file
        (``datacenters.<i>.<field>``, ``grid.<field>``).
    """
    from pydantic import ValidationError

    from openg2g.scenario.schema import GridSpec, ModelSpec, RegulatorSpec, SiteSpec

    problems: list[tuple[str, str]] = []

    def located(prefix: str, exc: ValidationError) -> None:
        problems.extend((".".join([prefix, *map(str, e["loc"])]), e["msg"]) for e in exc.errors())

    sites = []
    for i, (bus, _, pf) in enumerate(dcs):
        try:
            model = ModelSpec(model="cli", gpus_per_replica=1, replicas=0, batch_size=1)
            sites.append(SiteSpec(name=f"dc{i}", bus=bus, power_factor=pf, models=[model]))
        except ValidationError as exc:
            located(f"datacenters.{i}", exc)
    grid_source = {"pandapower": args.feeder} if _is_net(args.feeder) else {"feeder": args.feeder}
    try:
        spec = GridSpec(
            **grid_source,
            solver=args.solver,
            trust_pickle=args.trust_pickle,
            regulators={bank: RegulatorSpec(taps=t) for bank, t in taps.items()},
        )
    except ValidationError as exc:
        located("grid", exc)
    if problems:
        raise ScenarioError(problems)
    return sites, spec


def _is_net(source: str) -> bool:
    """Whether ``source`` names a pandapower net: a net file (``.json``/pickle) or a
    ``pandapower.networks`` name; anything else is a feeder (bundled name or ``.dss`` file)."""
    from openg2g.grid.feeder.library import list_feeders
    from openg2g.grid.nets.source import is_network_name, looks_like_net_file, looks_like_simbench_code

    if source in list_feeders() or source.lower().endswith(".dss"):
        return False
    return looks_like_net_file(source) or is_network_name(source) or looks_like_simbench_code(source)


@dataclass(frozen=True)
class _Result:
    """What ``powerflow`` prints: the state solved (flows, substation power), every node's voltage
    (pu), and the controls it was solved with."""

    state: GridState
    v_pu: dict[str, float]
    controls: str
    iterations: int | None
    capacitors: dict[str, bool]
    switches: dict[str, bool]
    bus_kv: dict[str, float]


def _bus_kv(grid: GridBackend) -> dict[str, float]:
    """Bus -> its line-to-line base voltage (kV): the feeder model's (a feeder, an asymmetric
    net), or a balanced pandapower net's ``vn_kv``."""
    from openg2g.grid.feeder.backend import FeederGrid
    from openg2g.grid.nets.balanced import PandapowerGrid

    if isinstance(grid, FeederGrid):
        return dict(grid.feeder.model.bus_kv)
    if isinstance(grid, PandapowerGrid):
        return {label: float(grid.net.bus.at[i, "vn_kv"]) for i, label in zip(grid.names.index, grid.names.names)}
    return {}


def _solve(
    grid: GridBackend, loads: dict[str, DatacenterState], args: argparse.Namespace, faults: list[ApplyFault]
) -> _Result:
    """Solve ``grid`` with ``loads``, its controls settled first with ``--controls static``; then,
    with ``faults``, through them, the controls held where the settle left them (the faulted
    voltages of the feeder as it stood: OpenDSS's solve with the ``Fault`` elements added after it).

    :raises G2GError: a fault the grid refuses (named by its ``--fault`` text).
    """
    import numpy as np

    from openg2g.grid.feeder.backend import FeederGrid

    def place_faults() -> None:
        for text, fault in zip(args.fault, faults):
            try:
                grid.apply(fault, 0.0)
            except G2GError as exc:
                raise G2GError(f"--fault {text!r}: {exc}") from None

    if not isinstance(grid, FeederGrid):  # a balanced net: no controls, every bus monitored
        place_faults()
        state = grid.solve(0.0, loads, 0.0)
        v_pu = {bp: float(v) for bp, v in zip(state.bus_phases, state.v_pu)}
        return _Result(state, v_pu, "off", None, {}, {}, _bus_kv(grid))
    iterations = None
    if args.controls == "static":
        settled = grid.settle(0.0, loads, args.max_control_iterations)
        solution, iterations, switches = settled.solution, settled.iterations, dict(settled.switches)
    else:
        solution = grid.node_solution(0.0, loads)
        switched = dict.fromkeys(sc.element.partition(".")[2] for sc in grid.feeder.model.swtcontrols)
        switches = {line: solution.switching.lines[line] for line in switched if line in solution.switching.lines}
    if faults:
        place_faults()
        solution = grid.node_solution(0.0, loads)
    state = grid.solve(0.0, loads, 0.0)
    v_pu = np.abs(solution.v_v) / solution.nodes.v_base_v
    return _Result(
        state,
        {name: float(v) for name, v in zip(solution.nodes.names, v_pu)},
        args.controls,
        iterations,
        dict(solution.switching.capacitors),
        switches,
        _bus_kv(grid),
    )


def _run(args: argparse.Namespace) -> int:
    import numpy as np

    from openg2g.core.state import DatacenterState
    from openg2g.grid.feeder.backend import FeederGrid
    from openg2g.grid.kinds import build_grid

    if args.controls is None:
        args.controls = "off" if args.solver == "pandapower" else "static"
    try:
        dcs = [parse_dc(x) for x in args.dc]
        taps = dict(_parse_taps(x) for x in args.taps)
        if args.max_control_iterations is not None and args.max_control_iterations < 1:
            raise ValueError(f"--max-control-iterations {args.max_control_iterations}: give at least 1")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        faults = _parse_faults(args.fault)
    except G2GError as exc:
        print(f"error: --fault {exc}", file=sys.stderr)
        return 2
    try:
        sites, spec = _specs(args, dcs, taps)
        grid = build_grid(spec, sites, Path.cwd())
        loads = {}
        for site, (_, mw, pf) in zip(sites, dcs):
            p = np.full(3, mw * 1e6 / 3)
            loads[site.name] = DatacenterState(site.name, 0.0, p, p * math.tan(math.acos(pf)), {})
        result = _solve(grid, loads, args, faults)
    except ScenarioError as exc:
        for loc, msg in exc.problems:
            if loc.startswith("datacenters."):
                loc = f"--dc {args.dc[int(loc.split('.')[1])]}"
            elif loc.startswith("grid.regulators."):
                loc = f"--taps {loc.split('.')[2]}"
            elif loc in ("grid.feeder", "grid.pandapower"):
                loc = f"FEEDER {args.feeder!r}"
            print(f"error: {loc}: {msg}", file=sys.stderr)
        return 2
    except G2GError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    state = result.state
    kind = "pandapower net" if spec.pandapower is not None else "feeder"
    solver = args.solver if isinstance(grid, FeederGrid) else "balanced"  # an asymmetric net is a FeederGrid
    if args.json:
        out = {
            "feeder": args.feeder,
            "kind": kind,
            "solver": solver,
            "controls": result.controls,
            "control_iterations": result.iterations,
            "taps": {bank: list(t) for bank, t in state.taps.items()},
            "capacitors": result.capacitors,
            "switches": result.switches,
            "v_pu": {node: round(v, _JSON_DIGITS) for node, v in result.v_pu.items()},
            "bus_kv": result.bus_kv,
        }
        print(json_text(out, "powerflow --json", indent=None))
        return 0
    print(f"{kind} {args.feeder} ({solver}); {_controls_text(result, isinstance(grid, FeederGrid))}")
    held = {bank.lower() for bank in taps}
    tap_text = ", ".join(f"{b}={list(t)}{' (held)' if b in held else ''}" for b, t in state.taps.items()) or "none"
    print(f"taps: {tap_text}")
    if faults:
        print("faults: " + "; ".join(f"{f.name} {text}" for f, text in zip(faults, args.fault)))
    if result.capacitors:
        print("capacitors: " + ", ".join(f"{n} {'closed' if c else 'open'}" for n, c in result.capacitors.items()))
    if result.switches:
        print("switches: " + ", ".join(f"{n} {'closed' if c else 'open'}" for n, c in result.switches.items()))
    _print_voltages(result.v_pu, result.bus_kv)
    print(
        f"substation P = {state.p_sub_w.sum() / 1e3:.1f} kW (a/b/c "
        + "/".join(f"{x / 1e3:.1f}" for x in state.p_sub_w)
        + f"), losses = {state.losses_w / 1e3:.1f} kW"
    )
    _print_worst_branches(state)
    return 0


def _controls_text(result: _Result, feeder: bool) -> str:
    """What the controls did, in words."""
    if not feeder:
        return "controls off (a balanced pandapower net's tap changers stay at their tap_pos)"
    if result.controls == "static":
        return (
            f"controls static: settled in {result.iterations} control iteration(s), as OpenDSS's Solve "
            "(controlmode=static)"
        )
    return "controls off: the taps, capacitor and switch states the file leaves (OpenDSS's controlmode=off)"


def _print_voltages(v_pu: dict[str, float], bus_kv: dict[str, float]) -> None:
    """Every node's voltage, a row per bus: its base voltage (kV line to line), phases a, b, c, then
    any other node (a neutral) by number."""
    from openg2g.core.state import PHASES

    by_bus: dict[str, dict[str, float]] = {}
    for node, v in v_pu.items():
        bus, label = node.rsplit(".", 1)
        by_bus.setdefault(bus, {})[label] = v
    others = any(set(nodes) - set(PHASES) for nodes in by_bus.values())
    width = max([10, *(len(b) for b in by_bus)])
    header = f"{'bus':>{width}s} {'kV':>7s} {'Va pu':>8s} {'Vb pu':>8s} {'Vc pu':>8s}"
    print(header + ("  other nodes (pu)" if others else ""))
    for bus, v_by_node in by_bus.items():
        kv = f"{bus_kv[bus]:7.3f}" if bus in bus_kv else f"{'-':>7s}"
        cells = [f"{v_by_node[p]:8.4f}" if p in v_by_node else f"{'-':>8s}" for p in PHASES]
        rest = "  ".join(f"{label}={v:.4f}" for label, v in v_by_node.items() if label not in PHASES)
        print(f"{bus:>{width}s} {kv} " + " ".join(cells) + (f"  {rest}" if rest else ""))


def _print_worst_branches(state: GridState) -> None:
    """The most loaded lines and transformers: loading (% of the normal rating) of the branch's
    most loaded conductor, that conductor's current and rating (``*``: OpenDSS's default)."""
    import numpy as np

    b, loading, current_a = state.branches, state.branch_loading_pct, state.branch_current_a
    if b is None or loading is None or current_a is None:
        return
    per_conductor = current_a * (100.0 / b.rating_a)
    print(f"most loaded branches ({_WORST_BRANCHES} of {len(b.names)}; loading = current / normal rating):")
    print(f"{'branch':>22s} {'loading %':>9s} {'term.ph':>9s} {'current A':>9s} {'rating A':>9s}")
    for k in np.argsort(-loading, kind="stable")[:_WORST_BRANCHES]:
        rows = np.flatnonzero(b.branch == k)
        j = rows[np.argmax(per_conductor[rows])]
        rating = f"{b.rating_a[j]:.1f}" + ("*" if b.default_rating[j] else " ")
        print(
            f"{b.names[k]:>22s} {loading[k]:9.1f} {f'{b.terminal[j]}.{b.phase[j]}':>9s} {current_a[j]:9.1f} {rating:>9s}"
        )
    if b.default_rating.any():
        print("* the feeder file sets no normamps: OpenDSS's default 400 A")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``powerflow FEEDER [--dc BUS=MW[@PF]] [--taps BANK=A,B,C] [--controls static|off]
    [--max-control-iterations N] [--fault PROPS] [--json] [--solver ...]``."""
    from openg2g.cli.run import SCENARIO_IS_CODE

    p = subparsers.add_parser("powerflow", epilog=SCENARIO_IS_CODE)
    p.add_argument(
        "feeder",
        help=(
            "bundled feeder name (ieee13, openg2g-ieee13, ...), path to a .dss master file, or a pandapower net "
            "(a .json/pickle file or a pandapower.networks name such as case118)"
        ),
    )
    p.add_argument(
        "--dc",
        action="append",
        default=[],
        metavar="BUS=MW[@PF]",
        help="balanced 3-phase datacenter load (wye constant PQ, default pf 0.95); repeatable",
    )
    p.add_argument(
        "--taps",
        action="append",
        default=[],
        metavar="BANK=A,B,C",
        help="fix a regulator bank's per-phase tap steps, e.g. reg1=10,8,11 (its controls then hold them); repeatable",
    )
    p.add_argument(
        "--trust-pickle",
        action="store_true",
        help="read FEEDER when it is a pandapower pickle (.p/.pkl/.pickle): a pickle runs any code it carries, "
        "so give this only for a file you trust (a .json net is checked before it is read)",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar='"bus1=BUS.NODES [bus2=BUS.NODES] [phases=N] [r=OHM]"',
        help="solve through a fault, given by OpenDSS's Fault properties (phases 1 and r 0.0001 ohm by "
        'default, bus2 ground), e.g. "bus1=671.1 phases=1 r=0.01" (line to ground), "bus1=671.1 bus2=671.2" '
        '(line to line), "bus1=671 phases=3" (three-phase); repeatable',
    )
    p.add_argument(
        "--controls",
        choices=["static", "off"],
        help="static (default): the feeder file's RegControls, CapControls and SwtControls settle first, as "
        "OpenDSS's Solve does (controlmode=static); off (the default with --solver pandapower, which cannot "
        "settle them): hold the taps, capacitor and switch states the file leaves",
    )
    p.add_argument(
        "--max-control-iterations",
        type=int,
        metavar="N",
        help="static: the most solves of the settle (OpenDSS's maxcontroliter); default the file's, 10 if it sets none",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: feeder, kind, solver, controls, control_iterations, taps, capacitors, "
        'switches and v_pu {"<bus>.<node>": pu} for every node',
    )
    p.add_argument(
        "--solver", choices=["exact", "pandapower"], default="exact", help="power-flow solver (default exact)"
    )
    p.set_defaults(func=_run)

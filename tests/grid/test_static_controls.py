"""OpenDSS's static control mode in openg2g's own solver (:mod:`openg2g.grid.feeder.settle`): the
settled taps of the published IEEE feeders (known from OpenDSS, DSS C-API 0.14.5), OpenDSS's
control queue, the iteration limit as OpenDSS counts it, SwtControls, and small circuits against
OpenDSS's own ``Solve`` at ``controlmode=static`` (:func:`~openg2g.grid.feeder.crosscheck.crosscheck`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from openg2g.cli.main import main
from openg2g.core.errors import FeederError, SimulationError
from openg2g.grid.config import GridSpec, RegulatorSpec
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.checks import check_against_feeder
from openg2g.grid.feeder.crosscheck import crosscheck
from openg2g.grid.feeder.library import Feeder, feeder_from_model, load_feeder
from openg2g.grid.feeder.model import SwtControlModel
from openg2g.grid.feeder.opendss import read_opendss
from openg2g.grid.feeder.settle import ControlQueue
from openg2g.scenario.run import run_scenario
from tests.grid.circuits import LINE, ONE_PHASE, THREE_PHASE
from tests.grid.time_mode import Control


def _grid(feeder: Feeder | str, **spec: Any) -> FeederGrid:
    f = load_feeder(feeder) if isinstance(feeder, str) else feeder
    return FeederGrid(f, GridSpec(feeder=f.name if isinstance(feeder, str) else "case", **spec), [], Path("."))


# ----------------------------------------------------------------------------- known answers
@pytest.mark.parametrize(
    ("feeder", "taps", "iterations"),
    [
        ("ieee13", {"reg1": (9, 6, 9)}, 3),
        ("ieee34", {"reg1": (14, 4, 5), "reg2": (13, 13, 13)}, 6),
        ("ieee123", {"reg1": (6, 6, 6), "reg2": (0,), "reg3": (2, 0), "reg4": (10, 4, 6)}, 6),
    ],
)
def test_published_feeders_settle_at_opendss_s_taps(
    feeder: str, taps: dict[str, tuple[int, ...]], iterations: int
) -> None:
    """From the files' taps (all 0), OpenDSS's Solve (controlmode=static, maxcontroliter 10) settles
    the published IEEE 13 at 9/6/9 in 3 control iterations, IEEE 34 at 14/4/5 and 13/13/13 in 6
    (shared/data/feeders/ieee34-published/README.md), IEEE 123 at 6, 0, 2/0, 10/4/6 in 6 (its README;
    reg1 is one ganged three-phase regulator)."""
    grid = _grid(feeder)
    settled = grid.settle(0.0, {})
    assert (dict(settled.taps), settled.iterations) == (taps, iterations)
    assert grid.taps() == taps  # in force for the solves that follow
    assert grid.solve(0.0, {}, 0.0).taps == taps


def test_an_action_moves_70_percent_of_the_steps_asked() -> None:
    """OpenDSS's static action moves 70 % of the steps its sample asked for, truncated, at least one,
    with OpenDSS's own tap increment (0.2 / 32, one bit above 0.00625): from tap 0, IEEE 13's reg3
    and reg1 ask for 10 steps and move 7 (6 with 0.00625 exactly), reg2 asks for 8 and moves 5; the
    next round asks for 3, 2 and 3 and moves 2, 1 and 2. Actions due together run newest first."""
    grid = _grid("ieee13")
    moves: list[tuple[int, ...]] = []
    put = grid._put_in_force

    def recorded(changes: Any) -> None:
        put(changes)
        moves.append(grid.taps()["reg1"])

    grid._put_in_force = recorded  # type: ignore[method-assign]
    grid.settle(0.0, {})
    assert moves == [(0, 0, 7), (0, 5, 7), (7, 5, 7), (7, 5, 9), (7, 6, 9), (9, 6, 9)]


@pytest.mark.parametrize(("limit", "settles"), [(3, False), (4, True)])
def test_the_iteration_limit_counts_as_opendss(limit: int, settles: bool) -> None:
    """IEEE 13 settles in 3 solves; OpenDSS samples the controls after every solve but the
    maxcontroliter-th, so maxcontroliter 3 warns 'Max Control Iterations Exceeded' and 4 settles."""
    grid = _grid("ieee13")
    if settles:
        assert grid.settle(0.0, {}, limit).iterations == 3
        return
    with pytest.raises(SimulationError, match=r"not settled in 3 control iterations.*regcontrol reg1 to tap 9"):
        grid.settle(0.0, {}, limit)


def test_banks_with_stated_taps_hold_them() -> None:
    """A bank whose taps the scenario states (powerflow --taps) keeps them: nothing acts."""
    grid = _grid("ieee13", regulators={"reg1": RegulatorSpec(taps=[10, 8, 11])})
    settled = grid.settle(0.0, {})
    assert (dict(settled.taps), settled.iterations) == ({"reg1": (10, 8, 11)}, 1)


def test_a_scenario_can_start_from_the_settled_state() -> None:
    """grid.initial_controls: static settles at the grid's start and every reset; stated (the default)
    keeps the file's taps and dumps as before (scenario hashes unchanged)."""
    settled = _grid("ieee13", initial_controls="static")
    assert settled.taps() == {"reg1": (9, 6, 9)}
    settled.reset(0)
    assert settled.taps() == {"reg1": (9, 6, 9)}
    assert _grid("ieee13").taps() == {"reg1": (0, 0, 0)}
    assert "initial_controls" not in GridSpec(feeder="ieee13").model_dump()
    assert GridSpec(feeder="ieee13", initial_controls="static").model_dump()["initial_controls"] == "static"


@pytest.mark.slow
def test_a_scenario_run_starts_from_the_settled_taps(tmp_path: Path) -> None:
    """A bundled scenario on the published IEEE 13 with grid.initial_controls: static: the grid table
    shows the settled taps from the first step (the file's, 0, with the default)."""
    overrides = ["grid.feeder=ieee13", "grid.regulators={}", "duration_s=1", "outputs.plots=false"]
    taps = {}
    for start in ("static", "stated"):
        run_scenario("ieee13_none", tmp_path / start, overrides=[*overrides, f"grid.initial_controls={start}"])
        grid = pq.read_table(tmp_path / start / "grid", columns=["tap_reg1_a", "tap_reg1_b", "tap_reg1_c"])
        taps[start] = {tuple(row.values()) for row in grid.to_pylist()}
    assert taps == {"static": {(9, 6, 9)}, "stated": {(0, 0, 0)}}


def test_the_control_queue_orders_as_opendss() -> None:
    """Actions come out nearest first, all those due at that time together; a new action goes
    ahead of those queued at its time; a deleted one never comes out."""
    queue = ControlQueue()
    owners = [object() for _ in range(5)]
    handles = [queue.push(t, owners[k], 0) for k, t in enumerate([15.0, 30.0, 15.0, 5.0, 15.0])]  # type: ignore[arg-type]
    queue.delete(handles[4])
    assert [a.owner for a in queue.pop_nearest()] == [owners[3]]
    assert [a.owner for a in queue.pop_nearest()] == [owners[2], owners[0]]
    assert [a.owner for a in queue.pop_nearest()] == [owners[1]] and len(queue) == 0


def test_the_pandapower_reference_solver_does_not_settle() -> None:
    """solver: pandapower makes a bank one transformer at the mean of its taps: per-phase controls
    cannot settle on it, which settle, the scenario check and powerflow's default say."""
    grid = _grid("ieee13", solver="pandapower")
    with pytest.raises(FeederError, match="the pandapower reference solver makes each regulator bank one"):
        grid.settle(0.0, {})
    spec = GridSpec(feeder="ieee13", solver="pandapower", initial_controls="static")
    [(path, message)] = check_against_feeder(load_feeder("ieee13"), spec, [])
    assert path == "grid.initial_controls" and "use the exact solver" in message


@pytest.mark.slow
def test_powerflow_holds_the_controls_by_default_with_the_pandapower_solver(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["powerflow", "ieee13", "--solver", "pandapower", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["controls"] == "off"
    assert main(["powerflow", "ieee13", "--solver", "pandapower", "--controls", "static"]) == 2
    assert "cannot settle as OpenDSS's do" in capsys.readouterr().err


# ----------------------------------------------------------------------------- switch controls
def _with_switch(feeder: str, **control: Any) -> Feeder:
    model = load_feeder(feeder).model
    return feeder_from_model(dataclasses.replace(model, swtcontrols=[SwtControlModel(**control)]))


def test_a_switch_control_opens_its_line_before_the_regulators_act() -> None:
    """A SwtControl opening IEEE 13's switch 671-692 after 5 s acts in the first round, before the
    regulators (15 s): 692 and 675 lose supply (0 pu) and the regulators settle on what is left."""
    feeder = _with_switch("ieee13", name="s1", element="line.671692", action="open", state="closed", delay_s=5.0)
    grid = _grid(feeder)
    settled = grid.settle(0.0, {})
    assert settled.switches == {"671692": False}
    v = dict(zip(settled.solution.nodes.names, np.abs(settled.solution.v_v)))
    assert all(v[f"{bus}.{p}"] == 0.0 for bus in ("692", "675") for p in "abc")
    assert v["671.a"] > 0.9 * settled.solution.nodes.v_base_v[settled.solution.nodes.names.index("671.a")]
    assert dict(settled.taps) != {"reg1": (9, 6, 9)}  # a lighter feeder needs less boost


def test_a_locked_switch_control_does_not_operate() -> None:
    feeder = _with_switch("ieee13", name="s1", element="line.671692", action="open", locked=True, delay_s=5.0)
    settled = _grid(feeder).settle(0.0, {})
    assert settled.switches == {"671692": True} and dict(settled.taps) == {"reg1": (9, 6, 9)}


def test_a_control_openg2g_cannot_run_is_refused_by_name() -> None:
    """A SwtControl switching a transformer cannot settle: settle and the scenario check say so."""
    feeder = _with_switch("ieee13", name="s1", element="transformer.sub", action="open")
    why = "swtcontrol s1 switches 'transformer.sub'; openg2g operates switch controls on the feeder's lines"
    with pytest.raises(FeederError, match=f"the controls cannot settle \\(static mode\\): {why}"):
        _grid(feeder).settle(0.0, {})
    problems = check_against_feeder(feeder, GridSpec(feeder="ieee13", initial_controls="static"), [])
    assert problems == [("grid.initial_controls", f"static on feeder ieee13: {why}")]
    assert check_against_feeder(feeder, GridSpec(feeder="ieee13"), []) == []


# ----------------------------------------------------------------------------- against OpenDSS
MESH = """clear
new circuit.mesh basekv=12.47 pu=1.0 phases=3 mvasc3=300 mvasc1=250
new linecode.oh nphases=3 r1=0.3 x1=0.6 r0=0.6 x0=1.8 c1=10 c0=4 units=km
new line.f1 bus1=sourcebus bus2=a1 linecode=oh length=2 units=km
new line.a12 bus1=a1 bus2=a2 linecode=oh length=3 units=km
new line.f2 bus1=sourcebus bus2=b1 linecode=oh length=1.5 units=km
new line.b12 bus1=b1 bus2=b2 linecode=oh length=2.5 units=km
new transformer.reg3 phases=3 windings=2 buses=[sourcebus c0] conns=[wye wye] kvs=[12.47 12.47] kvas=[10000 10000] xhl=0.01 %loadloss=0.001 ppm=0
new line.f3 bus1=c0 bus2=c1 linecode=oh length=4 units=km
new line.c12 bus1=c1 bus2=c2 linecode=oh length=3 units=km
new line.tie_ab bus1=a2 bus2=b2 phases=3 switch=yes
new line.tie_bc bus1=b2 bus2=c2 phases=3 switch=yes
new line.tie_ca bus1=c2 bus2=a2 phases=3 switch=yes
new load.a1 bus1=a1.1 phases=1 kv=7.2 kw=800 kvar=250
new load.a2 bus1=a2 phases=3 kv=12.47 kw=1500 kvar=500
new load.b1 bus1=b1.2 phases=1 kv=7.2 kw=600 kvar=150
new load.b2 bus1=b2 phases=3 kv=12.47 kw=1200 kvar=400
new load.c1 bus1=c1.3 phases=1 kv=7.2 kw=900 kvar=300
new load.c2 bus1=c2 phases=3 kv=12.47 kw=2000 kvar=700
new regcontrol.r3 transformer=reg3 winding=2 vreg=122 band=2 ptratio=60 ptphase=3 delay=15
new swtcontrol.s_ab switchedobj=line.tie_ab normal=open delay=5
new swtcontrol.s_bc switchedobj=line.tie_bc action=open lock=yes
new swtcontrol.s_ca switchedobj=line.tie_ca state=open action=close delay=30
set voltagebases=[12.47]
calcvoltagebases
"""
"""Three feeders out of one substation (the third behind a ganged regulator) tied at their ends:
``tie_ab`` closed, to be opened after 5 s by its control (``normal=open``); ``tie_bc`` closed and
locked; ``tie_ca`` opened by its control's ``state=open`` and to be closed after 30 s. As the file
leaves it the network is meshed through ``tie_ab`` and ``tie_bc``."""


@pytest.mark.slow
def test_a_meshed_network_settles_its_tie_switches_as_opendss(tmp_path: Path) -> None:
    """OpenDSS's Solve opens tie_ab (5 s), moves the regulator (15 s), closes tie_ca (30 s) and
    moves the regulator again: 7 control iterations. openg2g reads the switch controls and settles
    the same way, the same final states, every node within 1e-8 pu; at controlmode=off both solve
    the meshed network the file leaves, which is far from what OpenDSS's Solve gives."""
    master = tmp_path / "mesh.dss"
    master.write_text(MESH)
    model = read_opendss(master)
    assert [(s.name, s.action, s.state, s.locked, s.delay_s) for s in model.swtcontrols] == [
        ("s_ab", "open", "closed", False, 5.0),
        ("s_bc", "open", "closed", True, 120.0),
        ("s_ca", "close", "open", False, 30.0),
    ]
    feeder = feeder_from_model(model)
    static = crosscheck(master, feeder=feeder)
    assert (static.iterations, static.opendss_iterations, static.differences) == (7, 7, ())
    assert static.max_dv_pu < 1e-8 and dict(static.taps) == {"reg3": (5, 5, 5)}
    off = crosscheck(master, feeder=feeder, controls="off")
    assert off.max_dv_pu < 1e-8 and off.iterations is None
    grid = _grid(feeder)
    held = grid.node_solution(0.0, {})
    settled = grid.settle(0.0, {})
    assert settled.switches == {"tie_ab": False, "tie_bc": True, "tie_ca": True}
    gap = np.abs(held.v_v - settled.solution.v_v) / held.nodes.v_base_v
    assert gap.max() > 1e-2  # what a comparison at controlmode=off does not see


@pytest.mark.slow
def test_feeders_check_says_at_which_state_it_compares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``openg2g feeders check`` compares at the state OpenDSS's Solve reaches, and says so, with both
    codes' control iterations and whether their final states agree; ``--controls off`` at the file's."""
    master = tmp_path / "mesh.dss"
    master.write_text(MESH)
    assert main(["feeders", "check", str(master)]) == 0
    out = capsys.readouterr().out
    assert "at OpenDSS's default solve (controlmode=static): the controls settled by each" in out
    assert "settled in 7 control iteration(s) (OpenDSS: 7); taps reg3=[5, 5, 5]; the same taps, capacitor" in out
    assert main(["feeders", "check", str(master), "--controls", "off"]) == 0
    out = capsys.readouterr().out
    assert "at the file's taps, capacitor and switch states (controlmode=off)" in out and "settled" not in out


@pytest.mark.slow
def test_a_switch_control_on_a_line_open_at_its_other_end_is_refused(tmp_path: Path) -> None:
    master = tmp_path / "mesh.dss"
    master.write_text(MESH + "open line.tie_bc 2\n")
    with pytest.raises(FeederError, match="swtcontrol.s_bc: it switches terminal 1 of line.tie_bc, which the file"):
        read_opendss(master)


def _reg(**props: Any) -> str:
    return Control("regcontrol", "r1", {"transformer": "reg1", "winding": 2, "ptratio": 60, **props}).command() + "\n"


CASES = {
    # 400 kW: 119.3 V, in band 119-121 V; 2200 kW: 116.2 V, four steps below
    "in_band": ONE_PHASE.replace("kw=-1500", "kw=0") + _reg(vreg=120, band=2),
    "four_steps": ONE_PHASE.replace("kw=-1500", "kw=0").replace("kw=400", "kw=2200") + _reg(vreg=120, band=2),
    # 10 steps asked: OpenDSS's 70 % of 10 x 0.00625 (one bit above) is 7, not 6
    "ten_steps": ONE_PHASE.replace("kw=-1500", "kw=0").replace("kw=400", "kw=2200") + _reg(vreg=122.5, band=1),
    "maxtapchange_1": ONE_PHASE.replace("kw=-1500", "kw=0").replace("kw=400", "kw=2200")
    + _reg(vreg=122, band=1, maxtapchange=1),
    "maxtapchange_0": ONE_PHASE.replace("kw=400", "kw=2200") + _reg(vreg=122, band=1, maxtapchange=0),
    "ldc": ONE_PHASE.replace("kw=-1500", "kw=0").replace("kw=400", "kw=2200")
    + _reg(vreg=121, band=2, r=3, x=6, ctprim=100),
    "inverse_time": ONE_PHASE.replace("kw=-1500", "kw=0").replace("kw=400", "kw=2200")
    + _reg(vreg=121, band=2, inversetime=True),
    # generation turns the flow round: the control reverses after revdelay (11 control iterations)
    "reverse": ONE_PHASE
    + _reg(vreg=119, band=2, reversible=True, revvreg=124, revband=2, revthreshold=100, revdelay=20),
    # the regulated bus is the load bus, one line away (OpenDSS's bus=): no compensation there
    "remote_bus": ONE_PHASE.replace("kw=-1500", "kw=0").replace("kw=400", "kw=2200")
    + _reg(vreg=120, band=2, bus="c.1"),
    "ganged_max": THREE_PHASE
    + Control(
        "regcontrol", "r3", {"transformer": "reg3", "winding": 2, "vreg": 122, "band": 2, "ptphase": "max"}
    ).command(),
    # a capacitor that closes (15 s) in the first round, the regulator in front of it (30 s) in the next two
    "capacitor_first": LINE.replace("kw=1000", "kw=6000")
    .replace("kvar=1200", "kvar=1200 states=[0]")
    .replace(
        "new line.feed bus1=sourcebus.1.2.3",
        "new transformer.reg1 phases=3 windings=2 buses=[sourcebus.1.2.3 s0.1.2.3] conns=[wye wye] "
        "kvs=[12.47 12.47] kvas=[20000 20000] xhl=0.01 ppm=0\nnew line.feed bus1=s0.1.2.3",
    )
    + _reg(vreg=126, band=2, delay=30)
    + Control(
        "capcontrol",
        "cc1",
        {"type": "voltage", "capacitor": "c1", "element": "line.l2", "terminal": 2, "ptratio": 60}
        | {"onsetting": 120, "offsetting": 124, "delay": 15},
    ).command(),
}
"""Small circuits with the control settings static mode treats differently."""


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_small_circuits_settle_as_opendss(tmp_path: Path, case: str) -> None:
    """The same final taps and capacitor states as OpenDSS's Solve, in as many control iterations
    (both allowed 50), every node within 1e-8 pu."""
    master = tmp_path / "case.dss"
    master.write_text(CASES[case])
    check = crosscheck(master, max_control_iterations=50)
    assert check.differences == () and check.iterations == check.opendss_iterations, check
    assert check.max_dv_pu < 1e-8, check


@pytest.mark.slow
def test_a_hunting_regulator_settles_in_neither(tmp_path: Path) -> None:
    """Line-drop compensation asks for a tap that puts the regulator's own side over vlimit, and
    vlimit for one back in band: the control hunts in OpenDSS and in openg2g, and both say so."""
    master = tmp_path / "case.dss"
    master.write_text(CASES["ldc"].replace("ctprim=100", "ctprim=100 vlimit=122"))
    with pytest.raises(FeederError, match="OpenDSS's controls do not settle in 50 control iterations"):
        crosscheck(master, max_control_iterations=50)
    with pytest.raises(
        SimulationError, match=r"not settled in 50 control iterations .* the last round: regcontrol r1 to tap"
    ):
        _grid(feeder_from_model(read_opendss(master))).settle(0.0, {}, 50)

"""Automatic controls beyond OpenDSS's timing (tests/grid/test_*control_time_mode.py): what is
refused and how, capacitor switching in place, the capacitor states a run reports."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

from openg2g.core.commands import SetCapacitor, SetRegulatorMode
from openg2g.core.errors import CommandError, FeederError, ScenarioError, SimulationError
from openg2g.grid.feeder import backend
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.branches import TerminalMeter
from openg2g.grid.feeder.build import SOURCES
from openg2g.grid.feeder.capacitors import CapacitorControls
from openg2g.grid.feeder.checks import check_against_feeder
from openg2g.grid.feeder.library import Feeder, feeder_from_model, load_feeder
from openg2g.grid.feeder.model import CapControlModel, FeederModel, RegControlModel
from openg2g.grid.feeder.network import node_index
from openg2g.grid.feeder.opendss import read_opendss
from openg2g.scenario.schema import GridSpec, RegulatorSpec
from tests.grid.circuits import LINE, ONE_PHASE, THREE_PHASE
from tests.grid.conftest import TEST_TAPS, opendss_solve, shared_data
from tests.grid.time_mode import Case, Control, run_opendss

VOLTAGE = CapControlModel(
    name="cc1", capacitor="c1", kind="voltage", element="line.l2", terminal=2, on_setting=118, off_setting=123
)


@pytest.fixture(scope="module")
def line_model(tmp_path_factory: pytest.TempPathFactory) -> FeederModel:
    """The one-line case read by OpenDSS once per module (a read takes about 0.7 s)."""
    return Case(LINE, []).model(tmp_path_factory.mktemp("line"))


def _line_feeder(model: FeederModel, *controls: CapControlModel) -> Feeder:
    return feeder_from_model(dataclasses.replace(model, capcontrols=list(controls)))


def _grid(feeder: Feeder, **spec: object) -> FeederGrid:
    return FeederGrid(feeder, GridSpec(feeder="case", **spec), [], Path("."))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"kind": "time"}, "type 'time' is not modelled (types: voltage, current, kvar, pf)"),
        ({"kind": "follow"}, "type 'follow' is not modelled"),
        ({"element": "capacitor.c1"}, "watches 'capacitor.c1' terminal 2, not a line or transformer terminal"),
        ({"ptphase": 4}, "ptphase 4, but line.l2 terminal 2 has 3 phase conductor(s)"),
        ({"ctphase": "sum"}, "ctphase 'sum' (a conductor number, avg, max or min)"),
        ({"kind": "pf", "on_setting": 1.2}, "a pf control's settings lie in [-1, 1]"),
        ({"ptratio": 0.0}, "ptratio=0 (ratios must be > 0, times >= 0)"),
        ({"capacitor": "c9"}, "unknown capacitor 'c9'"),
    ],
)
def test_a_capcontrol_that_cannot_run_is_refused_by_name(line_model: FeederModel, change: dict, reason: str) -> None:
    feeder = _line_feeder(line_model, dataclasses.replace(VOLTAGE, **change))
    spec = GridSpec(feeder="case", capacitor_control="auto")
    [(path, message)] = check_against_feeder(feeder, spec, [])
    assert path == "grid.capacitor_control"
    assert message.startswith("auto on feeder case: capcontrol cc1: ") and reason in message
    with pytest.raises(ScenarioError, match="grid.capacitor_control"):
        _grid(feeder, capacitor_control="auto")
    with pytest.raises(FeederError, match="capcontrol cc1"):
        CapacitorControls(feeder.model, node_index(feeder.model))
    _grid(feeder)  # fixed capacitors: the controls are not run, so nothing is refused


def test_auto_capacitors_need_a_capcontrol() -> None:
    problems = check_against_feeder(load_feeder("ieee13"), GridSpec(feeder="ieee13", capacitor_control="auto"), [])
    assert problems == [("grid.capacitor_control", "auto, but feeder ieee13 has no CapControl to run (give fixed)")]


def test_a_regcontrol_that_cannot_run_is_refused_in_auto_mode() -> None:
    base = load_feeder("openg2g-ieee13")
    controls = [
        dataclasses.replace(rc, winding=1) if rc.transformer == "reg1b" else rc for rc in base.model.regcontrols
    ]
    feeder = dataclasses.replace(base, model=dataclasses.replace(base.model, regcontrols=controls), _net=None)
    auto = GridSpec(feeder="openg2g-ieee13", regulators={"reg1": RegulatorSpec(mode="auto")})
    reason = (
        "auto: regulator bank reg1: regcontrol creg1b monitors winding 1; only winding 2 (the tapped one) is modelled"
    )
    assert check_against_feeder(feeder, auto, []) == [("grid.regulators.reg1.mode", reason)]
    g = FeederGrid(feeder, GridSpec(feeder="openg2g-ieee13"), [], Path("."))
    with pytest.raises(CommandError, match=r"set_regulator_mode reg1: auto: regulator bank reg1: regcontrol creg1b"):
        g.apply(SetRegulatorMode("reg1", "auto"), 0.0)


@pytest.mark.parametrize("path", ["dense", "sparse"])
def test_capacitor_switching_in_place_equals_a_fresh_build(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """set_capacitor (and an automatic switching) updates the network in place, on either power-flow
    path; opening three banks and closing one that was open when the network was built gives what a
    backend built with those states from the start gives."""
    if path == "sparse":
        monkeypatch.setattr(backend, "SPARSE_MIN_NODES", 0)
    g = FeederGrid.from_spec(GridSpec(feeder="ieee123", capacitors={"c92c": False}), [], Path("."))
    g.solve(0.0, {}, 1.0)
    built = g._net
    for cap in ("c83", "c88a", "c90b"):
        g.apply(SetCapacitor(cap, False), 1.0)
    g.apply(SetCapacitor("c92c", True), 1.0)
    switched = g.solve(1.0, {}, 1.0)
    assert g._net is built  # updated, not rebuilt
    states = {"c83": False, "c88a": False, "c90b": False, "c92c": True}
    fresh = FeederGrid.from_spec(GridSpec(feeder="ieee123", capacitors=states), [], Path(".")).solve(1.0, {}, 1.0)
    np.testing.assert_allclose(switched.v_pu, fresh.v_pu, atol=1e-9)


def test_states_report_the_controlled_capacitors(line_model: FeederModel) -> None:
    feeder = _line_feeder(line_model, dataclasses.replace(VOLTAGE, delayoff_s=2.0))
    fixed = _grid(feeder)
    assert fixed.controlled_capacitors() == () and fixed.solve(1.0, {}, 1.0).capacitors == {}
    auto = _grid(feeder, capacitor_control="auto")
    assert auto.controlled_capacitors() == ("c1",) and not auto.can_batch()
    states = [auto.solve(float(t), {}, 1.0).capacitors for t in range(1, 5)]
    assert states == [{"c1": True}, {"c1": True}, {"c1": False}, {"c1": False}]  # high from 1 s, off 2 s later


def test_controls_that_never_settle_stop_the_run_as_in_opendss(tmp_path: Path) -> None:
    """On above the off setting with no delays: every control iteration switches the bank back;
    OpenDSS stops after its 10 control iterations (error 485), and so does a run."""
    props = {"type": "voltage", "capacitor": "c1", "element": "line.l2", "terminal": 2, "ptratio": 60}
    props |= {"onsetting": 125, "offsetting": 118, "delay": 0, "delayoff": 0, "deadtime": 0}
    case = Case(LINE, [Control("capcontrol", "cc1", props)], steps=1)
    g = _grid(feeder_from_model(case.model(tmp_path)), capacitor_control="auto")
    with pytest.raises(SimulationError, match=r"t=1.0 s, feeder case: automatic controls still act after 10 control"):
        g.solve(1.0, {}, 1.0)
    with pytest.raises(Exception, match="Max Control Iterations Exceeded"):
        run_opendss(case, tmp_path)


def test_control_settings_survive_the_json_round_trip(line_model: FeederModel) -> None:
    model = _line_feeder(line_model, dataclasses.replace(VOLTAGE, ctphase="avg", pctminkvar=30.0)).model
    regs = [RegControlModel(name="r", transformer="t", ptphase="max", tapdelay_s=1.5, reversible=True)]
    model = dataclasses.replace(model, regcontrols=regs)
    back = FeederModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert back.regcontrols == regs and back.capcontrols == model.capcontrols


def test_terminal_meters_read_what_opendss_reads() -> None:
    """The voltages, currents into the element and power a control reads at either terminal of
    every line and transformer of IEEE 13 equal OpenDSS's (``CktElement.Voltages``, ``Currents``,
    ``Powers``): voltages to 1e-6, currents and powers to 1e-4 of the terminal's largest, 1 mA at
    least (the two solutions' currents differ by up to 1e-5 relative, as tests/grid/test_branches.py
    measures)."""
    feeder = load_feeder("ieee13")
    taps = TEST_TAPS["ieee13"]
    grid = FeederGrid.from_spec(
        GridSpec(feeder="ieee13", regulators={b: RegulatorSpec(taps=t) for b, t in taps.items()}), [], Path(".")
    )
    solution = grid.node_solution(0.0, {})
    tr_taps = {
        name: 1.0 + step * feeder.regulators[bank].step_pu
        for bank, steps in taps.items()
        for (name, _), step in zip(feeder.bank_units[bank], steps)
    }
    dss = opendss_solve(shared_data() / SOURCES["ieee13"], tr_taps)
    elements = [f"line.{ln.name}" for ln in feeder.model.lines] + [
        f"transformer.{t.name}" for t in feeder.model.transformers
    ]
    for element in elements:
        dss.Circuit.SetActiveElement(element)
        n_cond = dss.CktElement.NumConductors()
        v_ref = np.array(dss.CktElement.Voltages()).view(complex)
        i_ref = np.array(dss.CktElement.Currents()).view(complex)
        s_ref = np.array(dss.CktElement.Powers()).view(complex) * 1000.0
        for terminal in (1, 2):
            meter = TerminalMeter(feeder.model, solution.nodes, element, terminal)
            k = len(meter.node)
            rows = slice((terminal - 1) * n_cond, (terminal - 1) * n_cond + k)
            tol_a = max(1e-4 * np.abs(i_ref[rows]).max(), 1e-3)  # 1 mA floor, as test_branches.py
            np.testing.assert_allclose(meter.voltages(solution.v_v), v_ref[rows], rtol=1e-6, err_msg=element)
            np.testing.assert_allclose(
                meter.currents(solution.v_v, solution.switching), i_ref[rows], atol=tol_a, err_msg=element
            )
            s_terminal = s_ref[(terminal - 1) * n_cond : terminal * n_cond].sum()
            assert meter.power_va(solution.v_v, solution.switching) == pytest.approx(
                s_terminal, rel=1e-4, abs=tol_a * np.abs(v_ref[rows]).sum()
            )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("control", "reason"),
    [
        ("new regcontrol.r1 transformer=reg1 winding=2 cogen=yes", "regcontrol.r1: Cogen=Yes is not supported"),
        ("new regcontrol.r1 transformer=reg1 winding=2 revneutral=yes", "RevNeutral=Yes is not supported"),
        ("new regcontrol.r1 transformer=reg1 winding=2 ldc_z=3", "LDC_Z (Beckwith line-drop compensation)"),
        (
            "new capcontrol.c1 capacitor=c1 element=line.out terminal=1 type=voltage vbus=c",
            "capcontrol.c1: VBus (a voltage override watching another bus) is not supported",
        ),
        (
            "new capcontrol.c1 capacitor=c1 element=line.out type=time",
            "capcontrol.c1: control type Time is not supported",
        ),
    ],
)
def test_control_settings_the_model_has_no_place_for_are_refused_when_read(
    tmp_path: Path, control: str, reason: str
) -> None:
    path = tmp_path / "case.dss"
    path.write_text(ONE_PHASE + "new capacitor.c1 bus1=c.1 phases=1 kv=7.2 kvar=300\n" + control + "\n")
    with pytest.raises(FeederError, match=re.escape(reason)):
        read_opendss(path)


def test_a_remote_regulated_bus_at_a_phase_it_does_not_sample_is_refused_in_auto_mode(tmp_path: Path) -> None:
    """OpenDSS samples one node of a remote regulated bus (bus=), as phase 1: a ptphase of 2 would
    read a buffer OpenDSS never fills."""
    path = tmp_path / "case.dss"
    path.write_text(THREE_PHASE + "new regcontrol.r1 transformer=reg3 winding=2 bus=c.2 ptphase=2\n")
    feeder = feeder_from_model(read_opendss(path))
    auto = GridSpec(feeder="case", regulators={"reg3": RegulatorSpec(mode="auto")})
    [(path, message)] = check_against_feeder(feeder, auto, [])
    assert path == "grid.regulators.reg3.mode"
    assert message == "auto: regulator bank reg3: regcontrol r1 regulates the remote bus c (OpenDSS's bus=) " + (
        "with ptphase 2: OpenDSS samples one node there, as phase 1"
    )

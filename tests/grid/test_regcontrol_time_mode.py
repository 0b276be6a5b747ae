"""Regulators in auto mode against OpenDSS's own time mode (``controlmode=time``, 1 s steps): the
same circuit, RegControl settings and load steps give the same tap at every second, and the same
voltages (tests/grid/time_mode.py runs both)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openg2g.core.commands import SetLoadScale
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.build import SOURCES
from openg2g.grid.feeder.library import load_feeder
from openg2g.scenario.schema import GridSpec, RegulatorSpec
from tests.grid.circuits import ONE_PHASE, THREE_PHASE
from tests.grid.conftest import shared_data
from tests.grid.time_mode import Case, Control, LoadStep, compare, times

pytest.importorskip("opendssdirect", reason="opendssdirect.py (test extra) is not installed")

REG: dict[str, Any] = {"transformer": "reg1", "winding": 2, "vreg": 120, "band": 2, "ptratio": 60}
NO_GEN = {1: [LoadStep("gen", 0.0)]}
DROP = {**NO_GEN, 10: [LoadStep("ld", 5.5)]}
"""The load steps from 400 to 2200 kW at 10 s: the regulated voltage falls from 119.3 V to 116.2 V
(120 V base), four tap steps (0.75 V each) below the band 119-121 V."""


def _one_phase(events: dict[int, list[LoadStep]], steps: int = 40, **settings: Any) -> Case:
    return Case(ONE_PHASE, [Control("regcontrol", "r1", {**REG, **settings})], events, steps)


def test_four_step_drop_recovers_in_opendss_time(tmp_path: Path) -> None:
    """First move 15 s (delay) after the drop, the next three every 2 s (tapdelay): back in band
    21 s after the drop, as OpenDSS (where one move per 15 s delay took 60 s)."""
    ours, _ = compare(_one_phase(DROP, delay=15, tapdelay=2), tmp_path)
    assert times(ours, "reg1") == [25.0, 27.0, 29.0, 31.0]
    assert ours[-1].taps == {"reg1": 4}


@pytest.mark.slow
def test_an_action_queued_after_a_move_outlives_a_return_to_band(tmp_path: Path) -> None:
    """OpenDSS cancels only the action a control armed when it goes back in band: the one queued
    for 29 s after the move at 27 s survives the light load at 28 s, and moves the tap at 29 s
    when the load is back, long before the 29 + 15 s the new arming asks for."""
    events = {**DROP, 28: [LoadStep("ld", 1.0)], 29: [LoadStep("ld", 5.5)]}
    ours, _ = compare(_one_phase(events, steps=60, delay=15, tapdelay=2), tmp_path)
    assert times(ours, "reg1") == [25.0, 27.0, 29.0, 31.0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("settings", "moves"),
    [
        ({"maxtapchange": 0}, []),  # 0 holds the tap
        ({"maxtapchange": 1}, [25.0, 27.0, 29.0, 31.0]),  # any other value: one step per action in time mode
        ({"delay": 0, "tapdelay": 0}, [10.0]),  # a tapdelay of 0 makes every step needed at once
        # inverse time: 3.85 V below vreg with a 2 V band, the 15 s delay shrinks 3.85 times
        ({"inversetime": True}, [14.0, 16.0, 18.0, 20.0]),
    ],
    ids=["maxtapchange0", "maxtapchange1", "no_delays", "inverse_time"],
)
def test_maxtapchange_tapdelay_and_inverse_time(tmp_path: Path, settings: dict[str, Any], moves: list[float]) -> None:
    ours, _ = compare(_one_phase(DROP, **settings), tmp_path)
    assert times(ours, "reg1") == moves


@pytest.mark.slow
def test_line_drop_compensation_and_vlimit(tmp_path: Path) -> None:
    """R and X compensate the drop to the load, so the control raises the tap until the
    regulator's own side passes vlimit (122 V); then it lowers one step after tapdelay, goes out
    of band low again and raises after delay: a 7 s cycle between taps 8 and 9, as in OpenDSS."""
    settings = {"vreg": 121, "r": 3, "x": 6, "ctprim": 100, "vlimit": 122, "delay": 5, "tapdelay": 2}
    ours, _ = compare(_one_phase(DROP, steps=60, **settings), tmp_path)
    moves = times(ours, "reg1")
    assert moves[:9] == [6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 22.0]  # up to tap 9
    assert moves[9:] == [24.0, 29.0, 31.0, 36.0, 38.0, 43.0, 45.0, 50.0, 52.0, 57.0, 59.0]
    assert {step.taps["reg1"] for step in ours[23:]} == {8, 9}


@pytest.mark.slow
def test_a_remote_regulated_bus_is_read_at_its_node(tmp_path: Path) -> None:
    """bus=c.1: the control regulates the load bus, one line past the regulator, as OpenDSS does
    (that node over ptratio, no line-drop compensation): after the load step it raises the tap
    further than a control watching its own winding, which is nearer the source."""
    ours, _ = compare(_one_phase(DROP, delay=15, tapdelay=2, bus="c.1"), tmp_path)
    (tmp_path / "own").mkdir()
    own, _ = compare(_one_phase(DROP, delay=15, tapdelay=2), tmp_path / "own")
    assert times(ours, "reg1") == [25.0, 27.0, 29.0, 31.0, 33.0, 35.0]
    assert ours[-1].taps["reg1"] == 6 > own[-1].taps["reg1"] == 4


@pytest.mark.slow
def test_reverse_power_regulates_the_other_side(tmp_path: Path) -> None:
    """Generation past the regulator lifts the voltage at 10 s (forward: two steps down, at 15 and
    17 s) and reverses the flow: after revdelay (20 s) the control turns round at 30 s and
    regulates the source side against revvreg (124 V) with revR/revX. The stiff source side stays
    near 120.7 V whatever the tap, so, as in OpenDSS, the reverse control runs the tap to its
    limit (-16) one step per tapdelay; the generation off at 60 s turns the control forward again
    at 80 s, and it raises the tap back into band."""
    events = {1: [LoadStep("gen", 0.0)], 10: [LoadStep("gen", 1.0)], 60: [LoadStep("gen", 0.0)]}
    settings = {
        "vreg": 119,
        "r": 1,
        "x": 2,
        "delay": 5,
        "tapdelay": 2,
        "reversible": True,
        "revvreg": 124,
        "revband": 2,
        "revr": 2,
        "revx": 4,
        "revthreshold": 100,
        "revdelay": 20,
    }
    ours, _ = compare(_one_phase(events, steps=120, **settings), tmp_path)
    moves = times(ours, "reg1")
    assert moves == [15.0, 17.0, *range(35, 62, 2), *range(81, 110, 2)]
    assert ours[60].taps["reg1"] == -16 and ours[-1].taps["reg1"] == -1


@pytest.mark.slow
@pytest.mark.parametrize(("ptphase", "tap"), [(1, 8), (3, 3), ("max", 1), ("min", 8)])
def test_ganged_regulator_watches_its_ptphase(tmp_path: Path, ptphase: int | str, tap: int) -> None:
    """One three-phase transformer with one tap: the control follows phase ``ptphase``, or the
    phase whose voltage is highest (max: b) or lowest (min: a) at each sample, and raises the
    common tap until that phase is in band."""
    control = Control(
        "regcontrol",
        "r3",
        {"transformer": "reg3", "winding": 2, "vreg": 122, "band": 2, "ptratio": 60, "ptphase": ptphase},
    )
    events = {20: [LoadStep("la", 1.8), LoadStep("lc", 0.2)]}
    ours, _ = compare(Case(THREE_PHASE, [control], events, 60), tmp_path)
    assert times(ours, "reg3") == [16.0 + 2 * k for k in range(tap)]  # low from 1 s: delay 15 s, tapdelay 2 s
    assert ours[-1].taps == {"reg3": tap}


@pytest.mark.parametrize("feeder", [pytest.param(f, marks=pytest.mark.slow) if f == "ieee8500" else f for f in SOURCES])
def test_bundled_feeders_regulate_as_opendss(feeder: str) -> None:
    """Every bundled feeder, all regulators in auto mode from tap 0 and its CapControls automatic,
    against its OpenDSS source in time mode: the same taps and capacitor states every second for
    90 s, through a 40% load step at 40 s (IEEE 34's two regulators in series, IEEE 37's
    open-delta pair, IEEE 8500's 12 single-phase regulators and 9 CapControls on the sparse path),
    voltages within 1e-6 pu."""
    dss = pytest.importorskip("opendssdirect")
    source = shared_data() / SOURCES[feeder]
    loaded = load_feeder(feeder)
    banks = loaded.regulators
    spec = GridSpec(
        feeder=feeder,
        regulators={b: RegulatorSpec(taps=[0] * len(i.phases), mode="auto") for b, i in banks.items()},
        capacitor_control="auto" if loaded.model.capcontrols else "fixed",
    )
    grid = FeederGrid.from_spec(spec, [], Path("."))
    units = grid.feeder.bank_units
    dss.Text.Command("clear")
    dss.Text.Command(f'compile "{source}"')
    for bank in units.values():
        for transformer, _ in bank:
            dss.Text.Command(f"transformer.{transformer}.wdg=2 tap=1")
    dss.Text.Command("set tolerance=1e-9 maxiterations=1000")
    dss.Text.Command("set mode=time controlmode=time stepsize=1s number=1")
    for t in range(1, 91):
        if t == 40:
            grid.apply(SetLoadScale(1.4), float(t))
            dss.Text.Command("set loadmult=1.4")
        state = grid.solve(float(t), {}, 1.0)
        dss.Solution.Solve()
        ref = {}
        for name, bank in units.items():
            steps = []
            for transformer, _ in bank:
                dss.Transformers.Name(transformer)
                dss.Transformers.Wdg(2)
                steps.append(round((dss.Transformers.Tap() - 1.0) / banks[name].step_pu))
            ref[name] = tuple(steps)
        assert dict(state.taps) == ref, f"{feeder} t={t} s"
        for cap, closed in state.capacitors.items():
            dss.Capacitors.Name(cap)
            assert closed == bool(dss.Capacitors.States()[0]), f"{feeder} t={t} s {cap}"
        v_ref = dict(zip(dss.Circuit.AllNodeNames(), dss.Circuit.AllBusMagPu()))
        for bus_phase, v in zip(state.bus_phases, state.v_pu):
            bus, phase = bus_phase.rsplit(".", 1)
            assert abs(v - v_ref[f"{bus}.{'abc'.index(phase) + 1}"]) < 1e-6, f"{feeder} t={t} s {bus_phase}"
    assert any(any(x) for x in state.taps.values())

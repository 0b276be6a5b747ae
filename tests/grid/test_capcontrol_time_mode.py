"""Capacitor controls (``grid.capacitor_control: auto``) against OpenDSS's own time mode
(``controlmode=time``, 1 s steps): the same circuit, CapControl settings, load steps and manual
switchings give the same capacitor states at every second, and the same voltages
(tests/grid/time_mode.py runs both)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from openg2g.cli.main import main
from tests.grid.circuits import LINE
from tests.grid.conftest import shared_data
from tests.grid.time_mode import Case, Control, LoadStep, Switch, compare, times

pytest.importorskip("opendssdirect", reason="opendssdirect.py (test extra) is not installed")

STATION = """clear
new circuit.case basekv=12.47 pu=1.0 angle=0 phases=3 mvasc3=200000 mvasc1=200000
new transformer.t1 phases=3 windings=2 buses=[sourcebus.1.2.3 b.1.2.3] conns=[wye wye] kvs=[12.47 4.16] kvas=[5000 5000] xhl=6 %loadloss=1
new line.l2 bus1=b.1.2.3 bus2=c.1.2.3 phases=3 r1=0.3 x1=0.6 r0=0.6 x0=1.8 c1=10 c0=5 length=1 units=km
new load.ld bus1=c.1.2.3 phases=3 kv=4.16 kw=3000 kvar=1500 model=1 vminpu=0.7 vmaxpu=1.3
new capacitor.c1 bus1=c.1.2.3 phases=3 kv=4.16 kvar=600
set voltagebases=[12.47 4.16]
calcvoltagebases
"""
"""A station transformer (12.47/4.16 kV) feeding a load and a bank: 170 A on the high side, 509 A
on the low side at the file's load."""

LIGHT, HEAVY = LoadStep("ld", 1.0), LoadStep("ld", 6.0)


def _control(**props: Any) -> Control:
    base = {"capacitor": "c1", "element": "line.l2", "terminal": 2, "ptratio": 60}
    return Control("capcontrol", "cc1", {"type": props.pop("type"), **base, **props})


def test_voltage_control_delays_and_dead_time(tmp_path: Path) -> None:
    """On below 118 V, off above 123 V: off 5 s (delayoff) after the voltage rose, on again 10 s
    (delay) after it fell, but not within 30 s (deadtime) of the opening: closing then waits
    until 30 + 10 s after the opening."""
    control = _control(type="voltage", onsetting=118, offsetting=123, delay=10, delayoff=5, deadtime=30)
    events = {20: [HEAVY], 60: [LIGHT], 70: [HEAVY], 85: [LIGHT], 89: [HEAVY], 110: [LIGHT], 170: [HEAVY]}
    ours, _ = compare(Case(LINE, [control], events, 190), tmp_path)
    # high from 1 s: open at 6; low from 20 s: 14 s after the opening, close at 6 + 30 + 10 = 46;
    # open at 65, close at 65 + 40; open at 115; low at 170, 55 s after: close after the delay
    assert times(ours, "c1") == [6.0, 46.0, 65.0, 105.0, 115.0, 180.0]


@pytest.mark.slow
def test_voltage_override_of_a_kvar_control(tmp_path: Path) -> None:
    """A kvar control that keeps the bank in (on above 200 kvar, off below -2000 kvar) is
    overridden above vmax (123 V): the bank opens after delayoff however much reactive power
    flows, and closes below vmin (119 V) after delay."""
    control = _control(
        type="kvar",
        onsetting=200,
        offsetting=-2000,
        delay=4,
        delayoff=3,
        deadtime=0,
        voltoverride=True,
        vmin=119,
        vmax=123,
    )
    events = {30: [HEAVY], 60: [LIGHT]}
    ours, _ = compare(Case(LINE, [control], events, 90), tmp_path)
    assert times(ours, "c1") == [4.0, 34.0, 63.0]


@pytest.mark.slow
@pytest.mark.parametrize(("ctphase", "opens"), [(1, True), (2, True), ("max", False), ("avg", False)])
def test_current_control_reads_the_ct_as_opendss(tmp_path: Path, ctphase: int | str, opens: bool) -> None:
    """Off below 300 A on the transformer's low side (509 A flow there): OpenDSS reads a
    numbered CT phase on the element's first terminal whatever the terminal (170 A on the high
    side: it opens), and avg/max on the terminal named (it stays in)."""
    control = Control(
        "capcontrol",
        "cc1",
        {
            "type": "current",
            "capacitor": "c1",
            "element": "transformer.t1",
            "terminal": 2,
            "ctratio": 1,
            "onsetting": 1000,
            "offsetting": 300,
            "ctphase": ctphase,
            "delay": 2,
            "delayoff": 2,
        },
    )
    ours, _ = compare(Case(STATION, [control], {}, 20), tmp_path)
    assert times(ours, "c1") == ([3.0] if opens else [])


@pytest.mark.slow
def test_power_factor_control(tmp_path: Path) -> None:
    """Watching the power into the line at its source end: on below 0.9 lagging while the reactive
    power exceeds half the bank's kvar (pctminkvar 50), off above 0.98 leading (-0.98, 1.02 on
    OpenDSS's 0..2 scale). At 200 kW the bank makes the flow leading (it opens); at 6000 kW without
    it the power factor is 0.89 lagging (it closes)."""
    control = _control(type="pf", terminal=1, onsetting=0.9, offsetting=-0.98, delay=5, delayoff=5, deadtime=0)
    events = {1: [LoadStep("ld", 0.2)], 20: [HEAVY], 50: [LoadStep("ld", 0.2)]}
    ours, _ = compare(Case(LINE, [control], events, 80), tmp_path)
    assert times(ours, "c1") == [6.0, 25.0, 55.0]


@pytest.mark.slow
def test_manual_switching_under_automatic_control(tmp_path: Path) -> None:
    """A bank opened by hand (set_capacitor, a script in OpenDSS) while its voltage control wants
    it in is closed again by the control after its delay; no dead time runs from a manual opening."""
    control = _control(type="voltage", onsetting=118, offsetting=126, delay=10, delayoff=5, deadtime=300)
    events = {5: [HEAVY], 20: [Switch("c1", False)]}
    ours, _ = compare(Case(LINE, [control], events, 40), tmp_path)
    assert times(ours, "c1") == [20.0, 30.0]


@pytest.mark.slow
def test_a_run_on_epri_ckt7_switches_its_capacitors_as_opendss(tmp_path: Path) -> None:
    """End to end: ``openg2g run`` on a scenario whose feeder is EPRI's ckt7 master file (1255
    buses, two voltage CapControls, read by the engine-based reader) with ``capacitor_control:
    auto`` and the load scaled to 0.3 at 10 s and 1.8 at 40 s. The grid table's ``cap_<name>``
    columns equal OpenDSS's capacitor states in time mode with the same steps at every second: both
    banks open at 25 s (15 s delayoff after the light load), and stay open under the heavy load
    (the 300 s dead time)."""
    dss = pytest.importorskip("opendssdirect")
    master = shared_data() / "opendss-test-cases" / "EPRITestCircuits" / "ckt7" / "Master_ckt7.dss"
    steps = {10: 0.3, 40: 1.8}
    scenario = {
        "name": "ckt7_capcontrols",
        "duration_s": 60,
        "periods": {"datacenter_s": 1, "grid_s": 1, "control_s": 1},
        "grid": {"feeder": str(master), "capacitor_control": "auto"},
        "datacenters": [
            {
                "name": "dc1",
                "bus": "318405",
                "base_load_kw_per_phase": 10,
                "models": [{"model": "Llama-3.1-8B", "gpus_per_replica": 1, "replicas": 1, "batch_size": 8}],
            }
        ],
        "events": [{"t_s": t, "command": "set_load_scale", "scale": x} for t, x in steps.items()],
        "outputs": {"plots": False},
    }
    path = tmp_path / "ckt7.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert main(["run", str(path), "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    table = pq.read_table(tmp_path / "run" / "grid").to_pydict()
    caps = ("cp-nr-613", "cp-85w-900")
    ours = [tuple(table[f"cap_{c}"][i] for c in caps) for i in range(len(table["t_s"]))]
    dss.Text.Command("clear")
    dss.Text.Command(f'compile "{master}"')
    dss.Text.Command("set tolerance=1e-9 maxiterations=1000")
    dss.Text.Command("set mode=time controlmode=time stepsize=1s number=1")
    ref = []
    for t in table["t_s"]:
        if int(t) in steps:
            dss.Text.Command(f"set loadmult={steps[int(t)]}")
        dss.Solution.Solve()
        states = []
        for c in caps:
            dss.Capacitors.Name(c)
            states.append(bool(dss.Capacitors.States()[0]))
        ref.append(tuple(states))
    assert table["t_s"] == [float(t) for t in range(1, 61)]
    assert ours == ref
    assert ours[23] == (True, True) and ours[24:] == [(False, False)] * 36

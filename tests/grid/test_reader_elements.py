"""Elements of the files users bring that the reader takes, each against OpenDSS's own solution
of a small circuit written here: storage elements charging, discharging and idling (and outside
their voltage band), constant-impedance generation, a current source, an autotransformer, and
single-phase circuits with their single-phase source."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from openg2g.grid.config import GridSpec
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.crosscheck import crosscheck
from openg2g.grid.feeder.library import feeder_from_model
from openg2g.grid.feeder.opendss import read_opendss

HEAD = """\
Clear
New Circuit.t basekv=12.47 pu=1.0 bus1=src MVAsc3=200 MVAsc1=180
New Line.l1 bus1=src bus2=b phases=3 r1=0.5 x1=1.2 r0=1.5 x0=3.6 c1=0 c0=0 length=3 units=km
New Load.l bus1=b phases=3 kV=12.47 kW=2000 kvar=800 model=1
"""

TAIL = """\
Set VoltageBases=[12.47, 7.2]
CalcVoltageBases
Solve
"""

STORAGE = """\
New Storage.dis bus1=b phases=3 kV=12.47 kWrated=500 kWhrated=2000 %stored=80 state=discharging %discharge=60
~ pf=0.95 kvarMax=200 kvarMaxAbs=200 vminpu=0.99
New Storage.chg bus1=b.2 phases=1 kV=7.2 kWrated=100 kWhrated=400 %stored=30 state=charging %charge=50
New Storage.idle bus1=b phases=3 kV=12.47 kWrated=300 kWhrated=600 state=idling %idlingkW=2 conn=delta
New Storage.full bus1=b phases=3 kV=12.47 kWrated=300 kWhrated=600 %stored=100 state=charging
New Storage.z bus1=b phases=3 kV=12.47 kWrated=200 kWhrated=800 %stored=50 state=discharging %discharge=100 model=2
"""
"""Storage elements: discharging at 60 % with pf 0.95 below its band (b sits near 0.97 pu, under
its vminpu 0.99, so OpenDSS makes it the admittance that delivers it at 0.99 pu), charging on one
phase at 50 %, idling in delta (its 2 % idling losses drawn), asked to charge when full (OpenDSS
idles it), and of model 2 (constant impedance)."""


def _write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.dss"
    path.write_text(body)
    return path


def test_storage_elements_are_what_opendss_makes_of_their_state(tmp_path: Path) -> None:
    path = _write(tmp_path, "storage", HEAD + STORAGE + TAIL)
    model = read_opendss(path)
    out = {g.name: (g.kw, g.kvar, g.vminpu, g.vmaxpu, g.conn) for g in model.generators}
    q_dis = 300.0 * math.tan(math.acos(0.95))
    assert out["storage.dis"][0] == pytest.approx(300.0) and out["storage.dis"][1] == pytest.approx(q_dis, rel=1e-9)
    assert out["storage.dis"][2:4] == (0.99, 1.1)
    assert out["storage.chg"][:2] == (-50.0, 0.0)
    assert out["storage.idle"][:2] == (-6.0, 0.0) and out["storage.idle"][4] == "delta"
    assert out["storage.full"][:2] == (-3.0, 0.0)  # idling: 1 % of its rating in losses
    assert out["storage.z"][:4] == (200.0, 0.0, 1.0, 1.0)
    check = crosscheck(path, feeder=feeder_from_model(model))
    assert check.max_dv_pu < 1e-8, check


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "body"),
    [
        (
            "model_2",
            (
                "New Generator.gz bus1=b phases=3 kV=12.47 kW=400 kvar=100 model=2\n"
                "New PVSystem.pvz bus1=b phases=3 kV=12.47 pmpp=200 kva=220 irradiance=1 model=2\n"
            ),
        ),
        ("isource", "New Isource.i1 bus1=b phases=3 amps=20 angle=-30\n"),
        (
            "autotrans",
            (
                "New AutoTrans.at1 buses=[b c] kVs=[12.47 7.2] kVAs=[2000 2000]\n"
                "New Load.lc bus1=c phases=3 kV=7.2 kW=500 kvar=100 model=1\n"
            ),
        ),
    ],
)
def test_every_node_matches_opendss_with(name: str, body: str, tmp_path: Path) -> None:
    """Constant-impedance generation (generator and PV model 2), a current source (its Norton
    current, no admittance), an autotransformer (its series winding's ends on both buses)."""
    check = crosscheck(_write(tmp_path, name, HEAD + body + TAIL))
    assert check.max_dv_pu < 1e-8, check


ONE_PHASE = """\
Clear
New Circuit.one phases=1 basekv=7.2 bus1=src.{n} MVAsc1=50
New Line.l1 bus1=src.{n} bus2=a.{n} phases=1 r1=0.4 x1=0.8 r0=0.4 x0=0.8 c1=0 c0=0 length=2 units=km
New Line.l2 bus1=a.{n} bus2=b.{n} phases=1 r1=0.4 x1=0.8 r0=0.4 x0=0.8 c1=0 c0=0 length=2 units=km
New Load.l bus1=b.{n} phases=1 kV=7.2 kW=400 kvar=150 model=1
New Load.z bus1=a.{n} phases=1 kV=7.2 kW=200 kvar=50 model=2
Set VoltageBases=[12.47]
CalcVoltageBases
Solve
"""
"""A single-phase circuit on node ``n``: its source one phase to ground, 7.2 kV across it."""


@pytest.mark.parametrize("node", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_a_single_phase_circuit_matches_opendss(node: int, tmp_path: Path) -> None:
    path = _write(tmp_path, f"one{node}", ONE_PHASE.format(n=node))
    model = read_opendss(path)
    phase = "abc"[node - 1]
    assert model.source.phase == phase and model.source.base_kv == 7.2
    assert set(model.bus_phases.values()) == {(phase,)}
    check = crosscheck(path, feeder=feeder_from_model(model))
    assert check.max_dv_pu < 1e-8, check
    # the source's power is on its phase, 0 on the others; what it delivers, less the losses, is the loads'
    grid = FeederGrid(feeder_from_model(model), GridSpec(feeder=str(path)), [], tmp_path)
    state = grid.solve(0.0, {}, 1.0)
    others = [k for k in range(3) if k != node - 1]
    assert np.all(state.p_sub_w[others] == 0.0) and np.all(state.q_sub_var[others] == 0.0)
    v = dict(zip(state.bus_phases, state.v_pu))
    assert 0.95 < min(v.values())
    v_z = v[f"a.{phase}"] * 12.47 / math.sqrt(3.0) / 7.2  # the bus base is 12.47 kV's, the load's 7.2 kV
    p_loads = 400e3 + 200e3 * v_z**2  # model 1 in its band, model 2 at its voltage
    assert state.p_sub_w[node - 1] - state.losses_w == pytest.approx(p_loads, rel=1e-9)

"""``load_model: opendss`` (OpenDSS load model 1 with its 0.95-1.05 pu band) and ``source_pu``
against OpenDSS itself, at an operating point that puts the datacenter bus below 0.95 pu and a PV
bus above 1.05 pu, where constant power and model 1 differ."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq

from openg2g.core.state import DatacenterState
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.build import SOURCES
from openg2g.scenario.schema import ExtraLoadSpec, GridSpec, ModelSpec, PVSpec, RegulatorSpec, Scenario, SiteSpec
from tests.grid.conftest import opendss_voltages, shared_data

PF_DC = 0.95
LOAD_KW_PER_PHASE = 10.0
PF_LOAD = 0.96


@dataclass(frozen=True)
class Case:
    """An operating point: datacenter and PV power per phase (kW), regulator taps."""

    site_kw: float
    pv_kw: float
    taps: tuple[int, int, int]


CASES = {
    "under": Case(site_kw=2200.0, pv_kw=100.0, taps=(14, 6, 15)),  # 671 at 0.91-0.93 pu
    "over": Case(site_kw=300.0, pv_kw=2500.0, taps=(16, 6, 17)),  # 675 up to 1.13 pu
}


def _grid(case: Case, load_model: str) -> FeederGrid:
    site = SiteSpec(
        name="dc",
        bus="671",
        power_factor=PF_DC,
        load_model=load_model,
        models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)],
    )
    spec = GridSpec(
        feeder="openg2g-ieee13",
        source_pu=1.0,
        regulators={"reg1": RegulatorSpec(taps=list(case.taps), max_tap=17)},
        pv=[PVSpec(name="pv", bus="675", kw=3 * case.pv_kw, load_model=load_model)],
        extra_loads=[
            ExtraLoadSpec(
                name="ld", bus="680", kw_per_phase=LOAD_KW_PER_PHASE, power_factor=PF_LOAD, load_model=load_model
            )
        ],
    )
    return FeederGrid.from_spec(spec, [site], Path("."))


def _solve(case: Case, load_model: str) -> dict[str, float]:
    grid = _grid(case, load_model)
    p = np.full(3, case.site_kw * 1000.0)
    state = grid.solve(0.0, {"dc": DatacenterState("dc", 0.0, p, p * math.tan(math.acos(PF_DC)), {})}, 0.1)
    return dict(zip(state.bus_phases, state.v_pu))


def _reference(case: Case) -> dict[str, float]:
    q_dc = case.site_kw * math.tan(math.acos(PF_DC))
    q_ld = LOAD_KW_PER_PHASE * math.tan(math.acos(PF_LOAD))
    loads = tuple(
        row
        for ph in "abc"
        for row in (
            ("671", ph, case.site_kw, q_dc),
            ("675", ph, -case.pv_kw, 0.0),
            ("680", ph, LOAD_KW_PER_PHASE, q_ld),
        )
    )
    feeder = _grid(case, "opendss").feeder
    units = feeder.bank_units["reg1"]
    taps = {t: 1.0 + tap * feeder.regulators["reg1"].step_pu for (t, _), tap in zip(units, case.taps)}
    return opendss_voltages(shared_data() / SOURCES["openg2g-ieee13"], taps, model1_loads=loads, source_pu=1.0)


@pytest.fixture(scope="module", params=list(CASES))
def case(request: pytest.FixtureRequest) -> tuple[Case, dict[str, float]]:
    c = CASES[request.param]
    return c, _reference(c)


def test_operating_points_leave_the_band() -> None:
    """The cases exercise both fallbacks: 671 below 0.95 pu, 675 above 1.05 pu."""
    assert max(_reference(CASES["under"])[f"671.{p}"] for p in "abc") < 0.95
    assert min(_reference(CASES["over"])[f"675.{p}"] for p in "ac") > 1.05


def test_opendss_load_model_matches_opendss(case: tuple[Case, dict[str, float]]) -> None:
    c, reference = case
    ours = _solve(c, "opendss")
    worst = max(abs(v - reference[bp]) for bp, v in ours.items())
    assert worst < 1e-5


def test_constant_power_differs_outside_the_band(case: tuple[Case, dict[str, float]]) -> None:
    """Constant power draws (or injects) its full power outside the band, model 1 does not:
    the two conventions are 0.02 pu apart at these operating points."""
    c, reference = case
    ours = _solve(c, "constant_power")
    assert max(abs(v - reference[bp]) for bp, v in ours.items()) > 0.01


LINE = """\
New Circuit.two basekv=12.47 pu=1.0 bus1=src r1=0 x1=1e-6 r0=0 x0=1e-6
New Line.l1 Bus1=src Bus2=b2 phases=3 r1=0.8 x1=1.6 r0=0.8 x0=1.6 c1=0 c0=0 length=1
Set VoltageBases=[12.47]
"""


def _study_convention(extra: dict | None = None) -> Scenario:
    site = {"name": "dc", "bus": "b2", "power_factor": PF_DC, **(extra or {})}
    site["models"] = [{"model": "m", "gpus_per_replica": 1, "replicas": 1, "batch_size": 1}]
    return Scenario.model_validate(
        {
            "name": "line",
            "duration_s": 1,
            "grid": {
                "feeder": "line.dss",
                "load_convention": "opendss",
                # at the stiff source, within their band: their 1 kW per phase cancel
                "pv": [{"name": "pv", "bus": "src", "kw": 3, "power_factor": 1.0}],
                "extra_loads": [{"name": "ld", "bus": "src", "kw_per_phase": 1, "power_factor": 1.0}],
            },
            "datacenters": [site],
        }
    )


def test_load_convention_opendss_makes_a_site_below_vminpu_draw_less(tmp_path: Path) -> None:
    """``grid.load_convention: opendss`` on a site that names no load model: 3 MW + 1 Mvar per
    phase behind a 0.8 + 1.6j ohm line sag below 0.95 pu. OpenDSS model 1 there draws the current
    interpolated linearly in |V| between its nominal admittance at Vlowpu 0.5 (I = Yeq 0.5) and
    the admittance that draws S0 at 0.95 pu (I = Yeq / 0.95): S(v) = S0 v (0.5 + (v - 0.5)
    (1 / 0.95 - 0.5) / 0.45), about S0 v^2 / 0.95^2 near the band (0.932 S0 against 0.935 at 0.919
    pu). The bus voltage solves |v + Z_line conj(S(v)) / v| = 1 (per unit of 7.2 kV, angle of v 0)."""
    sc = _study_convention()
    assert [e.load_model for e in (*sc.datacenters, *sc.grid.pv, *sc.grid.extra_loads)] == ["opendss"] * 3
    (tmp_path / "line.dss").write_text(LINE)
    grid = FeederGrid.from_spec(sc.grid, sc.datacenters, tmp_path)
    s0 = 3e6 + 1e6j
    state = grid.solve(0.0, {"dc": DatacenterState("dc", 0.0, np.full(3, s0.real), np.full(3, s0.imag), {})}, 0.1)
    v_ph = 12.47e3 / math.sqrt(3)

    def drawn(v: float) -> complex:
        return s0 * v * (0.5 + (v - 0.5) * (1 / 0.95 - 0.5) / 0.45)

    v = brentq(lambda v: abs(v * v_ph + (0.8 + 1.6j) * np.conj(drawn(v)) / (v * v_ph)) - v_ph, 0.6, 0.95)
    assert state.voltage("b2.a") == pytest.approx(v, abs=1e-6)
    assert state.p_sub_w.sum() - state.losses_w == pytest.approx(3 * drawn(v).real, rel=1e-6)
    assert drawn(v).real / s0.real == pytest.approx(0.9317, abs=1e-4)


def test_load_convention_opendss_refuses_an_element_that_says_constant_power() -> None:
    with pytest.raises(ValueError, match=r"datacenters\.0\.load_model is 'constant_power'"):
        _study_convention({"load_model": "constant_power"})

"""Voltage collapse on IEEE 123 with a pf 0.95 datacenter at bus 300 (file taps): OpenDSS
solves 4.8 MW (near the nose of the P-V curve, 0.620 pu at 300.a) and stops converging just
above. Past the nose the equations still have low-voltage-branch solutions; the backend must
report a collapse (time, bus, load) instead of one of them, and must not warm-start from one:
after the load comes back down, the voltages are OpenDSS's again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from openg2g.core.errors import PowerFlowError
from openg2g.core.state import DatacenterState, GridState
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.build import SOURCES
from openg2g.scenario.schema import GridSpec, ModelSpec, SiteSpec
from tests.grid.conftest import opendss_voltages, shared_data

TOL_PU = 1e-6
PF = 0.95


def _grid(on_nonconvergence: str = "stop") -> FeederGrid:
    site = SiteSpec(
        name="dc",
        bus="300",
        power_factor=PF,
        models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)],
    )
    spec = GridSpec(feeder="ieee123", on_nonconvergence=on_nonconvergence)  # type: ignore[arg-type]
    return FeederGrid.from_spec(spec, [site], Path("."))


def _dc(mw: float) -> dict[str, DatacenterState]:
    p = np.full(3, mw * 1e6 / 3)
    return {"dc": DatacenterState("dc", 0.0, p, p * np.tan(np.arccos(PF)), {})}


def _opendss(mw: float) -> dict[str, float]:
    return opendss_voltages(shared_data() / SOURCES["ieee123"], {}, ("300", mw * 1000.0, PF))


def _worst(state: GridState, ref: dict[str, float]) -> float:
    assert state.converged
    return max(abs(v - ref[bp]) for bp, v in zip(state.bus_phases, state.v_pu))


def test_past_the_nose_is_reported_as_a_collapse() -> None:
    with pytest.raises(PowerFlowError) as info:
        _grid().solve(7.0, _dc(6.0), 1.0)
    msg = str(info.value)
    assert "voltage collapse at t=7.0 s on feeder ieee123" in msg
    assert "dc@300=6.000 MW" in msg and "bus-phase 300." in msg
    # the nose lies between OpenDSS's last solvable load (4.8 MW) and 5 MW: 80-83 % of 6 MW
    share = float(msg.split("carry only ")[1].split("%")[0])
    assert 80.0 <= share <= 100 * 5.0 / 6.0


def test_near_the_nose_is_solved_as_opendss_does() -> None:
    state = _grid().solve(0.0, _dc(4.8), 1.0)
    assert _worst(state, _opendss(4.8)) < TOL_PU


def test_solve_recovers_after_a_collapse() -> None:
    """3 -> 5 -> 3 MW: the 5 MW step is a collapse; 3 MW afterwards is OpenDSS's solution (a
    warm start from the low-voltage branch gave 0.954 pu at 300.a and 0.244 pu at 300.b)."""
    ref3 = _opendss(3.0)
    g = _grid()
    assert _worst(g.solve(0.0, _dc(3.0), 1.0), ref3) < TOL_PU
    with pytest.raises(PowerFlowError, match=r"voltage collapse at t=1.0 s.*dc@300=5.000 MW"):
        g.solve(1.0, _dc(5.0), 1.0)
    assert _worst(g.solve(2.0, _dc(3.0), 1.0), ref3) < TOL_PU
    assert _worst(g.solve(3.0, _dc(4.8), 1.0), _opendss(4.8)) < TOL_PU


def test_flagged_collapse_then_recovery() -> None:
    g = _grid("flag")
    g.solve(0.0, _dc(3.0), 1.0)
    bad = g.solve(1.0, _dc(5.0), 1.0)
    assert bad.converged is False and np.isnan(bad.v_pu).all()
    assert _worst(g.solve(2.0, _dc(3.0), 1.0), _opendss(3.0)) < TOL_PU


def test_solve_batch_recovers_after_a_collapse() -> None:
    ref3, ref48 = _opendss(3.0), _opendss(4.8)
    g = _grid("flag")
    states = g.solve_batch([0.0, 1.0, 2.0, 3.0], [_dc(3.0), _dc(5.0), _dc(3.0), _dc(4.8)], 1.0)
    assert [s.converged for s in states] == [True, False, True, True]
    assert _worst(states[2], ref3) < TOL_PU and _worst(states[3], ref48) < TOL_PU
    # a later batch warm-starts from an accepted point only
    again = g.solve_batch([4.0, 5.0], [_dc(3.0), _dc(3.0)], 1.0)
    assert max(_worst(s, ref3) for s in again) < TOL_PU
    with pytest.raises(PowerFlowError, match=r"voltage collapse at t=1.0 s"):
        _grid().solve_batch([0.0, 1.0, 2.0], [_dc(3.0), _dc(5.0), _dc(3.0)], 1.0)

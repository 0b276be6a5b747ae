"""d(branch loading)/dP from the grids' linearizations: against central finite differences of the
solvers themselves (ieee13 phase frame, a pandapower net) and against a two-bus circuit solved
by hand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from openg2g.core.state import DatacenterState
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.nets.balanced import PandapowerGrid
from openg2g.grid.nets.source import load_net
from openg2g.scenario.schema import GridSpec, ModelSpec, RegulatorSpec, SiteSpec
from tests.grid.test_backend import TWO_BUS

PF = 0.95


def _site(name: str, bus: str) -> SiteSpec:
    return SiteSpec(
        name=name, bus=bus, power_factor=PF, models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)]
    )


def _dc(p_w_per_phase: np.ndarray | float, name: str = "dc") -> DatacenterState:
    p = np.broadcast_to(np.asarray(p_w_per_phase, dtype=float), (3,))
    return DatacenterState(name, 0.0, p, p * math.tan(math.acos(PF)), {})


def _fd_columns(grid: FeederGrid | PandapowerGrid, base: np.ndarray, dp_w: float) -> np.ndarray:
    """Central differences of the grid's branch loading (%) w.r.t. each phase's power drawn by
    the site ``dc``, ``(n_branches, 3)``."""

    def loading(p: np.ndarray) -> np.ndarray:
        out = grid.solve(0.0, {"dc": _dc(p)}, 1.0).branch_loading_pct
        assert out is not None
        return out

    cols = []
    for k in range(3):
        hi, lo = base.copy(), base.copy()
        hi[k] += dp_w
        lo[k] -= dp_w
        cols.append((loading(hi) - loading(lo)) / (2 * dp_w))
    return np.stack(cols, axis=1)


def test_feeder_loading_sensitivity_matches_finite_differences() -> None:
    """ieee13 with an unbalanced 2.7 MW site at 671: every branch's slope equals the solver's own
    central difference (1 kW steps) to 1e-4 of the largest slope."""
    spec = GridSpec(feeder="openg2g-ieee13", regulators={"reg1": RegulatorSpec(taps=[14, 6, 15])})
    grid = FeederGrid.from_spec(spec, [_site("dc", "671")], Path("."))
    base = np.array([8e5, 1e6, 9e5])
    state = grid.solve(0.0, {"dc": _dc(base)}, 1.0)
    sens = grid.loading_sensitivity("dc")
    assert state.branches is not None and sens.shape == (len(state.branches.names), 3)
    assert not sens.flags.writeable and np.array_equal(sens, grid.loading_sensitivity("671"))
    fd = _fd_columns(grid, base, 1e3)
    np.testing.assert_allclose(sens, fd, rtol=0, atol=1e-4 * np.abs(fd).max())
    # the trunk 650-632 carries the site; its loading is that of its phase-b conductor, which a watt on
    # phase b raises by about 100 / 400 A / 2.4 kV (%/W) and a watt on a or c barely moves (coupling only)
    trunk = state.branches.names.index("line.650632")
    assert 1e-4 < sens[trunk, 1] < 1.5e-4 and np.all(np.abs(sens[trunk, [0, 2]]) < 0.1 * sens[trunk, 1])


def test_a_grid_state_change_refreshes_the_loading_sensitivity() -> None:
    spec = GridSpec(feeder="openg2g-ieee13", regulators={"reg1": RegulatorSpec(taps=[14, 6, 15])})
    grid = FeederGrid.from_spec(spec, [_site("dc", "671")], Path("."))
    grid.solve(0.0, {"dc": _dc(3e5)}, 1.0)
    light = grid.loading_sensitivity("dc")
    grid.solve(1.0, {"dc": _dc(1.2e6)}, 1.0)
    assert not np.allclose(light, grid.loading_sensitivity("dc"), rtol=1e-3, atol=0.0)


def test_two_bus_loading_slope_by_hand(tmp_path: Path) -> None:
    """One phase of a decoupled line (``Zt`` = source + line), a constant-impedance load ``Zld``
    and a constant-power site ``S = P (1 + j tan phi)`` at the far end:
    ``F(V, P) = V - E + Zt (V / Zld + conj(S) / conj(V)) = 0``. Its real-linear derivative
    ``dV + Zt (dV / Zld - conj(S) conj(dV) / conj(V)^2 + (1 - j tan phi) dP / conj(V)) = 0`` is a
    2x2 real system; the line current is ``I = (E - V) / Zt``, its slope ``Re(conj(I) dI) / |I|``,
    and the loading slope ``100 / 400 A`` (OpenDSS's default rating) of it."""
    (tmp_path / "two.dss").write_text(TWO_BUS)
    grid = FeederGrid.from_spec(GridSpec(feeder="two.dss"), [_site("dc", "b2")], tmp_path)
    p_w = 5e5
    state = grid.solve(0.0, {"dc": _dc(p_w)}, 1.0)
    sens = grid.loading_sensitivity("dc")

    e = 12.47e3 / math.sqrt(3)
    z_t = 1e-6j + (0.8 + 1.6j)
    z_ld = e**2 / np.conj((3e6 + 1j * 1e6) / 3)
    s_conj = p_w * (1 - 1j * math.tan(math.acos(PF)))
    v = complex(e)
    for _ in range(200):  # fixed point of the phase's equation
        v = e - z_t * (v / z_ld + s_conj / np.conj(v))
    i = (e - v) / z_t
    assert 100 * abs(i) / 400 == pytest.approx(state.branch_loading_pct[0], rel=1e-7)  # type: ignore[index]
    # dV = x + j y: dV + Zt dV / Zld - Zt conj(S) conj(dV) / conj(V)^2 = -Zt (1 - j tan phi) / conj(V) per W
    a = 1 + z_t / z_ld
    b = -z_t * s_conj / np.conj(v) ** 2
    rhs = -z_t * (1 - 1j * math.tan(math.acos(PF))) / np.conj(v)
    m = np.array([[(a + b).real, (1j * a - 1j * b).real], [(a + b).imag, (1j * a - 1j * b).imag]])
    x, y = np.linalg.solve(m, [rhs.real, rhs.imag])
    di = -(x + 1j * y) / z_t
    slope_pct_per_w = 100 / 400 * (np.conj(i) * di).real / abs(i)
    # the three phases are decoupled and equally loaded: a watt on any of them raises the loading
    np.testing.assert_allclose(sens[0], slope_pct_per_w, rtol=1e-6)


def test_pandapower_loading_sensitivity_matches_finite_differences() -> None:
    """CIGRE MV with a 3 MW site at Bus 14: lines and transformers against central differences of
    the balanced solver (10 kW steps of the site's total), to 1e-4 of the largest slope."""
    grid = PandapowerGrid(
        load_net("create_cigre_network_mv"),
        "cigre",
        GridSpec(pandapower="create_cigre_network_mv"),
        [_site("dc", "Bus 14")],
    )
    base = np.full(3, 1e6)
    state = grid.solve(0.0, {"dc": _dc(base)}, 1.0)
    sens = grid.loading_sensitivity("dc")
    assert state.branches is not None and sens.shape == (len(state.branches.names), 3)
    assert np.array_equal(sens[:, 0], sens[:, 2])  # balanced: one column per watt of the total
    fd = _fd_columns(grid, base, 1e4)
    np.testing.assert_allclose(sens, fd, rtol=0, atol=1e-4 * np.abs(fd).max())
    assert any(n.startswith("transformer.") and abs(sens[k, 0]) > 1e-7 for k, n in enumerate(state.branches.names))

"""A site whose bus loses supply draws and serves nothing until it returns.

The bundled ieee13 case with its site moved to the lateral bus 675, whose only feed (line
692675) is taken out of service at t1 = 20 s and back at t2 = 40 s, against the same case with the
line never opened. Events at t act on the datacenter sample ending at t, so the samples stamped
``[t1, t2)`` are the ones cut off.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.engine.simulation import Simulation
from openg2g.scenario.loader import load_scenario
from openg2g.scenario.run import run_scenario
from tests.engine.toys import KilowattSite

T1, T2, DT = 20.0, 40.0, 0.1
BASE = ("duration_s=60", "datacenters.0.bus=675", "events=[]", "outputs.plots=false")
CUT = (
    f"events=[{{t_s: {T1}, command: set_line_in_service, line: '692675', in_service: false}},"
    f" {{t_s: {T2}, command: set_line_in_service, line: '692675', in_service: true}}]"
)


def _tables(out: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    dc = pd.read_parquet(out / "datacenter")
    models = pd.read_parquet(out / "models")
    grid = pd.read_parquet(out / "grid")
    grid["p_sub_w"] = grid[["p_sub_a_w", "p_sub_b_w", "p_sub_c_w"]].sum(axis=1)
    return dc, models, grid


def _in_gap(t_s: pd.Series) -> np.ndarray:
    # sample times are multiples of 0.1 s: compare in tenths to avoid float edges
    tenths = np.rint(t_s.to_numpy() / DT)
    return (tenths >= round(T1 / DT)) & (tenths < round(T2 / DT))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, dict, Path]:
    whole, cut = tmp_path_factory.mktemp("whole"), tmp_path_factory.mktemp("cut")
    return (
        run_scenario("ieee13_none", whole, BASE).summary,
        whole,
        run_scenario("ieee13_none", cut, (*BASE, CUT)).summary,
        cut,
    )


def test_site_draws_and_serves_nothing_while_cut_off(runs: tuple[dict, Path, dict, Path]) -> None:
    whole_summary, whole, cut_summary, cut = runs
    dc_w, models_w, grid_w = _tables(whole)
    dc_c, models_c, grid_c = _tables(cut)
    gap = _in_gap(dc_c.t_s)
    assert gap.sum() == 200

    # power and the supply flag: zero / False in the gap, the uninterrupted run's outside it
    assert (dc_c.power_w[gap] == 0).all() and (dc_c.q_a_var[gap] == 0).all()
    assert dc_c.power_w[~gap].tolist() == dc_w.power_w[~gap].tolist()
    assert dc_c.supplied.tolist() == (~gap).tolist() and dc_w.supplied.all()
    assert dc_c.online.all()  # nobody commanded it off

    # every model: no replica, power or tokens in the gap (ITL undefined), the same figures outside
    m_gap = _in_gap(models_c.t_s)
    assert (models_c.throughput_tok_s[m_gap] == 0).all() and (models_c.replicas[m_gap] == 0).all()
    assert models_c.itl_s[m_gap].isna().all() and (models_c.deadline_miss_fraction[m_gap] == 0).all()
    for col in ("throughput_tok_s", "itl_s", "power_w", "replicas"):
        assert models_c[col][~m_gap].tolist() == models_w[col][~m_gap].tolist(), col

    # energy: the uninterrupted run's less the energy of the gap (hand-checkable sum)
    gap_energy_j = float(dc_w.power_w[gap].sum()) * DT
    assert gap_energy_j > 20 * 3.9e6  # ~4 MW for 20 s
    assert cut_summary["energy_mwh"] == pytest.approx(whole_summary["energy_mwh"] - gap_energy_j / 3.6e9, rel=1e-12)
    # throughput: the gap counts as 0 tok/s in the run's time mean
    lost_tok = float(models_w.throughput_tok_s[m_gap].sum()) * DT
    assert cut_summary["mean_throughput_tok_s"] == pytest.approx(
        whole_summary["mean_throughput_tok_s"] - lost_tok / 60.0, rel=1e-12
    )
    # ITL misses: the gap's tokens are neither missed nor met
    tok = models_c.throughput_tok_s * DT
    assert cut_summary["itl_deadline_miss_fraction"] == pytest.approx(
        float((tok * models_c.deadline_miss_fraction).sum() / tok.sum()), rel=1e-12
    )
    assert cut_summary["site_unsupplied_s"] == {"dc1": pytest.approx(T2 - T1)}
    assert whole_summary["site_unsupplied_s"] == {"dc1": 0.0}

    # the substation loses at least the site's power (the lateral's own load goes with it);
    # before the cut the grids are identical
    g_gap = _in_gap(grid_c.t_s)
    before = grid_c.t_s.to_numpy() < T1 - DT / 2
    assert grid_c.p_sub_w[before].tolist() == grid_w.p_sub_w[before].tolist()
    drop = grid_w.p_sub_w[g_gap].to_numpy() - grid_c.p_sub_w[g_gap].to_numpy()
    assert (drop > dc_w.power_w[gap].to_numpy()).all()
    # after it the same loads again, solved from another starting point: equal to the solver's tolerance
    after = grid_c.t_s.to_numpy() >= T2 - DT / 2
    np.testing.assert_allclose(grid_c.p_sub_w[after], grid_w.p_sub_w[after], rtol=1e-7)

    # one events row when supply goes, one when it returns, after the line's own rows
    events = pd.read_parquet(cut / "events")
    assert events.command.tolist() == ["set_line_in_service", "supply_lost", "set_line_in_service", "supply_restored"]
    assert events.t_s.tolist() == [T1, T1, T2, T2]
    assert json.loads(events.fields[1]) == {"site": "dc1", "bus": "675"}


def test_controllers_observe_the_loss(caplog: pytest.LogCaptureFixture) -> None:
    sim = Simulation.from_scenario(load_scenario("ieee13_none", (*BASE, CUT)))
    sim.start()
    sim.run_until(T1 + 1)
    during = sim.observation()
    assert not during.datacenters["dc1"].supplied and during.datacenters["dc1"].power_w == 0.0
    assert during.grid.energized is not None
    dead = {bp for bp, live in zip(during.grid.bus_phases, during.grid.energized) if not live}
    assert dead == {"675.a", "675.b", "675.c"}
    assert "site dc1 lost supply (bus 675 has no path to a source)" in caplog.text
    sim.run_until(T2 + 1)
    after = sim.observation()
    assert after.datacenters["dc1"].supplied and after.datacenters["dc1"].power_w > 3.9e6
    assert after.grid.energized is not None and after.grid.energized.all()


def test_default_step_block_of_a_site_without_supply() -> None:
    """A backend that only implements ``step`` is cut off by the interface's ``step_block``."""
    site = KilowattSite("toy", [])
    t_s = np.array([0.1, 0.2])
    site.set_supply(False, 0.0)
    off = site.step_block(t_s, 0.1)
    assert off.p_w.tolist() == [[0.0] * 3] * 2 and off.q_var.tolist() == [[0.0] * 3] * 2
    assert off.supplied.tolist() == [False, False] and off.online.tolist() == [True, True]
    toy = off.models["toy"]
    assert toy.throughput_tok_s.tolist() == [0.0, 0.0] and toy.replicas.tolist() == [0.0, 0.0]
    assert np.isnan(toy.itl_s).all() and toy.batch_size.tolist() == [1, 1]
    site.set_supply(True, 0.2)
    on = site.step_block(t_s, 0.1)
    assert on.p_w.tolist() == [[1000.0] * 3] * 2 and on.supplied.all()

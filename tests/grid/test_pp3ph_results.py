"""An asymmetric net back with ``runpp_3ph``'s result tables filled from the phase frame
(:mod:`openg2g.grid.nets.asymmetric_results`): ``pandapower.runpp_3ph`` on the returned net, converged as
in tests/grid/test_pp3ph.py, gives the tables we filled."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandapower as pp
import pandas as pd
import pytest
import yaml

from openg2g.core.errors import ScenarioError
from openg2g.core.state import PHASES, DatacenterState
from openg2g.grid.config import SiteConnection as Site
from openg2g.grid.nets.asymmetric import asymmetric_grid
from openg2g.grid.nets.asymmetric_results import results_net_3ph, site_name
from openg2g.grid.nets.source import BusNames
from tests.grid.test_pp3ph import (
    ANGLE_TOL_DEG,
    CURRENT_ATOL_A,
    CURRENT_TOL,
    EU_DC_BUS,
    SMALL_CASES,
    V_TOL_PU,
    eu_net,
    runpp_3ph_converged,
    small_net,
    spec_of,
)
from tests.sampling import sampled

POWER_TOL = 1e-6  # relative to the largest per-phase flow of the table


def unbalanced_site(name: str) -> DatacenterState:
    """A site drawing a different P and Q on every phase (W, var)."""
    return DatacenterState(name, 0.0, np.array([20e3, 10e3, 15e3]), np.array([5e3, 2e3, 1e3]), {})


def assert_tables_match(ours: Any) -> None:
    """``runpp_3ph`` on a copy of ``ours`` gives its ``res_bus_3ph`` voltages, ``res_line_3ph`` and
    ``res_trafo_3ph`` currents and powers."""
    ref = copy.deepcopy(ours)
    runpp_3ph_converged(ref)
    for p in PHASES:
        assert np.allclose(ours.res_bus_3ph[f"vm_{p}_pu"], ref.res_bus_3ph[f"vm_{p}_pu"], rtol=0, atol=V_TOL_PU)
        d_angle = (ours.res_bus_3ph[f"va_{p}_degree"] - ref.res_bus_3ph[f"va_{p}_degree"] + 180.0) % 360.0 - 180.0
        assert (d_angle.abs() < ANGLE_TOL_DEG).all(), p
    assert np.allclose(ours.res_bus_3ph["unbalance_percent"], ref.res_bus_3ph["unbalance_percent"], atol=1e-4)
    for table, ends in (("res_line_3ph", ("from", "to")), ("res_trafo_3ph", ("hv", "lv"))):
        a, b = ours[table], ref[table]
        currents = [f"i_{p}_{e}_ka" for p in PHASES for e in ends]
        assert np.allclose(a[currents], b[currents], rtol=CURRENT_TOL, atol=CURRENT_ATOL_A / 1e3), table
        flows = [c for c in b.columns if c.startswith(("p_", "q_", "pl_", "ql_"))]
        scale = b[flows].abs().to_numpy().max()
        assert np.allclose(a[flows], b[flows], rtol=0, atol=POWER_TOL * scale), table
        assert np.allclose(a["loading_percent"], b["loading_percent"], rtol=CURRENT_TOL, atol=1e-3), table


@pytest.mark.parametrize("case", sampled(SMALL_CASES, len(SMALL_CASES), list(SMALL_CASES)))
def test_small_net_tables_match_runpp_3ph(case: str) -> None:
    net = small_net(**SMALL_CASES[case])
    site = Site("dc", "LV3")
    grid = asymmetric_grid(net, spec_of("lv", load_scale=0.8), [site], Path("."))
    ours = results_net_3ph(net, "lv", grid, [site], {"dc": unbalanced_site("dc")})
    row = ours.asymmetric_load[ours.asymmetric_load["name"] == site_name("dc")].iloc[0]
    assert row["p_b_mw"] == pytest.approx(0.010) and row["q_c_mvar"] == pytest.approx(0.001)
    assert (ours.load["scaling"] == 0.8).all() and len(net.asymmetric_load) == 2  # the input is not touched
    assert_tables_match(ours)


@pytest.mark.slow
def test_an_opendss_site_outside_its_band_draws_constant_impedance() -> None:
    """A site with ``load_model: opendss`` below ``vminpu`` draws less than scheduled (OpenDSS's
    interpolated admittance there): the row carries what it drew, and runpp_3ph (constant power)
    then gives our voltages."""
    net = small_net()
    site = Site("dc", "LV3", load_model="opendss", vminpu=1.05, vmaxpu=1.1)
    grid = asymmetric_grid(net, spec_of("lv"), [site], Path("."))
    ours = results_net_3ph(net, "lv", grid, [site], {"dc": unbalanced_site("dc")})
    row = ours.asymmetric_load[ours.asymmetric_load["name"] == site_name("dc")].iloc[0]
    vm_a = ours.res_bus_3ph.at[BusNames(ours).bus("LV3"), "vm_a_pu"]
    assert vm_a < 1.05 and 0.0 < row["p_a_mw"] < 0.020
    assert_tables_match(ours)


@pytest.mark.slow
def test_european_lv_feeder_tables_match_runpp_3ph() -> None:
    net = eu_net()
    site = Site("edge", EU_DC_BUS)
    grid = asymmetric_grid(net, spec_of("ieee_european_lv_asymmetric"), [site], Path("."))
    ours = results_net_3ph(net, "eu", grid, [site], {"edge": unbalanced_site("edge")})
    assert_tables_match(ours)


def test_pv_is_refused(tmp_path: Path) -> None:
    net = small_net()
    spec = spec_of("lv", pv=[{"name": "roof", "bus": "LV2", "kw": 5.0}])
    grid = asymmetric_grid(net, spec, [Site("dc", "LV3")], tmp_path)
    with pytest.raises(ScenarioError, match="grid.pv"):
        results_net_3ph(net, "lv", grid, [Site("dc", "LV3")], {})


@pytest.mark.slow
def test_to_pandapower_results_on_an_asymmetric_run(tmp_path: Path) -> None:
    """A short run of a tiny scenario on the hand-made net: the returned net carries the site at
    the mean of the run's datacenter samples of the step, and runpp_3ph gives its tables."""
    from openg2g.cli.main import main
    from openg2g.scenario.net_results import to_pandapower_results

    pp.to_json(small_net(), str(tmp_path / "lv.json"))
    scenario = {
        "name": "lv_tiny",
        "seed": 0,
        "duration_s": 3,
        "periods": {"datacenter_s": 0.5, "grid_s": 1, "control_s": 1},
        "grid": {"pandapower": "lv.json", "v_min_pu": 0.9, "v_max_pu": 1.1},
        "datacenters": [
            {
                "name": "dc",
                "bus": "LV3",
                "power_factor": 0.95,
                "base_load_kw_per_phase": 1,
                "gpu_capacity": 8,
                "models": [{"model": "Llama-3.1-8B", "gpus_per_replica": 1, "replicas": 8, "batch_size": 64}],
            }
        ],
        "controllers": [],
        "outputs": {"plots": False},
    }
    (tmp_path / "lv_tiny.yaml").write_text(yaml.safe_dump(scenario))
    out = tmp_path / "run"
    assert main(["run", str(tmp_path / "lv_tiny.yaml"), "--out", str(out), "--no-progress"]) == 0
    ours = to_pandapower_results(out, 2.0)
    dc = pd.read_parquet(out / "datacenter")
    step = dc[(dc["t_s"] > 1.0 + 1e-9) & (dc["t_s"] <= 2.0 + 1e-9)]
    row = ours.asymmetric_load[ours.asymmetric_load["name"] == site_name("dc")].iloc[0]
    for p in PHASES:
        assert row[f"p_{p}_mw"] == pytest.approx(step[f"p_{p}_w"].mean() / 1e6, rel=1e-12)
    assert row["p_a_mw"] > 1e-3 and math.isfinite(row["q_a_mvar"])
    assert_tables_match(ours)

"""PV placement: the MILP against brute force, a short ieee13 study end to end, and bad study files.

The MILP instances are small enough to solve by hand: every placement the limits allow is
enumerated and its sizes found by an LP written independently of the study's own matrices, and
the best placement's objective is also scanned on a 5-kW grid.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.optimize import linprog

from openg2g.cli.main import main
from openg2g.grid.feeder.library import load_feeder
from openg2g.studies import PlacementProblem, PVPlacementSpec, load_study, solve_placement
from openg2g.studies.pv_placement import UPSTREAM_ZONE, candidate_buses, regulator_zones
from openg2g.sweep.spec import SweepError

# --------------------------------------------------------------------------------- MILP vs brute force


def _problem(**changes) -> PlacementProblem:
    """Three candidates A, B, C; two operating points (noon, and morning at half the output);
    two bus-phases, the second near its upper limit at noon. A and B share a zone."""
    noon = np.array([[1.0e-4, 2.0e-5, 2.0e-5], [3.0e-5, 5.0e-5, 1.0e-5]])  # (I, B) pu per kW installed
    fields = {
        "candidates": ("A", "B", "C"),
        "v_fixed_pu": np.array([[1.00, 1.02], [0.99, 1.01]]),
        "dv_pu_per_kw": np.stack([noon, 0.5 * noon]),
        "v_min_pu": 0.95,
        "v_max_pu": 1.05,
        "penalty_per_pu": np.array([2.0e7, 1.0e7]),
        "value_per_kw": 400.0,
        "cost_per_kw": 200.0,
        "cost_per_site": 10_000.0,
        "n_max": 2,
        "max_kw_per_site": 1000.0,
        "max_total_kw": 1500.0,
        "zones": ((0, 1), (2,)),
        "max_per_zone": 1,
    }
    fields.update(changes)
    return PlacementProblem(**fields)


def _best_sizes(p: PlacementProblem, built: tuple[int, ...]) -> tuple[float, np.ndarray]:
    """Cheapest sizes for a fixed set of plants: an LP over sizes and explicit slack variables."""
    k, i = p.v_fixed_pu.shape
    nb, nr = len(built), 2 * k * i
    c = np.concatenate([np.full(nb, p.cost_per_kw - p.value_per_kw), np.repeat(p.penalty_per_pu, 2 * i)])
    a_ub, b_ub = [], []
    for kk in range(k):
        for ii in range(i):
            r = 2 * (kk * i + ii)
            g = p.dv_pu_per_kw[kk, ii, list(built)]
            over = np.zeros(nb + nr)
            over[:nb], over[nb + r] = g, -1.0  # v <= v_max + u
            under = np.zeros(nb + nr)
            under[:nb], under[nb + r + 1] = -g, -1.0  # v >= v_min - l
            a_ub += [over, under]
            b_ub += [p.v_max_pu - p.v_fixed_pu[kk, ii], p.v_fixed_pu[kk, ii] - p.v_min_pu]
    if p.max_total_kw is not None and nb:
        total = np.zeros(nb + nr)
        total[:nb] = 1.0
        a_ub.append(total)
        b_ub.append(p.max_total_kw)
    bounds = [(p.min_kw_per_site, p.max_kw_per_site)] * nb + [(0, None)] * nr
    res = linprog(c, A_ub=np.array(a_ub), b_ub=np.array(b_ub), bounds=bounds, method="highs")
    if res.status == 2:  # e.g. minimum sizes above the total cap
        return float("inf"), np.zeros(nb)
    assert res.status == 0, res.message
    return res.fun + p.cost_per_site * nb, res.x[:nb]


def _brute_force(p: PlacementProblem) -> tuple[float, np.ndarray]:
    """Best objective and sizes over every placement the count and zone limits allow."""
    best, best_kw = float("inf"), np.zeros(len(p.candidates))
    for n in range(p.n_max + 1):
        for built in itertools.combinations(range(len(p.candidates)), n):
            if p.max_per_zone is not None and any(len(set(built) & set(z)) > p.max_per_zone for z in p.zones):
                continue
            cost, sizes = _best_sizes(p, built)
            if cost < best:
                best, best_kw = cost, np.zeros(len(p.candidates))
                best_kw[list(built)] = sizes
    return best, best_kw


def _objective(p: PlacementProblem, kw: np.ndarray) -> float:
    built = kw > 0
    return (p.cost_per_kw - p.value_per_kw) * kw.sum() + p.cost_per_site * built.sum() + p.penalty(kw)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"max_per_zone": None},
        {"n_max": 1},
        {"min_kw_per_site": 600.0},
        {"max_total_kw": None, "max_kw_per_site": 5000.0},
        {"value_per_kw": 150.0},  # building costs more than the energy is worth
        {"value_per_kw": 150.0, "v_fixed_pu": np.array([[0.93, 1.00], [0.94, 1.00]])},  # PV lifts low voltages
    ],
    ids=["zones", "no-zones", "one-plant", "min-size", "no-total-cap", "not-worth-it", "voltage-support"],
)
def test_milp_matches_brute_force(changes):
    p = _problem(**changes)
    solution = solve_placement(p)
    best, best_kw = _brute_force(p)
    assert solution.status == "optimal"
    assert solution.objective == pytest.approx(best, rel=1e-6, abs=1e-3)
    assert solution.objective == pytest.approx(_objective(p, solution.kw), rel=1e-9)
    np.testing.assert_allclose(solution.kw, best_kw, atol=0.05)
    assert solution.built.sum() <= p.n_max and (solution.kw <= p.max_kw_per_site + 1e-6).all()
    assert p.max_total_kw is None or solution.kw.sum() <= p.max_total_kw + 1e-6
    assert ((solution.kw == 0) | (solution.kw >= p.min_kw_per_site - 1e-6)).all()


def test_best_placement_is_the_best_point_of_a_fine_grid():
    p = _problem()
    solution = solve_placement(p)
    (a, c) = np.flatnonzero(solution.built)
    grid = np.arange(0.0, p.max_kw_per_site + 1e-9, 5.0)
    best = float("inf")
    for kw_a in grid:
        kw_c = grid[grid <= p.max_total_kw - kw_a]
        kw = np.zeros((len(kw_c), 3))
        kw[:, a], kw[:, c] = kw_a, kw_c
        v = p.v_fixed_pu[None] + np.einsum("kib,nb->nki", p.dv_pu_per_kw, kw)
        outside = np.maximum(v - p.v_max_pu, 0) + np.maximum(p.v_min_pu - v, 0)
        cost = (
            (p.cost_per_kw - p.value_per_kw) * kw.sum(axis=1) + 2 * p.cost_per_site + outside.sum(2) @ p.penalty_per_pu
        )
        best = min(best, float(cost.min()))
    assert solution.objective <= best + 1e-6
    assert best - solution.objective < 0.01 * abs(solution.objective)  # the grid is 5 kW coarse


def test_interesting_instance():
    """The default instance binds: B and C (A would allow only 1,300 kW with C, B allows 1,400),
    C at its cap and B limited by the second bus-phase at noon."""
    p = _problem()
    solution = solve_placement(p)
    assert solution.built.tolist() == [False, True, True]
    np.testing.assert_allclose(solution.kw, [0.0, 400.0, 1000.0], atol=1e-6)
    assert 0 < solution.kw.sum() < p.max_total_kw
    assert p.voltages(solution.kw).max() == pytest.approx(p.v_max_pu, abs=1e-9)


def test_rows_no_plan_can_reach_are_left_out():
    p = _problem(v_fixed_pu=np.array([[0.96, 1.00], [0.96, 1.00]]), max_total_kw=100.0)
    solution = solve_placement(p)
    assert solution.n_voltage_rows == 0  # at most 100 kW x 1e-4 pu/kW = 0.01 pu: no limit reachable
    assert solution.kw.sum() == pytest.approx(100.0)


# --------------------------------------------------------------------------------- feeder helpers


def test_ieee34_candidates_are_the_primary_three_phase_buses_and_zones_follow_the_regulators():
    feeder = load_feeder("openg2g-ieee34")
    spec = PVPlacementSpec.model_validate({"study": "pv_placement", "name": "x", "base": "b", "exclude": ["852"]})
    buses = candidate_buses(spec, feeder)
    assert "888" not in buses and "890" not in buses  # 4.16 kV
    assert "sourcebus" not in buses and "852" not in buses and "810" not in buses  # source side, excluded, 1-phase
    assert {"800", "814r", "850", "860", "840"} <= set(buses)
    zones = regulator_zones(feeder.model)
    assert zones["802"] == zones["814"] == UPSTREAM_ZONE
    assert zones["814r"] == zones["850"] == zones["852"] == "reg1"
    assert zones["852r"] == zones["860"] == zones["890"] == "reg2"


# --------------------------------------------------------------------------------- a short ieee13 study

BASE_13 = {
    "name": "pv13",
    "duration_s": 2,
    "periods": {"datacenter_s": 0.1, "grid_s": 0.1, "control_s": 1},
    "grid": {"feeder": "openg2g-ieee13", "source_pu": 1.03, "regulators": {"reg1": {"taps": [2, 2, 2]}}},
    "datacenters": [
        {
            "name": "dc1",
            "bus": "671",
            "power_factor": 0.95,
            "models": [{"model": "Llama-3.1-8B", "gpus_per_replica": 1, "replicas": 100, "batch_size": 128}],
        }
    ],
}

STUDY_13 = {
    "study": "pv_placement",
    "name": "pv13_study",
    "base": "base13.yaml",
    "candidates": ["675", "680", "692", "633", "671"],
    "n_pv": 2,
    "max_kw_per_site": 5000,
    "max_total_kw": 8000,
    "cost_per_kw_year": 100,
    "energy_value_per_kwh": 0.2,
    "operating_points": 2,
    "pv_shape": {"csv": "sun.csv"},  # full output all day: the run's PV equals the model's at every step
}


def write_study(directory: Path, **changes) -> Path:
    (directory / "base13.yaml").write_text(yaml.safe_dump(BASE_13, sort_keys=False))
    (directory / "sun.csv").write_text("hour,availability\n0,1\n24,1\n")
    path = directory / "study.yaml"
    path.write_text(yaml.safe_dump({**STUDY_13, **changes}, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def study13(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pv13")
    path = write_study(tmp)
    out = tmp / "out"
    assert main(["study", "pv-placement", str(path), "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.mark.slow
def test_study_writes_its_files(study13):
    for name in (
        "pv_placement.parquet",
        "operating_points.parquet",
        "validation.parquet",
        "plan.json",
        "pv_placement.png",
        "pv_placement_voltages.png",
    ):
        assert (study13 / name).is_file(), name
    assert (study13 / "runs" / "no_pv" / "summary.json").is_file()
    assert (study13 / "runs" / "plan" / "summary.json").is_file()


@pytest.mark.slow
def test_plan_respects_the_limits_and_is_bounded_by_over_voltage(study13):
    table = pd.read_parquet(study13 / "pv_placement.parquet")
    plan = json.loads((study13 / "plan.json").read_text())
    assert plan["status"] == "optimal"
    assert 1 <= table["chosen"].sum() <= STUDY_13["n_pv"]
    assert (table["kw"] <= STUDY_13["max_kw_per_site"] + 1e-6).all()
    assert table["kw"].sum() == pytest.approx(plan["total_kw"]) and plan["total_kw"] < STUDY_13["max_total_kw"]
    assert set(table.loc[table["chosen"], "bus"]) == {p["bus"] for p in plan["plan"]}
    points = pd.read_parquet(study13 / "operating_points.parquet")
    assert points["v_max_no_pv_pu"].max() < 1.045  # room without PV ...
    assert points["v_max_plan_linear_pu"].max() > 1.049  # ... taken up by the plan: PV drives the limit
    terms = plan["terms_per_year"]
    parts = terms["investment"] + terms["site_cost"] - terms["energy_value"] + terms["violation_penalty"]
    assert plan["objective_per_year"] == pytest.approx(parts)


@pytest.mark.slow
def test_linear_voltages_agree_with_the_validation_run(study13):
    """After re-linearizing at the first plan, the model predicts the validation run's voltages
    within 0.002 pu (linearized without PV it is off by more: the plan moves voltages by several
    hundredths), and the operating points rebuilt from the run's records reproduce it exactly."""
    validation = pd.read_parquet(study13 / "validation.parquet").set_index("case")
    assert (validation["status"] == "complete").all()
    assert validation.loc["no_pv", "max_model_error_pu"] < 1e-8
    assert validation.loc["plan", "max_model_error_pu"] < 0.002
    points = pd.read_parquet(study13 / "operating_points.parquet")
    assert (points["max_error_pu"] < 0.002).all()
    rounds = json.loads((study13 / "plan.json").read_text())["rounds"]
    assert len(rounds) == 2 and rounds[1]["linearized_at"] == rounds[0]["plan"]
    assert rounds[1]["linearization_error_pu"] < 0.002 < rounds[0]["linearization_error_pu"]
    assert validation.loc["plan", "overvoltage_integral_pu_s"] > 0  # the plan trades some violation for energy
    assert validation.loc["plan", "pv_energy_kwh"] == pytest.approx(validation.loc["plan", "pv_kw"] * 2 / 3600)


@pytest.mark.slow
def test_a_rerun_reuses_the_runs(study13):
    before = json.loads((study13 / "plan.json").read_text())
    study = study13.parent / "study.yaml"
    assert main(["study", "pv-placement", str(study), "--out", str(study13), "--no-progress"]) == 0
    validation = pd.read_parquet(study13 / "validation.parquet")
    assert validation["reused"].all()
    assert json.loads((study13 / "plan.json").read_text())["plan"] == before["plan"]


# --------------------------------------------------------------------------------- bad study files


def _write(tmp_path: Path, **fields) -> Path:
    data = {"study": "pv_placement", "name": "bad", "base": "ieee34_none", **fields}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("fields", "where", "words"),
    [
        ({"n_pv": 0}, "n_pv", "greater than or equal to 1"),
        ({"cost_per_kw_year": -1}, "cost_per_kw_year", "greater than or equal to 0"),
        ({"violation_cost_per_pu_h": -5}, "violation_cost_per_pu_h", "greater than or equal to 0"),
        ({"candidates": []}, "candidates", "at least one candidate"),
        ({"candidates": ["860", "860"]}, "candidates", "listed twice"),
        ({"candidates": ["860"], "exclude": ["860"]}, "(top level)", "every candidate is excluded"),
        ({"energy_value_per_kwh": [0.1, 0.2]}, "energy_value_per_kwh", "24 hourly prices"),
        ({"min_kw_per_site": 3000}, "(top level)", "exceeds max_kw_per_site"),
        ({"pv_shape": {}}, "pv_shape", "exactly one of bell, csv"),
        ({"pv_shape": {"bell": {"sunrise_h": 18, "sunset_h": 6}}}, "pv_shape.bell", "sunrise_h < sunset_h"),
        ({"operating_points": 0}, "operating_points", "greater than or equal to 1"),
        ({"validate": "maybe"}, "validate", "valid boolean"),
        ({"oops": 1}, "oops", "Extra inputs"),
    ],
)
def test_bad_field_names_file_and_field(tmp_path, fields, where, words):
    path = _write(tmp_path, **fields)
    with pytest.raises(SweepError) as err:
        load_study(path)
    assert any(loc == f"{path}: {where}" and words in msg for loc, msg in err.value.problems), err.value.problems


@pytest.mark.parametrize(
    ("fields", "where", "words"),
    [
        ({"candidates": ["860", "nowhere"]}, "candidates.1", "unknown bus 'nowhere'"),
        ({"candidates": ["810"]}, "candidates.0", "has phases b"),
        ({"exclude": ["nowhere"]}, "exclude.0", "unknown bus"),
        ({"candidates": ["888", "890"]}, None, None),  # 4.16 kV three-phase buses may be listed
        ({"pv_shape": {"csv": "missing.csv"}}, "pv_shape.csv", "cannot read"),
        ({"set": ["duration_s=1"], "operating_points": 24}, "operating_points", "the base run has 10 grid steps"),
    ],
)
def test_study_is_checked_against_its_base_scenario(tmp_path, fields, where, words):
    path = _write(tmp_path, **fields)
    if where is None:
        assert load_study(path).spec.candidates == fields["candidates"]
        return
    with pytest.raises(SweepError) as err:
        load_study(path)
    assert any(loc == f"{path}: {where}" and words in msg for loc, msg in err.value.problems), err.value.problems


def test_csv_shape_is_read_relative_to_the_study_file(tmp_path):
    (tmp_path / "sun.csv").write_text("hour,availability\n0,0\n12,0.8\n24,0\n")
    path = _write(tmp_path, pv_shape={"csv": "sun.csv"}, energy_value_per_kwh=[0.05] * 12 + [0.2] * 12)
    spec = load_study(path).spec
    assert isinstance(spec, PVPlacementSpec) and Path(spec.pv_shape.csv).is_absolute()
    np.testing.assert_allclose(spec.pv_shape.availability(np.array([6.0, 12.0, 30.0])), [0.4, 0.8, 0.4])
    np.testing.assert_allclose(spec.price_per_kwh(np.array([11.5, 12.0])), [0.05, 0.2])


def test_bad_csv_rows_name_the_row(tmp_path):
    (tmp_path / "sun.csv").write_text("hour,availability\n0,0\n12,-1\n")
    path = _write(tmp_path, pv_shape={"csv": "sun.csv"})
    with pytest.raises(SweepError, match="row 3 has -1"):
        load_study(path)


def test_wrong_or_unknown_study_kind(tmp_path):
    path = _write(tmp_path)
    with pytest.raises(SweepError, match="expected 'study: siting'"):
        from openg2g.studies import SitingSpec

        load_study(path, SitingSpec)
    path.write_text(yaml.safe_dump({"study": "pv_planning", "name": "x", "base": "ieee34_none"}))
    with pytest.raises(SweepError, match="unknown study 'pv_planning'; valid: siting, hosting_capacity, pv_placement"):
        load_study(path)


def test_cli_bad_study_exits_2_naming_file_and_field(tmp_path, capsys):
    path = _write(tmp_path, n_pv=0, candidates=["nowhere"])
    assert main(["study", "pv-placement", str(path), "--out", str(tmp_path / "o")]) == 2
    assert f"error: {path}: n_pv" in capsys.readouterr().err

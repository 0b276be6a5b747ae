"""Thermal limits in OFO and MPC: OFO's dual update and the gradient's thermal price on a
hand-computed case, MPC's overload term by hand and its exact solver against brute force, the
branch selection, bad parameters refused before anything runs, and the closed loop on
``scenarios/ieee13_thermal_ofo.yaml`` (with the limit the trunk 650-632 is brought under its
rating, by OFO and by MPC; without it they leave it overloaded)."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from openg2g.controllers._thermal import LoadingForecast
from openg2g.controllers.mpc import ModelOptions, MPCController, MPCProblem
from openg2g.controllers.ofo import OFOController
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import BranchSet, Observation
from openg2g.scenario.run import run_scenario
from tests.controllers.conftest import make_context, make_observation, toy_model

BRANCHES = BranchSet(
    names=("line.trunk", "transformer.t1"),
    branch=np.array([0, 0, 0, 1]),
    terminal=np.array([1, 1, 1, 2]),
    phase=("a", "b", "c", "a"),
    rating_a=np.array([400.0, 400.0, 400.0, 100.0]),
    emergency_a=np.array([600.0, 600.0, 600.0, 150.0]),
    default_rating=np.zeros(4, dtype=bool),
    default_emergency=np.zeros(4, dtype=bool),
)
G_PCT_PER_W = np.array([[3e-5, 6e-5, 3e-5], [1e-6, 1e-6, 1e-6]])
"""d(loading)/dP of the two branches w.r.t. each phase of the site (% per W)."""


def _context(**model) -> ControlContext:
    return dataclasses.replace(make_context([toy_model(**model)]), branches=BRANCHES)


def _observation(context: ControlContext, loading_pct: list[float]) -> Observation:
    obs = make_observation(context, 1.0)
    current = np.repeat(np.asarray(loading_pct) * np.array([4.0, 1.0]), [3, 1])
    grid = dataclasses.replace(obs.grid, branches=BRANCHES, branch_current_a=current, branch_loading_pct=loading_pct)
    return dataclasses.replace(obs, grid=grid, _loading_sensitivity=lambda site: G_PCT_PER_W)


def _ofo(context: ControlContext, **params) -> OFOController:
    ctrl = OFOController(OFOController.Config(**params))
    ctrl.reset(context, 0)
    return ctrl


def test_thermal_dual_and_gradient_by_hand() -> None:
    """Loading 110% and 50% of a 100% limit: nu = [0.5 x 0.1, 0], present overload [0.1, 0]; the
    thermal price adds ``k_th (nu + kappa_th w)^T G e pue n P'(x) / L_max`` to the gradient."""
    ctx = _context(replicas=200, itl_deadline_s=None)
    ctrl = _ofo(ctx, thermal=True, thermal_dual_step=0.5, thermal_weight=200.0, thermal_proportional_gain=3.0)
    obs = _observation(ctx, [110.0, 50.0])
    ctrl.update_duals(obs)
    np.testing.assert_allclose(ctrl.nu, [0.05, 0.0], atol=1e-15)
    c = ctrl.curves[("dc1", "m1")]
    x = math.log2(128)
    # balanced site (phase shares 1/3): G e = mean of the row; pue 1, 200 replicas
    dl_dx = G_PCT_PER_W.mean(axis=1) * 200 * c.power_w.slope(x)
    np.testing.assert_allclose(ctrl.loading_slope(obs, "dc1", "m1"), dl_dx, rtol=1e-12)
    price = 200.0 * (0.05 + 3.0 * 0.1) * dl_dx[0] / 100.0
    throughput = -c.throughput_tok_s.slope(x) / c.throughput_tok_s.value(x)
    assert ctrl.gradient(obs, "dc1", "m1") == pytest.approx(throughput + price, rel=1e-12)
    # the same controller without the limit sees only the throughput
    plain = _ofo(ctx)
    plain.update_duals(obs)
    assert plain.gradient(obs, "dc1", "m1") == pytest.approx(throughput, rel=1e-12)
    # under the limit the dual falls back (projected on >= 0) and the present overload is 0
    ctrl.update_duals(_observation(ctx, [95.0, 50.0]))
    np.testing.assert_allclose(ctrl.nu, [0.025, 0.0], atol=1e-15)  # 0.05 + 0.5 (0.95 - 1)
    assert ctrl.gradient(obs, "dc1", "m1") == pytest.approx(throughput + 200.0 * 0.025 * dl_dx[0] / 100.0)


def test_only_the_listed_branches_count_and_names_ignore_case() -> None:
    ctx = _context()
    ctrl = _ofo(ctx, thermal=True, thermal_branches=["TRANSFORMER.T1"], max_loading_pct=40.0)
    ctrl.update_duals(_observation(ctx, [150.0, 50.0]))  # the trunk is far over, but not listed
    np.testing.assert_allclose(ctrl.nu, [50.0 / 40.0 - 1.0])


def test_a_price_stops_rising_while_every_batch_is_at_its_floor() -> None:
    ctx = _context(initial_batch_size=8)
    ctrl = _ofo(ctx, thermal=True)
    ctrl.update_duals(_observation(ctx, [120.0, 50.0]))
    np.testing.assert_array_equal(ctrl.nu, [0.0, 0.0])  # batch control cannot lower it further
    free = _ofo(ctx, thermal=True, dual_anti_windup=False)
    free.update_duals(_observation(ctx, [120.0, 50.0]))
    np.testing.assert_allclose(free.nu, [0.2, 0.0])


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"thermal": True, "max_loading_pct": 0.0}, "max_loading_pct"),
        ({"thermal": True, "max_loading_pct": -5.0}, "max_loading_pct"),
        ({"thermal": True, "max_loading_pct": float("nan")}, "max_loading_pct"),
        ({"thermal": True, "thermal_branches": []}, "thermal_branches"),
        ({"thermal_branches": ["line.trunk"]}, "thermal_branches"),
    ],
    ids=["zero", "negative", "nan", "empty-list", "branches-without-thermal"],
)
def test_bad_thermal_parameters_are_refused(params: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        OFOController.Config(**params)
    assert [err["loc"] for err in info.value.errors()] == [(field,)]


def test_unknown_branch_or_a_grid_without_branches_is_refused_at_reset() -> None:
    with pytest.raises(ControllerError, match=r"\['line.nowhere'\] are not branches.*'line.trunk'"):
        _ofo(_context(), thermal=True, thermal_branches=["line.nowhere"])
    with pytest.raises(ControllerError, match="reports none"):
        _ofo(make_context([toy_model()]), thermal=True)
    _ofo(make_context([toy_model()]))  # no thermal limit asked: a grid without branches is fine


def test_loading_forecast_cost_and_its_planes_by_hand() -> None:
    """Two channels, one branch, two steps: L = base + sum_c gain_c dW_c, cost = weight sum [L - limit]_+;
    the slope is the gains of the overloaded steps, and its plane lies under the cost everywhere
    (also from a kink, where a step sits at the limit)."""
    forecast = LoadingForecast(
        base=np.array([[99.0, 99.5]]), gain=np.array([[[1e-5, 2e-5]], [[3e-5, 3e-5]]]), limit_pct=100.0, weight=2.0
    )
    dw = np.array([[1e5, 0.0], [0.0, 5e4], [-1e5, 1e5], [0.0, 1e5], [0.0, 0.0]])
    # loadings: [100, 101.5], [100.5, 101], [101, 100.5], [102, 102.5], [99, 99.5]
    np.testing.assert_allclose(forecast.cost(dw), [2.0 * 1.5, 2.0 * 1.5, 2.0 * 1.5, 2.0 * 4.5, 0.0])
    slope = forecast.slope(dw)
    np.testing.assert_allclose(slope[1:], 2.0 * np.array([[3e-5, 6e-5], [3e-5, 6e-5], [3e-5, 6e-5], [0.0, 0.0]]))
    np.testing.assert_allclose(slope[0], 2.0 * np.array([2e-5, 3e-5]))  # step 1 at the limit: not counted
    y = np.random.default_rng(0).normal(0.0, 1e5, (200, 2))
    for x, g in zip(dw, slope):
        assert np.all(forecast.cost(y) >= forecast.cost(x[None])[0] + (y - x) @ g - 1e-9)


def _mpc(context: ControlContext, **params) -> MPCController:
    ctrl = MPCController(MPCController.Config(horizon_steps=3, max_move_log2=10.0, **params))
    ctrl.reset(context, 0)
    return ctrl


def test_mpc_overload_term_by_hand_and_its_exact_solution() -> None:
    """The trunk at 99% of a 100% limit, voltages mid-band: without the limit MPC takes the
    largest batch; with it the forecast is the present loading plus ``G e a_k dW`` (balanced
    site: ``G e`` the row mean), its cost ``w_L dt / N`` per % over, and the solver's choice is
    the enumerated minimum, a smaller batch whose predicted loading stays under the limit."""
    ctx = _context(replicas=200, itl_deadline_s=None, initial_batch_size=32)
    obs = _observation(ctx, [99.0, 50.0])
    free = _mpc(ctx)
    free_prob = free.problem(obs)
    assert free_prob.thermal is None and free_prob.options[0].batches[free_prob.solve(10**6)[0]] == 512
    ctrl = _mpc(ctx, thermal=True, overload_weight=50.0)
    prob = ctrl.problem(obs)
    assert prob.thermal is not None
    k = np.arange(1, 4)  # dt 1 s; fills and the batch in force with tau_up = 1 s, cuts drain from 32
    info = ctx.sites["dc1"].models["m1"]
    up = 1.0 - np.exp(-k / 1.0)
    down = 1.0 - np.exp(-k / (200.0 * info.itl_s[info.batch_sizes.index(32)]))
    gl = G_PCT_PER_W.mean(axis=1)
    np.testing.assert_allclose(prob.thermal.base, [[99.0] * 3, [50.0] * 3])
    # channels: the site's fills, the model's cut, its transition under way (none: as a fill)
    np.testing.assert_allclose(prob.thermal.gain, [np.outer(gl, a) for a in (up, down, up)], rtol=1e-12)
    opt = prob.options[0]
    a_k = np.where((opt.batches < 32)[:, None], down, up)
    by_hand = [50.0 / 3 * np.maximum(99.0 + gl[0] * a * w - 100.0, 0.0).sum() for a, w in zip(a_k, opt.dw_w)]
    np.testing.assert_allclose(prob.thermal.cost(prob._dw(np.arange(opt.batches.size)[:, None])), by_hand, rtol=1e-12)
    combos = np.array(list(itertools.product(*[range(o.batches.size) for o in prob.options])))
    best = combos[int(np.argmin(prob.cost(combos)))]
    choice = prob.solve(10**6)
    np.testing.assert_array_equal(choice, best)
    assert prob.options[0].batches[choice[0]] < 512
    assert 99.0 + gl[0] * a_k[choice[0], -1] * opt.dw_w[choice[0]] <= 100.0  # within the horizon


def _thermal_problem(rng: np.random.Generator, v_mid: float, g_pu_per_w: float) -> MPCProblem:
    """Four models on two sites (six options each, the third in force) with their own fill, cut and
    drain gains (of scale ``g_pu_per_w``), and two branches near a 100% limit that larger batches overload."""
    options = tuple(
        ModelOptions(
            site=i % 2,
            batches=np.arange(6),
            dw_w=np.linspace(-3e5, 3e5, 6) * rng.uniform(0.5, 1.5),
            value=np.sort(rng.random(6)),
            batch_now=2,
        )
        for i in range(4)
    )
    j, b, n = 4, 2, 3
    return MPCProblem(
        base=v_mid + rng.normal(0, 0.003, (j, n)),
        sigma=np.full((j, n), 0.001),
        gain=-np.abs(rng.normal(0, 3 * g_pu_per_w, (2, j, n))),
        options=options,
        v_lo=0.95,
        v_hi=1.05,
        violation_weight=300.0,
        fall_gain=-np.abs(rng.normal(0, g_pu_per_w, (4, j, n))),
        drain_gain=-np.abs(rng.normal(0, g_pu_per_w, (4, j, n))),
        thermal=LoadingForecast(
            base=rng.uniform(97.0, 101.0, (b, n)),
            gain=np.abs(rng.normal(0, 5e-6, (2 + 8, b, n))),
            limit_pct=100.0,
            weight=0.05,
        ),
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("v_mid", "g_pu_per_w"), [(0.951, 1e-8), (1.0, 1e-9)])
def test_mpc_cutting_planes_with_the_overload_term_match_brute_force(
    seed: int, v_mid: float, g_pu_per_w: float
) -> None:
    """The overload term inside the exact solver: its choice is the enumerated minimum of the full
    cost, near the voltage limit and mid-band (where no bus-phase counts and the overload alone
    opposes throughput), and the overload changes the choice somewhere."""
    prob = _thermal_problem(np.random.default_rng(seed), v_mid, g_pu_per_w)
    combos = np.array(list(itertools.product(*[range(o.batches.size) for o in prob.options])))
    np.testing.assert_array_equal(prob.solve(10**6), combos[int(np.argmin(prob.cost(combos)))])
    if v_mid == 1.0:
        assert prob.relevant_rows().size == 0
        free = dataclasses.replace(prob, thermal=None)
        assert prob.thermal is not None and prob.thermal.cost(prob._dw(free.solve(10**6)[None]))[0] > 0


SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "ieee13_thermal_ofo.yaml"


def _trunk_loading(run_dir: Path) -> pd.Series:
    table = pd.read_parquet(run_dir / "grid_branches")
    return table[table["branch"].astype(str) == "line.650632"].groupby("t_s")["loading_pct"].max()


def test_ofo_with_the_thermal_limit_brings_the_trunk_under_its_rating(tmp_path: Path) -> None:
    """90 s of the bundled case (the inference load stays at its level): the trunk starts at ~106%.
    Without the limit OFO has nothing to fix and raises the batches (the line goes further over);
    with it the loading is near the 98% aimed at within 30 s and stays within a few tenths of a
    percent of the rating: the batch hysteresis holds a size until x is past the midpoint by h / 2,
    where without it the batch switched between two sizes up to 36 times a minute."""
    short = ["duration_s=90", "outputs.plots=false"]
    off = ["controllers.0.params.thermal=false", "controllers.0.params.thermal_branches=null"]
    without = run_scenario(SCENARIO, tmp_path / "without", overrides=[*short, *off]).summary
    with_limit = run_scenario(SCENARIO, tmp_path / "with", overrides=short).summary
    loose, held = _trunk_loading(tmp_path / "without"), _trunk_loading(tmp_path / "with")
    assert loose.iloc[0] > 105.0 and held.iloc[0] == loose.iloc[0]  # the same start
    assert loose[loose.index >= 30].min() > 105.0
    assert held[held.index >= 30].max() < 100.5 and held[held.index >= 30].mean() < 98.0
    assert with_limit["max_batch_reversals_per_min"] <= 6
    assert with_limit["overload_integral_pct_s"] < 0.05 * without["overload_integral_pct_s"]
    # the price of the limit is throughput: the batches it holds down
    assert with_limit["mean_throughput_tok_s"] < without["mean_throughput_tok_s"]


def test_mpc_with_the_thermal_limit_brings_the_trunk_under_its_rating(tmp_path: Path) -> None:
    """The same case under MPC: with the limit the loading is under the rating from 30 s on, and
    under the 98% aimed at on average (the traces' noise swings it by a few tenths)."""
    mpc = "controllers=[{kind: mpc, params: {thermal: true, max_loading_pct: 98, miss_fraction_target: 0.05}}]"
    without = run_scenario(
        SCENARIO, tmp_path / "without", overrides=["duration_s=90", "outputs.plots=false", mpc.replace("true", "false")]
    )
    with_limit = run_scenario(SCENARIO, tmp_path / "with", overrides=["duration_s=90", "outputs.plots=false", mpc])
    loose, held = _trunk_loading(tmp_path / "without"), _trunk_loading(tmp_path / "with")
    assert loose[loose.index >= 30].min() > 105.0
    assert held[held.index >= 30].max() < 100.0 and held[held.index >= 30].mean() < 98.0
    assert with_limit.summary["overload_integral_pct_s"] < 0.05 * without.summary["overload_integral_pct_s"]

"""The env and the rl_policy controller on the real backends (bundled traces, openg2g-ieee13 feeder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from openg2g.core.errors import G2GError
from openg2g.envs import G2GEnv
from openg2g.record.metrics import MetricsRecorder
from openg2g.scenario.build import ComponentBuilder

SHORT = Path(__file__).resolve().parents[2] / "scenarios" / "rl_ieee13_short.yaml"


@pytest.fixture(scope="module")
def real_env():
    return G2GEnv.from_scenario(SHORT, episode_steps=12)


def test_check_env_on_ieee13(real_env):
    check_env(real_env, skip_render_check=True)
    assert real_env.action_space.nvec.tolist() == [3] * 5
    assert real_env.layout.feature_names[:3] == ("v.all.min", "v.all.max", "v.all.mean")


def test_ieee13_seeded_episodes_repeat(real_env):
    def rollout(seed):
        obs, _ = real_env.reset(seed=seed)
        rng = np.random.default_rng(0)
        out = [obs]
        rewards = []
        for _ in range(6):
            obs, reward, *_ = real_env.step(rng.integers(0, 3, size=5))
            out.append(obs)
            rewards.append(reward)
        return np.array(out), np.array(rewards)

    a, b = rollout(4), rollout(4)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_down_lowers_power_on_ieee13(real_env):
    real_env.reset(seed=0, options={"variation": "as_written"})
    i = real_env.layout.feature_names.index("dc1.power")
    first = real_env.step(np.ones(5, dtype=np.int64))[0][i]
    for _ in range(5):
        obs = real_env.step(np.zeros(5, dtype=np.int64))[0]
    assert obs[i] < first


def test_no_control_baseline_runs_on_components_of_its_own():
    """On the real backends the reference run must not share the agent's site and grid: holding
    (no command) then gives the reference's own run, draw for draw, and a reward of exactly 0; an
    action that moves a batch size is scored against the run that did not."""
    env = G2GEnv.from_scenario(SHORT, episode_steps=6, reward_baseline="no_control", miss_budget=None)
    env.reset(seed=2)
    assert not {id(c) for c in (*env.sim.sites, env.sim.grid)} & {
        id(c) for c in (*env.reference.sites, env.reference.grid)
    }
    hold = np.ones(5, dtype=np.int64)
    assert [env.step(hold)[1] for _ in range(3)] == [0.0, 0.0, 0.0]
    _, reward, *_, info = env.step(np.zeros(5, dtype=np.int64))  # every model one batch size down
    assert reward != 0.0 and info["reference_reward"] != reward


def test_no_control_baseline_refuses_a_factory_that_reuses_objects():
    built = {}

    def cached(loaded):  # one set of components for every run, as a careless cache would give
        if not built:
            built["c"] = ComponentBuilder()(loaded)
        return built["c"]

    env = G2GEnv.from_scenario(SHORT, components=cached, episode_steps=6, reward_baseline="no_control")
    with pytest.raises(ValueError, match="gave both runs the same site or grid objects"):
        env.reset(seed=0)


@pytest.mark.slow  # needs the session's PPO run on the toy (trained_toy)
def test_toy_policy_refused_by_ieee13(trained_toy, tmp_path, real_env):
    """A policy trained on the toy case does not fit ieee13: the run stops with both shapes named."""
    from openg2g.cli.evaluate import evaluate_policy

    result, _ = trained_toy
    with pytest.raises(
        G2GError, match=r"observation: the scenario gives Box\(shape=\(30,\)\), the policy expects Box\(shape=\(15,\)\)"
    ):
        evaluate_policy(result.policy, [SHORT], tmp_path, overrides=["duration_s=5", "events=[]"])


@pytest.mark.slow  # trains on the real IEEE 13 env through the CLI
def test_train_then_evaluate_cli_on_ieee13(real_env, tmp_path, capsys):
    """A (barely) trained ieee13 policy runs through ``openg2g evaluate`` and prints the compare table."""
    from openg2g.cli.main import main
    from openg2g.envs.training import TrainSettings, train_policy

    result = train_policy(
        SHORT,
        tmp_path / "train",
        steps=64,
        n_envs=1,
        env_config={"episode_steps": 12},
        settings=TrainSettings(n_steps=32, batch_size=32),
        eval_episodes=0,
        progress=False,
        log=lambda _: None,
    )
    code = main(
        [
            "evaluate",
            str(result.policy),
            "--scenarios",
            str(SHORT),
            "--out",
            str(tmp_path / "eval"),
            "--set",
            "duration_s=5",
            "--set",
            "events=[]",
            "--baseline",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "rl_ieee13_short (policy)" in out and "rl_ieee13_short (as written)" in out and "viol. integral" in out
    assert (tmp_path / "eval" / "rl_ieee13_short" / "summary.json").is_file()

    # held-out variation 0 run as a scenario with the policy as controller == the env's eval episode 0
    from openg2g.cli.evaluate import evaluate_policy
    from openg2g.envs.policy import load_policy

    rows = evaluate_policy(result.policy, [SHORT], tmp_path / "held_out", held_out=1)
    assert [label for label, _ in rows] == ["rl_ieee13_short#0 (policy)"]
    model, _ = load_policy(result.policy)
    env = G2GEnv.from_scenario(SHORT, episode_steps=12)
    obs, _ = env.reset(options={"eval_index": 0})
    done = False
    while not done:
        obs, _, terminated, truncated, _ = env.step(model.predict(obs, deterministic=True)[0])
        done = terminated or truncated
    in_env = env.sim.recorder(MetricsRecorder).figures()
    for key in ("violation_integral_pu_s", "energy_mwh", "mean_throughput_tok_s", "n_batch_changes"):
        assert rows[0][1][key] == pytest.approx(in_env[key], rel=1e-9), key


@pytest.mark.slow
def test_bundled_policy_runs_as_stock_controller(real_env, tmp_path):
    """``kind: rl_policy`` with the bundled ``ieee13_ppo`` policy, through the loader and the engine."""
    from pathlib import Path

    import openg2g.controllers
    from openg2g.scenario.run import run_scenario

    if not (Path(openg2g.controllers.__file__).parent / "policies" / "ieee13_ppo.zip").is_file():
        pytest.skip("no bundled ieee13_ppo policy")
    overrides = ["duration_s=10", "events=[]", "controllers=[{kind: rl_policy, params: {policy: ieee13_ppo}}]"]
    result = run_scenario(SHORT, tmp_path / "run", overrides=overrides)
    assert result.summary["status"] == "complete"
    assert (tmp_path / "run" / "summary.json").is_file()

    # the bundled policy was trained with a 5% deadline budget, and deployment keeps its mask: after
    # the first control instant every model runs a size whose miss fraction is within the budget
    from openg2g.envs.policy import read_meta
    from openg2g.plot.run import read_table

    meta = read_meta(Path(openg2g.controllers.__file__).parent / "policies" / "ieee13_ppo.zip")
    assert meta.env.miss_budget == 0.05
    allowed = {key.split("/")[1]: sizes for key, sizes in meta.layout["allowed_batch_sizes"].items()}
    models = read_table(tmp_path / "run", "models")
    after = models[models["t_s"] > 1.0]
    for model, df in after.groupby("model", observed=True):
        assert set(df["batch_size"]) <= set(allowed[model]), model


@pytest.mark.slow  # two runs of the whole hour: a few minutes on 2 cores
def test_bundled_tap_policy_beats_rule_based_on_the_hour(tmp_path):
    """``ieee13_ppo_taps`` (batch sizes and reg1's taps) runs the hour of ``ieee13_none`` with less
    voltage violation than ``ieee13_rule_based``, every model within the 5% deadline-miss budget, and
    moves reg1's taps fewer than 100 steps in the hour (scheduled ``set_taps`` events included): it was
    trained with a cost per tap step (the ``tap_changes`` reward term)."""
    from openg2g.plot.run import read_table
    from openg2g.scenario.run import run_scenario

    scenarios = SHORT.parent
    policy = run_scenario(
        scenarios / "ieee13_none.yaml",
        tmp_path / "policy",
        overrides=["controllers=[{kind: rl_policy, params: {policy: ieee13_ppo_taps}}]"],
    )
    rule_based = run_scenario(scenarios / "ieee13_rule_based.yaml", tmp_path / "rule_based")
    assert policy.summary["sim_time_s"] == rule_based.summary["sim_time_s"] == 3600.0
    assert policy.summary["violation_integral_pu_s"] < rule_based.summary["violation_integral_pu_s"]
    assert policy.summary["n_tap_changes"] < 100
    models = read_table(tmp_path / "policy", "models")
    missed = (models["throughput_tok_s"] * models["deadline_miss_fraction"]).groupby(models["model"], observed=True)
    fraction = missed.sum() / models.groupby("model", observed=True)["throughput_tok_s"].sum()
    assert len(fraction) == 5 and (fraction <= 0.05).all(), fraction.to_dict()

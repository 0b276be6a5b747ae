"""The Gymnasium contract of G2GEnv on the analytic toy case: spaces, seeding, episode ends, reward."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import openg2g.envs  # noqa: F401  (registers the ids)
from openg2g.core.errors import PowerFlowError
from openg2g.envs import G2GEnv, make_toy_env
from openg2g.testing import K_PU_PER_W, AnalyticGrid, toy_components, toy_scenario


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"action": "box"},
        {"observation": {"voltages": "bus_phases", "site_power": False}},
        {"observation": {"zones": {"near": ["dc"], "far": ["mid"]}}, "variations": None},
        {"reward_baseline": "no_control"},
    ],
)
def test_check_env_passes(config):
    env = make_toy_env(duration_s=11, **config)
    check_env(env, skip_render_check=True)


def test_registered_ids_make_envs():
    env = gymnasium.make("openg2g/Toy-v0", episode_steps=5)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert isinstance(env.unwrapped, G2GEnv)
    assert "openg2g/IEEE13-v0" in gymnasium.registry


@pytest.mark.parametrize(
    ("env_id", "kwargs", "steps"),
    [
        ("openg2g/IEEE13-v0", {}, 300),  # registered episode_steps
        ("openg2g/Toy-v0", {}, 59),  # the whole 60 s toy scenario: 60 one-second periods less the first
        ("openg2g/Toy-v0", {"episode_steps": 5}, 5),
    ],
)
def test_spec_states_the_episode_length(env_id, kwargs, steps):
    env = gymnasium.make(env_id, **kwargs)
    assert env.spec is not None and env.spec.max_episode_steps == steps == env.unwrapped.episode_steps


def test_made_env_truncates_at_its_spec_length_and_passes_the_checker():
    env = gymnasium.make("openg2g/Toy-v0", episode_steps=5)
    check_env(env.unwrapped, skip_render_check=True)
    env.reset(seed=0)
    ends = [env.step(np.ones(2, dtype=np.int64))[3] for _ in range(env.spec.max_episode_steps)]
    assert ends == [False] * 4 + [True]


def test_spaces_follow_the_scenario(toy_env):
    assert toy_env.action_space == gymnasium.spaces.MultiDiscrete([3, 3])
    names = toy_env.layout.feature_names
    assert toy_env.observation_space.shape == (len(names),)
    assert names[:3] == ("v.all.min", "v.all.max", "v.all.mean")
    assert "dc/toy-b.log2_batch" in names


def _rollout(env, seed, n=25):
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(123)
    observations, rewards = [obs], []
    for _ in range(n):
        action = rng.integers(0, 3, size=env.action_space.shape)
        obs, reward, terminated, truncated, _ = env.step(action)
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            break
    return np.array(observations), np.array(rewards), info["variation"]


def test_same_seed_same_episode(toy_env):
    obs1, rew1, var1 = _rollout(toy_env, seed=7)
    obs2, rew2, var2 = _rollout(toy_env, seed=7)
    np.testing.assert_array_equal(obs1, obs2)
    np.testing.assert_array_equal(rew1, rew2)
    assert var1 == var2
    obs3, _, var3 = _rollout(toy_env, seed=8)
    assert var3 != var1 and not np.array_equal(obs3, obs1)


def test_two_envs_same_seed_agree():
    a, b = make_toy_env(duration_s=21), make_toy_env(duration_s=21)
    np.testing.assert_array_equal(_rollout(a, seed=3)[1], _rollout(b, seed=3)[1])


def test_truncated_at_episode_end_not_terminated():
    env = make_toy_env(duration_s=60, episode_steps=4)
    _, info = env.reset(seed=0)
    assert info["t_s"] == 1.0
    flags = []
    for _ in range(4):
        _, _, terminated, truncated, info = env.step(np.ones(2, dtype=np.int64))
        flags.append((terminated, truncated))
    assert flags == [(False, False)] * 3 + [(False, True)]
    assert info["t_s"] == 5.0
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.ones(2, dtype=np.int64))


class _FailingGrid(AnalyticGrid):
    def solve(self, t_s, loads, dt_s):
        if t_s > 3.0:
            raise PowerFlowError(f"t={t_s}: toy power flow did not converge")
        return super().solve(t_s, loads, dt_s)


def test_failed_simulation_terminates_with_penalty():
    def components(loaded):
        sites, _, ctrls = toy_components(loaded)
        return sites, _FailingGrid(), ctrls

    env = G2GEnv(toy_scenario(20), {"reward": {"failure": 7.0}}, components=components)
    env.reset(seed=0)
    results = [env.step(np.ones(2, dtype=np.int64)) for _ in range(3)]
    _, reward, _, truncated, info = results[-1]
    assert [r[2] for r in results] == [False, False, True]
    assert not truncated and info["failed"] and "converge" in info["error"]
    assert reward < -6.0


def test_down_action_lowers_batch_and_reward_terms_are_consistent(toy_env):
    obs, _ = toy_env.reset(seed=0, options={"variation": "as_written"})
    i = toy_env.layout.feature_names.index("dc/toy-a.log2_batch")
    obs2, reward, _, _, info = toy_env.step(np.zeros(2, dtype=np.int64))
    assert obs2[i] < obs[i]
    assert info["n_batch_changes"] == 2
    w = toy_env.config.reward
    expected = (
        -w.voltage * info["voltage_violation_pu"]
        + w.throughput * info["throughput_fraction"]
        - w.latency * info["deadline_miss_fraction"]
        - w.switching * 1.0
    )
    assert reward == pytest.approx(expected)


def test_voltage_penalty_matches_toy_physics():
    """Hold the batches: the step's violation equals the toy feeder's closed-form drop below 0.95 pu."""
    env = make_toy_env(duration_s=10, training=False, overrides=["grid.pv=[]"], variations=None)
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.ones(2, dtype=np.int64))
    dc = env.sim.observation().datacenters["dc"]
    p_phase = float(dc.p_w.mean())  # noise is small; compare within a tolerance
    net = p_phase + 1000.0
    v_dc = 1.0 - K_PU_PER_W * net
    v_mid = 1.0 - 0.5 * K_PU_PER_W * net
    expected = 3 * (max(0.95 - v_dc, 0) + max(0.95 - v_mid, 0))
    assert expected > 0.01
    assert info["voltage_violation_pu"] == pytest.approx(expected, rel=0.15, abs=2e-3)


def test_eval_mode_cycles_the_held_out_set():
    env = make_toy_env(duration_s=11, mode="eval", n_eval=3)
    drawn = [env.reset()[1]["variation"] for _ in range(4)]
    assert drawn[0] == drawn[3] and drawn[0] != drawn[1]
    other = make_toy_env(duration_s=11, n_eval=3)
    assert other.reset(seed=99, options={"eval_index": 1})[1]["variation"] == drawn[1]


def _episode(env: G2GEnv, actions: list[np.ndarray]) -> tuple[np.ndarray, list[dict]]:
    env.reset(seed=5)
    steps = [env.step(a) for a in actions]
    return np.array([s[1] for s in steps]), [s[4] for s in steps]


def test_no_control_baseline_subtracts_the_run_without_commands_on_the_same_draw():
    """Holding sends no command, so on the toy case (no miss budget) the reference run is the hold run:
    the agent's rewards minus the hold run's rewards, step by step, and holding earns exactly 0."""
    plain = make_toy_env(duration_s=31)
    based = make_toy_env(duration_s=31, reward_baseline="no_control")
    n = plain.episode_steps
    rng = np.random.default_rng(3)
    actions = [rng.integers(0, 3, len(plain.layout.controlled)) for _ in range(n)]
    hold = [np.ones(len(plain.layout.controlled), dtype=np.int64)] * n
    agent, _ = _episode(plain, actions)
    reference, _ = _episode(plain, hold)
    relative, infos = _episode(based, actions)
    assert np.abs(agent - reference).max() > 0.1  # the actions matter, so the check below is not trivial
    assert relative == pytest.approx(agent - reference, abs=1e-12)
    assert [i["reference_reward"] for i in infos] == pytest.approx(reference, abs=1e-12)
    assert np.array_equal(_episode(based, hold)[0], np.zeros(n))

"""Stable-Baselines3's vectorized envs and Gymnasium's render modes on the toy env."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

import openg2g.envs  # noqa: F401  (registers the ids)
from openg2g.envs import make_toy_env
from openg2g.envs.render import FRAME_SHAPE


def _play(vec, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Observations and rewards of ``steps`` vec steps under a fixed action sequence."""
    rng = np.random.default_rng(5)
    observations, rewards = [vec.reset()], []
    for _ in range(steps):
        actions = rng.integers(0, 3, size=(vec.num_envs, *vec.action_space.shape))
        obs, reward, _, _ = vec.step(actions)
        observations.append(obs)
        rewards.append(reward)
    return np.array(observations), np.array(rewards)


@pytest.mark.slow
def test_subprocess_vec_env_matches_the_in_process_one():
    """make_vec_env by id passes render_mode="rgb_array"; two subprocess envs step like two in-process ones.

    The ``module:`` prefix makes each subprocess import ``openg2g.envs`` (which registers the ids).
    """
    kwargs = {"episode_steps": 4}  # 7 steps cross an episode end: the auto-reset must agree too
    env_id = "openg2g.envs:openg2g/Toy-v0"
    sub = make_vec_env(env_id, n_envs=2, seed=11, vec_env_cls=SubprocVecEnv, env_kwargs=kwargs)
    dummy = make_vec_env(env_id, n_envs=2, seed=11, vec_env_cls=DummyVecEnv, env_kwargs=kwargs)
    try:
        assert sub.render_mode == "rgb_array"
        obs_sub, rew_sub = _play(sub, 7)
        obs_dummy, rew_dummy = _play(dummy, 7)
        assert obs_sub.shape == (8, 2, *sub.observation_space.shape)
        np.testing.assert_array_equal(obs_sub, obs_dummy)
        # DummyVecEnv keeps rewards in a float32 buffer, SubprocVecEnv stacks the envs' float64 ones
        np.testing.assert_array_equal(rew_sub.astype(np.float32), rew_dummy)
        assert not np.array_equal(obs_sub[:, 0], obs_sub[:, 1])  # seeds 11 and 12 draw different variations
        tiled = sub.render()
        assert tiled.dtype == np.uint8 and tiled.shape == (2 * FRAME_SHAPE[0], FRAME_SHAPE[1], 3)  # one above the other
    finally:
        sub.close()
        dummy.close()


@pytest.mark.slow  # subprocess envs; test_subprocess_vec_env_matches_the_in_process_one stays in the fast path
def test_make_vec_env_with_a_factory_function():
    vec = make_vec_env(make_toy_env, n_envs=2, seed=0, env_kwargs={"duration_s": 11}, vec_env_cls=SubprocVecEnv)
    try:
        observations, rewards = _play(vec, 3)
        assert np.isfinite(observations).all() and np.isfinite(rewards).all()
    finally:
        vec.close()


@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_check_env_passes_with_rendering(mode):
    """Through gymnasium.make the env has a spec, so check_env also renders in the other mode."""
    env = gymnasium.make("openg2g/Toy-v0", render_mode=mode, duration_s=11).unwrapped
    assert env.render_mode == mode and mode in env.metadata["render_modes"]
    check_env(env)


def test_unknown_render_mode_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"render_mode 'human' is not supported; use one of \['ansi', 'rgb_array'\]"):
        make_toy_env(duration_s=11, render_mode="human")


def test_render_before_reset_and_without_a_mode():
    with pytest.raises(gymnasium.error.ResetNeeded, match="call reset"):
        make_toy_env(duration_s=11, render_mode="ansi").render()
    env = make_toy_env(duration_s=11)
    env.reset(seed=0)
    assert env.render() is None


def test_frames_show_each_voltage_against_the_band():
    """Largest batches pull bus dc below 0.95 pu: its three columns turn red, bus mid's stay green."""
    env = make_toy_env(duration_s=11, variations=None, render_mode="rgb_array")
    env.reset(seed=0)
    env.step(np.array([2, 2]))
    env.step(np.array([2, 2]))
    grid = env.sim.observation().grid
    inside = (grid.v_pu >= 0.95) & (grid.v_pu <= 1.05)
    assert inside.any() and not inside.all(), grid.v_pu  # the test needs both kinds
    frame = env.render()
    assert frame.shape == FRAME_SHAPE
    bottom_row = frame[FRAME_SHAPE[0] - 9]
    width = 2 * FRAME_SHAPE[1] // 3 - 16
    centres = 8 + (np.arange(6) + 0.5) * width / 6
    colours = [tuple(bottom_row[int(c)]) for c in centres]
    assert colours == [(46, 160, 67) if ok else (214, 39, 40) for ok in inside]


def test_ansi_text_names_the_extremes():
    env = make_toy_env(duration_s=11, variations=None, render_mode="ansi")
    env.reset(seed=0)
    env.step(np.array([1, 1]))
    text = env.render()
    grid = env.sim.observation().grid
    low = grid.bus_phases[int(np.argmin(grid.v_pu))]
    assert text.startswith("t = 2 s, step 1 of 10\n")
    assert f"voltage {grid.v_pu.min():.4f} pu ({low})" in text
    assert "dc/toy-a: batch 128," in text and "dc/toy-b: batch 64," in text

"""Shared fixtures: the toy env and one short PPO run on it (trained once per test session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openg2g.envs import make_toy_env
from openg2g.envs.training import TrainResult, train_policy

TOY_STEPS = 5000


@pytest.fixture
def toy_env():
    env = make_toy_env(duration_s=31)
    yield env
    env.close()


@pytest.fixture(scope="session")
def trained_toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[TrainResult, Path]:
    """PPO on the toy case, 2 envs in subprocesses, a few thousand steps (~30 s on 2 cores)."""
    out = tmp_path_factory.mktemp("train_toy")
    result = train_policy(
        "toy",
        out,
        algo="ppo",
        steps=TOY_STEPS,
        n_envs=2,
        seed=0,
        overrides=["duration_s=31"],
        checkpoint_every=2000,
        eval_episodes=4,
        progress=False,
        log=lambda _: None,
    )
    return result, out

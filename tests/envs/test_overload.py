"""Branch loading in the env: the ``grid.max_loading`` feature and the ``overload`` reward term,
against the branch table of the same scenario run by the engine (one line overloaded while the
site is online, 20-39 s; see tests/grid/overload_case.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from openg2g.envs import make_env
from openg2g.scenario.run import run_scenario
from tests.grid.overload_case import OVERLOAD

ONLY_OVERLOAD = {"voltage": 0, "overload": 1, "throughput": 0, "latency": 0, "switching": 0, "failure": 0}


def test_loading_feature_and_overload_term_follow_the_branch_table(tmp_path: Path) -> None:
    path = tmp_path / "overload.yaml"
    path.write_text(yaml.safe_dump(OVERLOAD))
    run_scenario(path, tmp_path / "run")
    table = pd.read_parquet(tmp_path / "run" / "grid_branches")
    loading = table.assign(branch=table["branch"].astype(str)).groupby(["t_s", "branch"])["loading_pct"].max()
    max_loading = loading.groupby("t_s").max()
    excess = (loading - 100.0).clip(lower=0.0).groupby("t_s").sum()

    env = make_env(path, variations=None, observation={"branch_loading": True}, reward=ONLY_OVERLOAD, episode_steps=50)
    feature = env.unwrapped.layout.feature_names.index("grid.max_loading")
    obs, info = env.reset(seed=0)
    assert obs[feature] == pytest.approx(max_loading[info["t_s"]] / 100.0, rel=1e-6)
    stay = np.ones(env.action_space.shape, dtype=np.int64)
    overloads = []
    for _ in range(50):
        obs, reward, _, _, info = env.step(stay)
        t = info["t_s"]
        assert obs[feature] == pytest.approx(max_loading[t] / 100.0, rel=1e-6)  # float32 feature
        # one grid step of 1 s per control period: the step's overload is that grid step's excess
        assert info["overload_fraction"] == pytest.approx(excess[t] / 100.0, rel=1e-12, abs=1e-15)
        assert reward == -info["overload_fraction"]
        overloads.append(info["overload_fraction"])
    over_steps = [t for t, o in zip(range(2, 52), overloads) if o > 0]
    assert over_steps == list(range(20, 40))  # the site's online window, nothing else
    env.close()


def test_without_the_option_the_layout_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "overload.yaml"
    path.write_text(yaml.safe_dump(OVERLOAD))
    plain = make_env(path, variations=None, episode_steps=5)
    loaded = make_env(path, variations=None, observation={"branch_loading": True}, episode_steps=5)
    names = plain.unwrapped.layout.feature_names
    assert "grid.max_loading" not in names
    assert loaded.observation_space.shape == (len(names) + 1,)

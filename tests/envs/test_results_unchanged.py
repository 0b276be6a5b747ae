"""Speed-ups of the env's path must not change a number: digests of seeded ieee13 runs, recorded on
the code before the env-throughput work (main at 69782d8), compared bit for bit. The run's digest
was recorded again after one deliberate model change: OFO's hysteresis default (2026-11-26), which
sends 3 commands in the first 20 s where it sent 4.

The env rollout goes through scenario variations (drawn seeds, training jobs, inference ramps) and
random batch-size actions, so it covers the datacenter's transitions, ramps and phase tables and the
grid's batched solves; the run covers the output tables of an ``openg2g run`` with a controller
that sends batch-size commands. A digest that changes means a result changed: find out why before
updating it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from openg2g.engine.simulation import run_scenario
from openg2g.envs import G2GEnv

ROLLOUT_SHA256 = "ae2ad03b16f5b6a06aac07dfe90615d3643a7c631c39f2d3bd398c9e4ca21b5b"
RUN_TABLES_SHA256 = "c40fcf4608f568a29d5f59e9bdf2988193d1328bfb6c8464243afe861f03fcda"
TERMS = ("voltage_violation_pu", "overload_fraction", "throughput_fraction", "deadline_miss_fraction")


def _rollout_digest(env: G2GEnv, seeds: tuple[int, ...], steps: int) -> str:
    """sha256 over every observation, reward and reward term of ``steps`` seeded random steps per seed."""
    digest = hashlib.sha256()
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        digest.update(obs.tobytes())
        rng = np.random.default_rng(seed)
        for _ in range(steps):
            obs, reward, terminated, truncated, info = env.step(rng.integers(0, 3, size=5))
            digest.update(obs.tobytes())
            digest.update(np.array([reward, *(info[k] for k in TERMS)], dtype=np.float64).tobytes())
            if terminated or truncated:
                break
    return digest.hexdigest()


def _tables_digest(out: Path) -> str:
    """sha256 over the values of every table of a run folder, table by table in name order."""
    digest = hashlib.sha256()
    for table in sorted(p for p in out.iterdir() if p.is_dir()):
        frame = pd.read_parquet(table)
        digest.update(table.name.encode())
        digest.update(",".join(frame.columns).encode())
        digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return digest.hexdigest()


def test_ieee13_env_rollout_is_unchanged():
    env = G2GEnv.from_scenario("ieee13_none", episode_steps=25)
    assert _rollout_digest(env, (0, 7), 25) == ROLLOUT_SHA256


def test_run_tables_are_unchanged(tmp_path):
    run_scenario("ieee13_ofo", tmp_path, overrides=["duration_s=20", "outputs.plots=false"])
    assert _tables_digest(tmp_path) == RUN_TABLES_SHA256

"""Digest of every bundled scenario's output tables, to check that a refactor changes nothing.

Runs each bundled run scenario (``scenarios/*.yaml`` that are runs, not sweeps, studies or benchmark suites) through
the CLI with every table on (``outputs.voltages: all``) and plots off, reads each table back, and
prints one SHA-256 per table over its column names, types and values (the bytes of the parquet
files also carry writer metadata, so the data is hashed, not the files), plus the summary
figures that do not depend on the wall clock. Two runs of this script on two commits print the
same lines exactly when every table is bit-identical::

    python bench/table_digests.py > before.txt
    # ... change the code ...
    python bench/table_digests.py > after.txt && diff before.txt after.txt

``--env-steps N`` adds one line: the digest of a seeded ``openg2g/IEEE13-v0`` rollout of ``N``
steps with fixed random actions (observations, rewards, flags and infos; 300-step episodes, then
120-step ones with ``reward_baseline="no_control"``), run with the code of ``--root`` too.
``--duration-s`` shortens every run (a quick check while working; the full check runs each
scenario for its own duration). ``--only`` picks scenarios by name (``--only`` alone: none, e.g.
with ``--env-steps``). ``--root`` runs another checkout's code (a git worktree of an older
commit); ``--keep DIR`` keeps every run's outputs in ``DIR/<name>`` for ``bench/table_compare.py``,
which says by how much two sets differ when they are not identical.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
_WALL_CLOCK_KEYS = {"wall_time_s", "scenario_file", "openg2g_version"}


def run_scenarios() -> list[str]:
    """Names of the bundled scenarios that are single runs (sweeps and studies are not), but for
    the live ones: they measure real servers in real time, so no two runs give the same tables."""
    names = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        if not path.name.startswith(("sweep_", "study_", "benchmark_", "live_")):
            names.append(path.stem)
    return names


def table_digest(folder: Path) -> str:
    """SHA-256 over a table's schema and values, parts in order."""
    digest = hashlib.sha256()
    for part in sorted(folder.glob("part-*.parquet")):
        table = pq.read_table(part)
        digest.update(str(table.schema).encode())
        for column in table.columns:
            if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
                digest.update(column.to_numpy().tobytes())
            else:
                digest.update(json.dumps(column.to_pylist(), default=str).encode())
    return digest.hexdigest()


def digest_run(name: str, duration_s: float | None, root: Path = ROOT, keep: Path | None = None) -> list[str]:
    """Run one scenario (with the code of checkout ``root``) and return its lines of digests."""
    with tempfile.TemporaryDirectory() as tmp:
        out = keep / name if keep is not None else Path(tmp) / "run"
        cmd = [sys.executable, "-m", "openg2g", "run", name, "--out", str(out), "--no-progress"]
        cmd += ["--set", "outputs.plots=false", "--set", "outputs.voltages=all"]
        if duration_s is not None:
            cmd += ["--set", f"duration_s={duration_s}"]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=root)
        if proc.returncode != 0:
            return [f"{name} FAILED (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"]
        lines = []
        for folder in sorted(p for p in out.iterdir() if p.is_dir() and any(p.glob("part-*.parquet"))):
            lines.append(f"{name} {folder.name} {table_digest(folder)}")
        summary = json.loads((out / "summary.json").read_text())
        figures = {k: v for k, v in summary.items() if k not in _WALL_CLOCK_KEYS}
        lines.append(f"{name} summary {hashlib.sha256(json.dumps(figures, sort_keys=True).encode()).hexdigest()}")
        return lines


def rollout_digest(steps: int) -> str:
    """SHA-256 over a seeded ``openg2g/IEEE13-v0`` rollout with this process's openg2g: reset
    observations and infos, then each step's observation, reward, flags and info, and the episode
    run's summary figures (no wall clock), first with 300-step episodes, then with 120-step ones
    against the no-control baseline."""
    import gymnasium as gym
    import numpy as np

    import openg2g.envs  # noqa: F401  (registers the ids)

    digest = hashlib.sha256()
    for config in ({}, {"episode_steps": 120, "reward_baseline": "no_control"}):
        env = gym.make("openg2g/IEEE13-v0", **config)
        env.action_space.seed(1)
        obs, info = env.reset(seed=3)
        digest.update(obs.tobytes() + repr(sorted(info.items())).encode())
        for _ in range(steps):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            digest.update(obs.tobytes() + np.float64(reward).tobytes() + bytes([terminated, truncated]))
            digest.update(repr(sorted(info.items())).encode())
            if terminated or truncated:
                obs, _ = env.reset()
                digest.update(obs.tobytes())
        figures = {k: v for k, v in env.unwrapped.sim.summary("x").items() if k not in _WALL_CLOCK_KEYS}
        digest.update(json.dumps(figures, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def digest_rollout(steps: int, root: Path = ROOT) -> str:
    """The line of :func:`rollout_digest` computed with the code of checkout ``root``."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--rollout-here", str(steps)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=root, env=env)
    if proc.returncode != 0:
        return f"IEEE13-v0 rollout FAILED (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"
    return f"IEEE13-v0 rollout {proc.stdout.strip()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=None, help="shorten every run to this many seconds")
    parser.add_argument(
        "--only", nargs="*", default=None, help="scenario names (default: every bundled run; none with --only alone)"
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose code runs (default: this one)")
    parser.add_argument("--keep", type=Path, default=None, help="keep each run's outputs in KEEP/<name>")
    parser.add_argument("--env-steps", type=int, default=0, help="also digest a seeded env rollout of this many steps")
    parser.add_argument("--rollout-here", type=int, default=0, help=argparse.SUPPRESS)  # the child of --env-steps
    args = parser.parse_args()
    if args.rollout_here:
        print(rollout_digest(args.rollout_here))
        return
    if args.env_steps:
        print(digest_rollout(args.env_steps, args.root), flush=True)
    for name in args.only if args.only is not None else run_scenarios():
        for line in digest_run(name, args.duration_s, args.root, args.keep):
            print(line, flush=True)


if __name__ == "__main__":
    main()

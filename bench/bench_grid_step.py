"""The grid's share of an env step, timed alone: the grid calls of a seeded random-action rollout,
recorded once, replayed on a fresh grid.

Usage::

    python bench/bench_grid_step.py --steps 900 --episode-steps 300
    python bench/bench_grid_step.py --steps 900 --episode-steps 300 --against /path/to/other/checkout --pairs 7 --together

The rollout (``ieee13_none`` by default, actions sampled with seed 0) runs with this checkout's
code and records every call the engine makes to its grid (``solve_batch`` with its loads, and the
resets). A replay makes those calls again, in order, on the grid of a newly built env, under the
one-BLAS-thread limit a run holds; it prints the CPU time per ``solve_batch`` call (the minimum of
``--reps`` replays, ms) and a digest of every grid state returned, so two versions of the code can
be checked to give the same bits. ``--against ROOT`` replays the same recording with ``ROOT``'s
code and this checkout's in fresh processes, ``--pairs`` times in turn, and prints every pair,
the medians and the ratio of each pair (this checkout over ``ROOT``); with ``--together`` the two
of a pair run at once, so that both meet the same load from other jobs.
"""

from __future__ import annotations

import argparse
import copyreg
import hashlib
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

RECORDED = ("solve_batch", "reset")
"""The grid methods the engine calls during a rollout that a replay makes again."""


def _mapping(values: dict) -> MappingProxyType:
    return MappingProxyType(values)


copyreg.pickle(MappingProxyType, lambda m: (_mapping, (dict(m),)))  # states hold read-only mappings


def _env(scenario: str, episode_steps: int) -> Any:
    from openg2g.envs.env import make_env

    return make_env(scenario, [], episode_steps=episode_steps)


def record(path: Path, scenario: str, steps: int, episode_steps: int) -> None:
    """Run ``steps`` random-action env steps and pickle the grid calls they make to ``path``."""
    from openg2g.grid.feeder.backend import FeederGrid

    calls: list[tuple[str, tuple, dict]] = []
    originals = {name: getattr(FeederGrid, name) for name in RECORDED}

    def recording(name: str) -> Any:
        def call(self: FeederGrid, *args: Any, **kwargs: Any) -> Any:
            calls.append((name, args, kwargs))
            return originals[name](self, *args, **kwargs)

        return call

    try:
        for name in RECORDED:
            setattr(FeederGrid, name, recording(name))
        env = _env(scenario, episode_steps)
        env.reset(seed=0)
        env.action_space.seed(0)
        for _ in range(steps):
            *_, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
    finally:
        for name, method in originals.items():
            setattr(FeederGrid, name, method)
    path.write_bytes(pickle.dumps((scenario, episode_steps, calls)))


def replay(path: Path, reps: int) -> tuple[float, str]:
    """Replay the calls of ``path`` ``reps`` times (and once more for the digest): the least CPU
    time per ``solve_batch`` call (s) and the digest of the states of the first replay."""
    from openg2g.core.threads import one_blas_thread

    scenario, episode_steps, calls = pickle.loads(path.read_bytes())
    env = _env(scenario, episode_steps)
    env.reset(seed=0)  # builds the simulation, and so the grid
    grid = env.sim.grid
    n_batches = sum(name == "solve_batch" for name, _, _ in calls)

    def run(digest: hashlib._Hash | None) -> None:
        for name, args, kwargs in calls:
            out = getattr(grid, name)(*args, **kwargs)
            if digest is not None and name == "solve_batch":
                for s in out:
                    for a in (s.v_pu, s.p_sub_w, s.q_sub_var, s.branch_current_a, s.branch_loading_pct):
                        digest.update(np.ascontiguousarray(a).tobytes())
                    digest.update(repr((s.t_s, s.losses_w, dict(s.taps), s.converged)).encode())

    with one_blas_thread():
        digest = hashlib.sha256()
        run(digest)
        best = np.inf
        for _ in range(reps):
            c0 = time.process_time()
            run(None)
            best = min(best, time.process_time() - c0)
    return best / n_batches, digest.hexdigest()[:16]


def _start_replay(root: Path, path: Path, reps: int) -> subprocess.Popen:
    """A replay of ``path`` with ``root``'s code in a fresh process (``--replay-here``), started."""
    command = [sys.executable, str(Path(__file__).resolve()), "--replay-here", str(path), "--reps", str(reps)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _replayed(proc: subprocess.Popen) -> tuple[float, str]:
    """The CPU seconds per ``solve_batch`` and the states digest a started replay prints."""
    out, err = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"a replay failed (exit {proc.returncode}): {' '.join(map(str, proc.args))}\n{err}")
    seconds, digest = out.split()[-2:]
    return float(seconds), digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="ieee13_none", help="bundled scenario of the rollout")
    parser.add_argument("--steps", type=int, default=900, help="env steps of the recorded rollout")
    parser.add_argument("--episode-steps", type=int, default=300)
    parser.add_argument("--reps", type=int, default=7, help="timed replays per process (the least counts)")
    parser.add_argument(
        "--against", type=Path, default=None, help="another checkout: replay with its code and this one's"
    )
    parser.add_argument("--pairs", type=int, default=7, help="processes of each checkout with --against")
    parser.add_argument("--together", action="store_true", help="with --against, run the two of each pair at once")
    parser.add_argument("--replay-here", type=Path, default=None, help=argparse.SUPPRESS)  # a child of --against
    args = parser.parse_args()
    if args.replay_here is not None:
        seconds, digest = replay(args.replay_here, args.reps)
        print(seconds, digest)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "grid_calls.pkl"
        record(path, args.scenario, args.steps, args.episode_steps)
        if args.against is None:
            seconds, digest = _replayed(_start_replay(ROOT, path, args.reps))
            print(f"{seconds * 1e3:.3f} ms per solve_batch (CPU, least of {args.reps}), states digest {digest}")
            return
        rows = []
        for i in range(args.pairs):
            if args.together:
                procs = [_start_replay(root, path, args.reps) for root in (args.against, ROOT)]
                (other, other_digest), (here, here_digest) = map(_replayed, procs)
            else:
                other, other_digest = _replayed(_start_replay(args.against, path, args.reps))
                here, here_digest = _replayed(_start_replay(ROOT, path, args.reps))
            same = "same states" if other_digest == here_digest else f"STATES DIFFER ({other_digest} {here_digest})"
            rows.append((other, here))
            print(f"pair {i + 1}: {other * 1e3:.3f} -> {here * 1e3:.3f} ms per solve_batch ({same})", flush=True)
    others, heres, ratios = zip(*((o * 1e3, h * 1e3, h / o) for o, h in rows))
    print(
        f"medians: {statistics.median(others):.3f} ({min(others):.3f}-{max(others):.3f}) -> "
        f"{statistics.median(heres):.3f} ({min(heres):.3f}-{max(heres):.3f}) ms; ratio per pair "
        f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}); {args.scenario}, "
        f"{args.steps} steps of {args.episode_steps}-step episodes"
    )


if __name__ == "__main__":
    main()

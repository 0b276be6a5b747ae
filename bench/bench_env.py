"""Environment speed: env steps per second with random actions, where a step's time goes, and
PPO's own cost per step.

Usage::

    python bench/bench_env.py                  # toy and ieee13 (if the bundled scenario loads)
    python bench/bench_env.py --steps 2000 --scenario ieee13_none --episode-steps 300 --no-ppo
    python bench/bench_env.py --steps 900 --episode-steps 300 --against /path/to/other/checkout --pairs 7

Prints, per case: reset time, env steps/s under random actions (episodes restarted as they end),
the share of that time in each part of a step (:data:`PARTS`), and PPO steps/s on the same env
(rollout + update, one env in-process) with the share of wall time spent inside ``env.step``: the
env is the bottleneck only if that share is large.

``--against ROOT`` compares two versions of the code on a shared machine instead: the scenario's
random-action run (resets included) in a fresh process with ``ROOT``'s code, then with this
checkout's, ``--pairs`` times in turn, each as env steps per CPU second of its process; it prints
every pair, the medians and the ratio of each pair (this checkout over ``ROOT``). With
``--together`` the two runs of a pair run at the same time, so that both meet the same load from
other jobs (on a 2-core machine shared with others, the more consistent ratios).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from openg2g.record.metrics import MetricsRecorder

ROOT = Path(__file__).resolve().parent.parent

PARTS: dict[str, tuple[tuple[str, str], ...]] = {
    "datacenter samples": (("site", "step_block"),),
    "datacenter ITL draws and blends": (("serving", "serve_block"),),
    "datacenter phase tables (FFT)": (("model", "phase_table"),),
    "datacenter commands": (("site", "apply"),),
    "grid solves": (("grid", "solve_batch"), ("grid", "solve")),
    "run metrics": tuple(
        ("metrics", name) for name in ("add_datacenter_block", "add_grid_block", "add_taps", "add_branch_block")
    ),
    "observation + actions": (("layout", "observe"), ("layout", "commands"), ("sim", "observation")),
    "episode set-up": (("env", "_simulation"), ("sim", "start")),
}
"""Parts of an env step, each the methods (of the site, grid, metrics, space layout, simulation or
env class, or the function of the site's module, ``serving``) whose own time it sums; the rest of
``env.step`` and ``env.reset`` is reported as engine and adapter overhead (simpy, windows, rewards).
"datacenter samples" is the site's block without its ITL draws and blends, which are their own part."""


class _PartClock:
    """Exclusive time per part: while a timed method runs, the part that called it is paused."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self._stack: list[list[Any]] = []  # [part, start of its present stretch]

    def wrap(self, part: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            now = time.perf_counter()
            if self._stack:
                caller = self._stack[-1]
                self.totals[caller[0]] = self.totals.get(caller[0], 0.0) + now - caller[1]
            self._stack.append([part, now])
            try:
                return original(*args, **kwargs)
            finally:
                end = time.perf_counter()
                _, start = self._stack.pop()
                self.totals[part] = self.totals.get(part, 0.0) + end - start
                if self._stack:
                    self._stack[-1][1] = end

        return timed


@contextmanager
def _timed_classes(env, clock: _PartClock) -> Iterator[None]:
    """Wrap the methods of :data:`PARTS` (and ``env.step``/``env.reset`` as the total) on their
    classes, so the simulations every reset builds are timed too; restored on exit."""
    sim = env.sim
    owners = {
        "site": type(sim.sites[0]),
        # the trace-replay site's per-model state (its phase tables); other sites have none
        "model": type(next(iter(getattr(sim.sites[0], "_models", {"": None}).values()))),
        "grid": type(sim.grid),
        "metrics": type(sim.recorder(MetricsRecorder).metrics),
        "layout": type(env.layout),
        "sim": type(sim),
        "env": type(env),
    }
    patched: list[tuple[Any, str, Any]] = []
    targets = [("env total", ("env", "step")), ("env total", ("env", "reset"))]
    targets += [(part, method) for part, methods in PARTS.items() for method in methods]
    site_module = sys.modules[owners["site"].__module__]
    for part, (owner, name) in targets:
        if owner == "serving":  # a function the site's module calls by its own name
            if hasattr(site_module, name):
                patched.append((site_module, name, getattr(site_module, name)))
                setattr(site_module, name, clock.wrap(part, getattr(site_module, name)))
            continue
        cls = owners[owner]
        static = next((klass.__dict__[name] for klass in cls.__mro__ if name in klass.__dict__), None)
        if static is None:  # a backend without this method (the toy's)
            continue
        patched.append((cls, name, cls.__dict__.get(name)))

        def call(self, *args, _static=static, _cls=cls, **kwargs):
            return _static.__get__(self, _cls)(*args, **kwargs)

        setattr(cls, name, clock.wrap(part, call))
    try:
        yield
    finally:
        for cls, name, own in reversed(patched):
            if own is None:
                delattr(cls, name)
            else:
                setattr(cls, name, own)


def bench_random(env, steps: int, seed: int = 0) -> dict[str, Any]:
    """Reset time, the first step's time, then env steps/s under uniformly random actions.

    The first step is timed apart: it carries what a process does once (numba loading or compiling
    the site's kernels, :mod:`openg2g.datacenter.kernels`), which the rate of a long run does not.

    :return: ``reset_s``, ``first_step_s``, ``steps_per_s`` (wall), ``cpu_steps_per_s`` (steps per
        CPU second of the process: the figure to compare on a shared machine) and ``resets``.
    """
    env.action_space.seed(seed)
    t0 = time.perf_counter()
    env.reset(seed=seed)
    reset_s = time.perf_counter() - t0
    env.step(env.action_space.sample())
    first_step_s = time.perf_counter() - t0 - reset_s
    resets, t0, cpu0 = 0, time.perf_counter(), time.process_time()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
            resets += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {
        "reset_s": reset_s,
        "first_step_s": first_step_s,
        "steps_per_s": steps / wall,
        "cpu_steps_per_s": steps / cpu,
        "resets": resets,
    }


def bench_breakdown(env, steps: int, seed: int = 0) -> dict[str, float]:
    """Each part's share of the wall time of ``steps`` random-action steps (resets included),
    timed in a second pass; ``"engine and adapter, other"`` is what no part of :data:`PARTS`
    covers (the timers' own cost is in no part)."""
    env.action_space.seed(seed)
    env.reset(seed=seed)
    clock = _PartClock()
    with _timed_classes(env, clock):
        t0 = time.perf_counter()
        for _ in range(steps):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        wall = time.perf_counter() - t0
    shares = {part: clock.totals.get(part, 0.0) / wall for part in PARTS}
    shares["engine and adapter, other"] = clock.totals.get("env total", 0.0) / wall
    return shares


class _TimedEnv:
    """Wraps an env's ``step`` to accumulate the time spent in it."""

    def __init__(self, env):
        self.env = env
        self.step_s = 0.0
        original = env.step

        def timed(action):
            t = time.perf_counter()
            try:
                return original(action)
            finally:
                self.step_s += time.perf_counter() - t

        env.step = timed


def bench_ppo(env, steps: int) -> dict[str, float]:
    """PPO (SB3 defaults of ``openg2g train``) steps/s on one in-process env and the env's share."""
    import torch
    from stable_baselines3 import PPO

    from openg2g.envs.training import TrainSettings

    torch.set_num_threads(1)
    timed = _TimedEnv(env)
    model = PPO("MlpPolicy", env, seed=0, device="cpu", verbose=0, **TrainSettings().algo_kwargs("ppo"))
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - t0
    return {"steps_per_s": model.num_timesteps / wall, "env_share": timed.step_s / wall}


def _start_run(root: Path, args: argparse.Namespace) -> subprocess.Popen:
    """One random-action run of the scenario with ``root``'s code in a fresh process
    (``--cpu-steps-here``), started; it prints its steps per CPU second."""
    command = [sys.executable, str(Path(__file__).resolve()), "--cpu-steps-here", "--steps", str(args.steps)]
    command += ["--scenario", args.scenario, "--episode-steps", str(args.episode_steps)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, text=True)


def _steps_per_cpu_s(run: subprocess.Popen) -> float:
    out, _ = run.communicate()
    if run.returncode:
        raise SystemExit(f"a timed run failed (exit {run.returncode}): {' '.join(map(str, run.args))}")
    return float(out.split()[-1])


def compare(against: Path, args: argparse.Namespace) -> None:
    """Time ``against``'s code and this checkout's in turn (or at once with ``args.together``),
    ``args.pairs`` times (module docstring)."""
    rows = []
    for i in range(args.pairs):
        if args.together:
            runs = _start_run(against, args), _start_run(ROOT, args)
            other, here = (_steps_per_cpu_s(run) for run in runs)
        else:
            other = _steps_per_cpu_s(_start_run(against, args))
            here = _steps_per_cpu_s(_start_run(ROOT, args))
        rows.append((other, here))
        print(f"pair {i + 1}: {other:.0f} -> {here:.0f} steps per CPU second ({here / other:.2f}x)", flush=True)
    others, heres, ratios = zip(*((o, h, h / o) for o, h in rows))
    print(
        f"medians: {statistics.median(others):.0f} ({min(others):.0f}-{max(others):.0f}) -> "
        f"{statistics.median(heres):.0f} ({min(heres):.0f}-{max(heres):.0f}); ratio per pair "
        f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}); {args.scenario}, "
        f"{args.steps} steps of {args.episode_steps}-step episodes"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000, help="env steps per measurement")
    parser.add_argument("--scenario", default="ieee13_none", help="real scenario to time (besides the toy)")
    parser.add_argument("--episode-steps", type=int, default=120)
    parser.add_argument("--no-ppo", action="store_true", help="skip the PPO measurement")
    parser.add_argument("--no-breakdown", action="store_true", help="skip the timed pass of the per-part breakdown")
    parser.add_argument("--only-scenario", action="store_true", help="skip the toy")
    parser.add_argument(
        "--against", type=Path, default=None, help="another checkout: time its code and this one's in turn"
    )
    parser.add_argument("--pairs", type=int, default=5, help="runs of each checkout with --against")
    parser.add_argument("--together", action="store_true", help="with --against, run the two of each pair at once")
    parser.add_argument("--cpu-steps-here", action="store_true", help=argparse.SUPPRESS)  # a child of --against
    args = parser.parse_args()
    if args.against is not None:
        compare(args.against.resolve(), args)
        return

    from openg2g.envs import G2GEnv, make_toy_env

    if args.cpu_steps_here:
        env = G2GEnv.from_scenario(args.scenario, episode_steps=args.episode_steps)
        print(bench_random(env, args.steps)["cpu_steps_per_s"])
        return

    cases = [] if args.only_scenario else [("toy", lambda: make_toy_env(duration_s=args.episode_steps + 1))]
    cases.append((args.scenario, lambda: G2GEnv.from_scenario(args.scenario, episode_steps=args.episode_steps)))
    for name, build in cases:
        t0 = time.perf_counter()
        try:
            env = build()
        except Exception as exc:  # noqa: BLE001  (the real backends may be missing in a partial checkout)
            print(f"{name}: skipped ({type(exc).__name__}: {exc})")
            continue
        build_s = time.perf_counter() - t0
        r = bench_random(env, args.steps)
        line = (
            f"{name:>14}: obs {env.observation_space.shape}, action {env.action_space}, build {build_s:.2f} s, "
            f"reset {r['reset_s'] * 1e3:.0f} ms, first step {r['first_step_s'] * 1e3:.0f} ms, random policy {r['steps_per_s']:.0f} env steps/s "
            f"({r['cpu_steps_per_s']:.0f} per CPU second, {r['resets']} resets)"
        )
        if not args.no_ppo:
            p = bench_ppo(env, args.steps)
            line += f"; PPO {p['steps_per_s']:.0f} steps/s, {100 * p['env_share']:.0f}% of it in env.step"
        print(line, flush=True)
        if not args.no_breakdown:
            shares = bench_breakdown(env, args.steps)
            print("    " + ", ".join(f"{part} {100 * share:.0f}%" for part, share in shares.items()), flush=True)
        env.close()
    print(f"(numpy {np.__version__}; 1 process; SubprocVecEnv with n envs scales with cores)")


if __name__ == "__main__":
    main()

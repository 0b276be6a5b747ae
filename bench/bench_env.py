"""Environment speed: env steps per second with random actions, and PPO's own cost per step.

Usage::

    python bench/bench_env.py                  # toy and ieee13 (if the bundled scenario loads)
    python bench/bench_env.py --steps 2000 --scenario ieee13_none --episode-steps 120

Prints, per case: reset time, env steps/s under random actions (episodes restarted as they end),
and PPO steps/s on the same env (rollout + update, one env in-process) with the share of
wall time spent inside ``env.step``: the env is the bottleneck only if that share is large.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _timed_method(obj, name: str, totals: dict[str, float]) -> None:
    original = getattr(obj, name)

    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            totals[name] = totals.get(name, 0.0) + time.perf_counter() - t

    setattr(obj, name, timed)


def bench_random(env, steps: int, seed: int = 0) -> dict[str, float]:
    """Reset time, env steps/s under uniformly random actions, and the adapter's own share.

    The adapter's share is the time of ``env.step`` outside the engine's ``run_until`` (building
    commands, the observation vector and the reward).
    """
    env.action_space.seed(seed)
    t0 = time.perf_counter()
    env.reset(seed=seed)
    reset_s = time.perf_counter() - t0
    totals: dict[str, float] = {}
    _timed_method(env, "step", totals)
    resets, t0 = 0, time.perf_counter()
    _timed_method(env.sim, "run_until", totals)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
            _timed_method(env.sim, "run_until", totals)
            resets += 1
    wall = time.perf_counter() - t0
    adapter_s = totals["step"] - totals["run_until"]
    return {
        "reset_s": reset_s,
        "steps_per_s": steps / wall,
        "resets": resets,
        "adapter_ms": 1e3 * adapter_s / steps,
        "adapter_share": adapter_s / totals["step"],
    }


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000, help="env steps per measurement")
    parser.add_argument("--scenario", default="ieee13_none", help="real scenario to time (besides the toy)")
    parser.add_argument("--episode-steps", type=int, default=120)
    parser.add_argument("--no-ppo", action="store_true", help="skip the PPO measurement")
    args = parser.parse_args()

    from openg2g.envs import G2GEnv, make_toy_env

    cases = [("toy", lambda: make_toy_env(duration_s=args.episode_steps + 1))]
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
            f"reset {r['reset_s'] * 1e3:.0f} ms, random policy {r['steps_per_s']:.0f} env steps/s "
            f"(adapter {r['adapter_ms']:.2f} ms/step = {100 * r['adapter_share']:.0f}%, the rest is the engine)"
        )
        if not args.no_ppo:
            p = bench_ppo(env, args.steps)
            line += f"; PPO {p['steps_per_s']:.0f} steps/s, {100 * p['env_share']:.0f}% of it in env.step"
        print(line, flush=True)
        env.close()
    print(f"(numpy {np.__version__}; 1 process; SubprocVecEnv with n envs scales with cores)")


if __name__ == "__main__":
    main()

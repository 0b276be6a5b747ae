"""A plain Stable-Baselines3 PPO script on ``openg2g/IEEE13-v0``, with torch's default thread count
and with ``torch.set_num_threads(1)``: steps per second of each (the figure of docs/rl.md,
"Vectorized environments").

Usage::

    python bench/bench_torch_threads.py               # 2048 steps a run, 3 runs of each, alternating
    python bench/bench_torch_threads.py --steps 512 --repeats 1

Each run is a fresh interpreter, so that neither setting inherits the other's threads, and runs
what a user's script does: ``gymnasium.make``, ``PPO("MlpPolicy", env)`` with SB3's defaults (one
rollout of 2048 steps and its update) and ``learn``. Prints each run's wall steps/s and the median
of each setting.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

_RUN = """
import sys, time
import gymnasium, torch
import openg2g.envs
from stable_baselines3 import PPO
if sys.argv[1] == "1":
    torch.set_num_threads(1)
steps = int(sys.argv[2])
env = gymnasium.make("openg2g/IEEE13-v0")
model = PPO("MlpPolicy", env, seed=0, device="cpu", n_steps=steps)
t0 = time.perf_counter()
model.learn(steps)
print(torch.get_num_threads(), steps / (time.perf_counter() - t0))
"""


def _run(one_thread: bool, steps: int) -> tuple[int, float]:
    """``(torch threads, steps/s)`` of one run in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _RUN, "1" if one_thread else "0", str(steps)],
        check=True,
        capture_output=True,
        text=True,
    )
    threads, rate = done.stdout.split()[-2:]
    return int(threads), float(rate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2048, help="env steps a run (default 2048, one PPO rollout)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each setting (default 3)")
    args = parser.parse_args()
    rates: dict[bool, list[float]] = {False: [], True: []}
    for k in range(args.repeats):
        for one_thread in (False, True):
            threads, rate = _run(one_thread, args.steps)
            rates[one_thread].append(rate)
            print(f"run {k + 1}: {threads} torch thread(s): {rate:.1f} steps/s", flush=True)
    for one_thread, values in rates.items():
        label = "set_num_threads(1)" if one_thread else "torch default"
        print(f"{label}: median {statistics.median(values):.1f} steps/s over {len(values)} runs")


if __name__ == "__main__":
    main()

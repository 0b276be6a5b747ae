"""Speed of the trace-replay datacenter at 0.1 s steps.

Prints steps per second and wall (and CPU) seconds per simulated hour and day for the 4,800-GPU
reference site (IEEE 13 bus 671: five models, 2,400-GPU training job) and for a site with 100,000
inference GPUs in the same model mix scaled up, stepped in blocks of ``--block-s`` seconds (as the
engine does between control steps; 0.1 = one step per call). A batch change half-way makes one
transition. Run: ``python bench/bench_datacenter.py [--steps N] [--block-s 1 60]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from openg2g.datacenter import ReplayDatacenter, TraceLibrary
from openg2g.scenario.schema import SiteSpec

DT_S = 0.1
REFERENCE = [  # model, GPUs per replica, replicas, ITL deadline (s)
    ("Llama-3.1-8B", 1, 720, 0.08),
    ("Llama-3.1-70B", 4, 180, 0.10),
    ("Llama-3.1-405B", 8, 90, 0.12),
    ("Qwen3-30B-A3B", 2, 480, 0.06),
    ("Qwen3-235B-A22B", 8, 210, 0.14),
]


def site(scale: float, name: str) -> SiteSpec:
    """The reference site with every replica count and the training job multiplied by ``scale``."""
    models: list[dict[str, Any]] = [
        {"model": m, "gpus_per_replica": g, "replicas": round(r * scale), "batch_size": 128, "itl_deadline_s": d}
        for m, g, r, d in REFERENCE
    ]
    gpus = sum(m["replicas"] * m["gpus_per_replica"] for m in models)
    training = round(2400 * scale)
    return SiteSpec.model_validate(
        {
            "name": name,
            "bus": "671",
            "base_load_kw_per_phase": 500 * scale,
            "gpu_capacity": int(gpus * 1.5) + training,
            "models": models,
            "training": {"gpus": training, "start_s": 1000, "end_s": 2000},
        }
    )


def bench(spec: SiteSpec, library: TraceLibrary, steps: int, block_s: float) -> None:
    """Run ``steps`` steps of 0.1 s in blocks of ``block_s`` and print the figures."""
    from openg2g.core.commands import SetBatchSize

    dc = ReplayDatacenter.from_spec(spec, library)
    dc.reset(0)
    gpus = sum(m.replicas * m.gpus_per_replica for m in spec.models)
    per_block = max(1, round(block_s / DT_S))
    start, cpu_start = time.perf_counter(), time.process_time()
    for first in range(1, steps + 1, per_block):
        if first <= steps // 2 < first + per_block:
            dc.apply(SetBatchSize(site=spec.name, model="Llama-3.1-8B", batch_size=64), (first - 1) * DT_S)
        k = np.arange(first, min(first + per_block, steps + 1))
        dc.step_block(k * DT_S, DT_S)
    wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
    per_hour_s = wall_s / steps * (3600 / DT_S)
    print(
        f"{spec.name:>10}: {gpus:>7,} inference GPUs + {spec.training.gpus if spec.training else 0:,} training | "
        f"blocks of {per_block * DT_S:g} s | {steps / wall_s:>8,.0f} steps/s | {per_hour_s:6.2f} s per simulated "
        f"hour, {per_hour_s * 24:6.1f} s per day (CPU {cpu_s / wall_s:.0%} of wall)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6000, help="steps to time per site (default 6000 = 10 min)")
    parser.add_argument("--block-s", type=float, nargs="+", default=[0.1, 1.0, 60.0], help="block lengths (s)")
    args = parser.parse_args()
    library = TraceLibrary.load()
    for block_s in args.block_s:
        bench(site(1.0, "reference"), library, args.steps, block_s)
        bench(site(100_000 / 4_800, "100k-GPU"), library, args.steps, block_s)


if __name__ == "__main__":
    main()

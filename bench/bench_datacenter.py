"""Speed of the trace-replay datacenter at 0.1 s steps.

Prints steps per second and wall seconds per simulated hour for the 4,800-GPU reference site
(IEEE 13 bus 671: five models, 2,400-GPU training job) and for a site with 100,000 inference GPUs in the same
model mix scaled up. Run: ``python bench/bench_datacenter.py [--steps N]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

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


def bench(spec: SiteSpec, library: TraceLibrary, steps: int) -> None:
    """Run ``steps`` steps of 0.1 s (with a batch change half-way) and print the figures."""
    dc = ReplayDatacenter.from_spec(spec, library)
    dc.reset(0)
    gpus = sum(m.replicas * m.gpus_per_replica for m in spec.models)
    start = time.perf_counter()
    for k in range(1, steps + 1):
        if k == steps // 2:
            from openg2g.core.commands import SetBatchSize

            dc.apply(SetBatchSize(site=spec.name, model="Llama-3.1-8B", batch_size=64), k * DT_S)
        dc.step(k * DT_S, DT_S)
    wall_s = time.perf_counter() - start
    per_hour_s = wall_s / steps * (3600 / DT_S)
    print(
        f"{spec.name:>10}: {gpus:>7,} inference GPUs + {spec.training.gpus if spec.training else 0:,} training | "
        f"{steps / wall_s:>8,.0f} steps/s | {per_hour_s:6.1f} s per simulated hour at {DT_S} s steps"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6000, help="steps to time per site (default 6000 = 10 min)")
    args = parser.parse_args()
    library = TraceLibrary.load()
    bench(site(1.0, "reference"), library, args.steps)
    bench(site(100_000 / 4_800, "100k-GPU"), library, args.steps)


if __name__ == "__main__":
    main()

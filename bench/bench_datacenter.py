"""Speed of the trace-replay datacenter at 0.1 s steps.

Prints steps per second and wall (and CPU) seconds per simulated hour and day for the 4,800-GPU
reference site (IEEE 13 bus 671: five models, 2,400-GPU training job) and for a site with 100,000
inference GPUs in the same model mix scaled up, stepped in blocks of ``--block-s`` seconds (as the
engine does between control steps; 0.1 = one step per call). A batch change half-way makes one
transition. Run: ``python bench/bench_datacenter.py [--steps N] [--block-s 1 60]``.

``--ramp-gpus N`` adds a site of N inference GPUs (the same mix, default 1,000,000) for
``--ramp-steps`` (default one hour) in blocks of 60 s, twice: as it is, and with inference scaled
to half over 300 s half-way (a ``SetInferenceScale`` ramp, 3,000 steps of changing replica counts).
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


def bench_ramp(library: TraceLibrary, gpus: int, steps: int) -> None:
    """Time ``steps`` of a ``gpus``-GPU site in 60-s blocks, without and with a 300-s ramp to half."""
    from openg2g.core.commands import SetInferenceScale

    spec = site(gpus / 4_800, f"{gpus / 1e6:g}M-GPU")
    for ramp in (False, True):
        dc = ReplayDatacenter.from_spec(spec, library)
        dc.reset(0)
        per_block = round(60.0 / DT_S)
        start, cpu_start = time.perf_counter(), time.process_time()
        for first in range(1, steps + 1, per_block):
            if ramp and first <= steps // 2 < first + per_block:
                dc.apply(SetInferenceScale(site=spec.name, fraction=0.5, ramp_s=300.0), (first - 1) * DT_S)
            dc.step_block(np.arange(first, min(first + per_block, steps + 1)) * DT_S, DT_S)
        wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
        print(
            f"{spec.name:>10}: {steps * DT_S:g} s simulated, {'a 300-s ramp to half' if ramp else 'no ramp':>20} | "
            f"{wall_s:6.2f} s wall, {cpu_s:6.2f} s CPU"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6000, help="steps to time per site (default 6000 = 10 min)")
    parser.add_argument(
        "--block-s", type=float, nargs="*", default=[0.1, 1.0, 60.0], help="block lengths (s; none: only the ramp)"
    )
    parser.add_argument("--ramp-gpus", type=int, default=0, help="also time a ramp on a site this large (0: not)")
    parser.add_argument("--ramp-steps", type=int, default=36000, help="steps of the ramp site (default an hour)")
    args = parser.parse_args()
    library = TraceLibrary.load()
    if args.ramp_gpus:
        bench_ramp(library, args.ramp_gpus, args.ramp_steps)
    for block_s in args.block_s:
        bench(site(1.0, "reference"), library, args.steps, block_s)
        bench(site(100_000 / 4_800, "100k-GPU"), library, args.steps, block_s)


if __name__ == "__main__":
    main()

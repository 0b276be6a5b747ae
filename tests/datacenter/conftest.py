"""Shared fixtures: the bundled trace library, small site specs and a synthetic library."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openg2g.datacenter.build import write_library
from openg2g.datacenter.library import ItlMixture, TraceConfig, TraceLibrary
from openg2g.scenario.schema import SiteSpec

REFERENCE = [  # model, GPUs per replica, replicas, ITL deadline (s)
    ("Llama-3.1-8B", 1, 720, 0.08),
    ("Llama-3.1-70B", 4, 180, 0.10),
    ("Llama-3.1-405B", 8, 90, 0.12),
    ("Qwen3-30B-A3B", 2, 480, 0.06),
    ("Qwen3-235B-A22B", 8, 210, 0.14),
]
BATCHES = [8, 16, 32, 64, 96, 128, 192, 256, 384, 512]


@pytest.fixture(scope="session")
def library() -> TraceLibrary:
    return TraceLibrary.load()


def site_spec(models: list[dict[str, Any]], name: str = "dc1", **kw: Any) -> SiteSpec:
    """A site on bus 671 serving ``models`` (ModelSpec dicts)."""
    return SiteSpec.model_validate({"name": name, "bus": "671", "models": models, **kw})


def reference_spec(**kw: Any) -> SiteSpec:
    """The reference site of the IEEE 13 scenario (4,800 GPUs, capacity 7,200, training 2,400)."""
    models = [
        {
            "model": m,
            "gpus_per_replica": g,
            "replicas": r,
            "batch_size": 128,
            "batch_sizes": BATCHES,
            "itl_deadline_s": d,
        }
        for m, g, r, d in REFERENCE
    ]
    base: dict[str, Any] = {
        "power_factor": 0.95,
        "base_load_kw_per_phase": 500,
        "gpu_capacity": 7200,
        "training": {"gpus": 2400, "start_s": 1000, "end_s": 2000},
    }
    base.update(kw)
    return site_spec(models, **base)


MIX = ItlMixture(loc_s=0.01, weight=(0.9, 0.1), sigma=(0.1, 0.5), scale_s=(0.01, 0.05))


def synthetic_library(folder: Path, traces: dict[tuple[str, int, int], np.ndarray]) -> TraceLibrary:
    """Write and load a library of the given (model, gpus, batch) -> power arrays, all with :data:`MIX`."""
    configs, arrays = [], {}
    for (model, gpus, batch), power in traces.items():
        cfg = TraceConfig(
            model=model,
            gpus=gpus,
            batch=batch,
            samples=power.size,
            duration_s=power.size * 0.1,
            mean_power_w=float(power.mean()),
            source="synthetic",
            itl=MIX,
            mean_itl_s=MIX.mean_s(),
            median_itl_s=MIX.quantile_s(0.5),
            p99_itl_s=MIX.quantile_s(0.99),
            throughput_tok_s=100.0 * batch,
            throughput_source="leaderboard",
            running_seqs=float(batch),
            avg_output_len_tokens=400.0,
        )
        configs.append(cfg)
        arrays[cfg.key] = power
    write_library(folder, configs, arrays)
    return TraceLibrary.load(folder)

"""Replay power agrees with the measured traces and with the ML.ENERGY Leaderboard.

For every (model, GPUs, batch) in the bundled library, a site of 128 replicas replays for 120 s;
its mean power per replica must be within 2 % of the trace mean and within 5 % of the
leaderboard's H100 avg_power_watts for the same configuration.
"""

from __future__ import annotations

import numpy as np
import pytest

from openg2g.datacenter import ReplayDatacenter, TraceLibrary

from .conftest import site_spec

# The source traces themselves differ from the leaderboard by more than 5 % here (trace mean
# 3,666-3,679 W vs leaderboard 3,903-4,038 W for Qwen3-235B-A22B at max_num_seqs 128-256); the
# replay cannot and does not correct measured data. The test checks this list is exact.
SOURCE_DISAGREES_WITH_LEADERBOARD = {
    ("Qwen3-235B-A22B", 8, 128),
    ("Qwen3-235B-A22B", 8, 192),
    ("Qwen3-235B-A22B", 8, 256),
}
REPLICAS, STEPS = 128, 1200


def _replay_mean_w(library: TraceLibrary, model: str, gpus: int, batch: int) -> float:
    spec = site_spec(
        [{"model": model, "gpus_per_replica": gpus, "replicas": REPLICAS, "batch_size": batch, "batch_sizes": [batch]}]
    )
    dc = ReplayDatacenter.from_spec(spec, library)
    dc.reset(7)
    total = np.array([dc.step(k * 0.1, 0.1).models[model].power_w for k in range(1, STEPS + 1)])
    return float(total.mean() / REPLICAS)


@pytest.mark.slow
def test_replay_mean_power_matches_trace_and_leaderboard(library: TraceLibrary) -> None:
    mismatched = set()
    for c in library.configs():
        mean_w = _replay_mean_w(library, c.model, c.gpus, c.batch)
        assert mean_w == pytest.approx(c.mean_power_w, rel=0.02), (
            f"{c.key}: replay {mean_w:.1f} W vs trace {c.mean_power_w:.1f} W"
        )
        if c.leaderboard_avg_power_w is None:
            continue
        if abs(c.mean_power_w / c.leaderboard_avg_power_w - 1) > 0.05:
            mismatched.add((c.model, c.gpus, c.batch))
            continue
        assert mean_w == pytest.approx(c.leaderboard_avg_power_w, rel=0.05), (
            f"{c.key}: replay {mean_w:.1f} W vs leaderboard {c.leaderboard_avg_power_w:.1f} W"
        )
    assert mismatched == SOURCE_DISAGREES_WITH_LEADERBOARD


def test_replay_throughput_and_itl_follow_the_measurements(library: TraceLibrary) -> None:
    for model, gpus, batch in [("Llama-3.1-8B", 1, 128), ("Qwen3-30B-A3B", 2, 32), ("Llama-3.1-405B", 8, 256)]:
        c = library.config(model, gpus, batch)
        spec = site_spec([{"model": model, "gpus_per_replica": gpus, "replicas": 300, "batch_size": batch}])
        dc = ReplayDatacenter.from_spec(spec, library)
        dc.reset(3)
        states = [dc.step(k * 0.1, 0.1).models[model] for k in range(1, 401)]
        tput = np.mean([s.throughput_tok_s for s in states]) / 300
        assert tput == pytest.approx(c.throughput_tok_s, rel=0.03)
        assert c.itl is not None
        itl = np.mean([s.itl_s for s in states])
        assert itl == pytest.approx(c.itl.mean_s(), rel=0.03)

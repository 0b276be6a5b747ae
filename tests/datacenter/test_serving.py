"""A site's serving figures computed for all its models in one pass equal each model computed alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from openg2g.datacenter import TraceLibrary
from openg2g.datacenter.library import TimeWeightedSampler, time_weighted_sampler
from openg2g.datacenter.serving import ITL_SAMPLES, ServingConstants, ServingInput, serve_block
from openg2g.datacenter.training import TrainingJob
from openg2g.scenario.schema import TrainingSpec


def _constants(library: TraceLibrary, model: str, gpus: int, batch: int, slowdown: float) -> ServingConstants:
    meta = library.config(model, gpus, batch)
    assert meta.itl is not None and meta.throughput_tok_s is not None and meta.mean_itl_s is not None
    concurrency = meta.throughput_tok_s * meta.mean_itl_s
    return ServingConstants(time_weighted_sampler(meta.itl), slowdown, concurrency, meta.mean_itl_s * slowdown, 0.03)


def _libm_sample_s(sampler: TimeWeightedSampler, u: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``sampler.sample_s`` with the C library's exponential (``math.exp``), the one the compiled
    kernel calls: numpy's own may differ in the last bit on CPUs with AVX-512."""
    part = np.searchsorted(sampler.thresholds, u, side="right")
    return np.vectorize(math.exp)(sampler.sigmas[part] * z + sampler.log_scales[part]) + sampler.loc_s


def _inputs(library: TraceLibrary, seed: int) -> list[ServingInput]:
    """Three models: one configuration; a blend of three (one capped) during a ramp that starts at 0
    replicas; a blend of two with no deadline and more replicas than are sampled."""
    k = 7
    rise = np.linspace(0.0, 1.0, k)
    specs = [
        ("Llama-3.1-8B", 1, [(np.ones(k), 128, 1.0)], np.full(k, 40.0), True),
        (
            "Llama-3.1-70B",
            4,
            [(0.3 * (1 - rise), 64, 1.0), (0.2 * (1 - rise), 256, 1.07), (0.5 + 0.5 * rise, 128, 1.0)],
            np.linspace(0.0, 5.5, k),
            True,
        ),
        ("Qwen3-30B-A3B", 2, [(1 - rise, 8, 1.0), (rise, 512, 1.0)], np.full(k, 300.0), False),
    ]
    rngs = np.random.SeedSequence(seed).spawn(2 * len(specs))
    inputs = []
    for i, (model, gpus, blend, replicas, deadline) in enumerate(specs):
        n_on = np.ceil(replicas - 1e-9).astype(np.int64)
        inputs.append(
            ServingInput(
                uniform_rng=np.random.default_rng(rngs[2 * i]),
                normal_rng=np.random.default_rng(rngs[2 * i + 1]),
                width=int(np.ceil(replicas.max())),
                replicas=replicas,
                n_on=n_on,
                n_on_min=int(n_on.min()),
                blend=[(w, _constants(library, model, gpus, b, s)) for w, b, s in blend],
                has_deadline=deadline,
            )
        )
    return inputs


def test_site_in_one_pass_equals_models_alone(library: TraceLibrary) -> None:
    together = serve_block(_inputs(library, 5), 7)
    alone = [serve_block([m], 7)[0] for m in _inputs(library, 5)]
    for a, b in zip(together, alone):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)  # the same floats, NaN where no replica runs
    itl, tput, miss = together[1]
    assert np.isnan(itl[0]) and tput[0] == 0.0 and miss[0] == 0.0  # no replica yet
    assert np.all(together[2][2] == 0.0)  # no deadline: no misses
    assert np.all(together[0][2] == together[0][2][0]) and 0 < together[0][2][0] < 1  # one config: its tail


def test_one_configuration_mean_itl_estimates_the_mixture_mean(library: TraceLibrary) -> None:
    """Token-weighted ITL over many sampled replicas approaches the per-token mean of the mixture."""
    c = _constants(library, "Llama-3.1-8B", 1, 128, 1.0)
    k = 400
    rngs = (np.random.default_rng(1), np.random.default_rng(2))
    m = ServingInput(*rngs, 600, np.full(k, 600.0), np.full(k, 600), 600, [(np.ones(k), c)], True)
    ((itl, tput, _),) = serve_block([m], k)
    assert abs(np.mean(itl) / c.mean_itl_s - 1) < 0.01
    # throughput: replicas x c / ITL on average (the leaderboard's measured rate)
    assert abs(np.mean(tput) / (600 * c.concurrency / c.mean_itl_s) - 1) < 0.01
    assert ITL_SAMPLES < 600  # more replicas than are sampled


def test_training_job_is_idle_outside_its_window() -> None:
    job = TrainingJob(TrainingSpec(gpus=16, start_s=10.0, end_s=20.0))
    assert not job.runs_within(0.0, 9.9) and not job.runs_within(20.0, 30.0)
    assert job.runs_within(9.9, 10.0) and job.runs_within(19.9, 25.0)
    assert np.all(job.power_w(np.array([0.0, 9.9, 20.0, 30.0])) == 0.0)
    assert np.all(job.power_w(np.array([10.0, 19.9])) > 0.0)


def test_one_sampled_replica_gives_its_own_itl(library: TraceLibrary) -> None:
    """With ``samples=1`` a model's ITL each step is its one draw, and its throughput that draw's rate."""
    c = _constants(library, "Llama-3.1-8B", 1, 128, 1.0)
    k = 50
    m = ServingInput(
        np.random.default_rng(1),
        np.random.default_rng(2),
        600,
        np.full(k, 600.0),
        np.full(k, 600),
        600,
        [(np.ones(k), c)],
        True,
        samples=1,
    )
    ((itl, tput, _),) = serve_block([m], k)
    draw = c.sampler.sample_s(np.random.default_rng(1).random(k), np.random.default_rng(2).standard_normal(k))  # type: ignore[union-attr]
    np.testing.assert_allclose(itl, draw, rtol=1e-14)
    np.testing.assert_allclose(tput, 600 * c.concurrency / draw, rtol=1e-14)


def test_fewer_samples_draw_fewer_and_estimate_the_same_mean(library: TraceLibrary) -> None:
    c = _constants(library, "Llama-3.1-8B", 1, 128, 1.0)
    k = 1000
    uniform, normal = np.random.default_rng(1), np.random.default_rng(2)
    m = ServingInput(uniform, normal, 600, np.full(k, 600.0), np.full(k, 600), 600, [(np.ones(k), c)], True, samples=64)
    ((itl, _, miss),) = serve_block([m], k)
    assert abs(np.mean(itl) / c.mean_itl_s - 1) < 0.01
    assert np.all(miss == c.tail)  # misses are analytic: the sampling does not enter them
    # k x 64 draws taken from each stream
    assert uniform.random() == np.random.default_rng(1).random(k * 64 + 1)[-1]
    assert normal.standard_normal() == np.random.default_rng(2).standard_normal(k * 64 + 1)[-1]


def test_blend_is_its_terms_added_in_order(library: TraceLibrary) -> None:
    """A blend of three configurations (one slowed by a cap) gives, bit for bit, the figures of its
    terms computed one by one and added in the blend's order: each sample ``w * ITL * slowdown``,
    the harmonic mean of the step's samples, ``replicas * sum(w c) * mean(1 / ITL)`` and the
    token-share blend of the tails."""
    k, replicas = 6, 50
    fall = np.linspace(1.0, 0.0, k)
    blend = [
        (0.6 * fall, _constants(library, "Llama-3.1-70B", 4, 64, 1.0)),
        (0.3 * fall, _constants(library, "Llama-3.1-70B", 4, 256, 1.07)),
        (1.0 - 0.9 * fall, _constants(library, "Llama-3.1-70B", 4, 128, 1.0)),
    ]
    m = ServingInput(
        np.random.default_rng(7),
        np.random.default_rng(8),
        replicas,
        np.full(k, float(replicas)),
        np.full(k, replicas),
        replicas,
        blend,
        True,
    )
    ((itl, tput, miss),) = serve_block([m], k)

    u = np.random.default_rng(7).random((k, replicas))
    z = np.random.default_rng(8).standard_normal((k, replicas))
    samples = sum(_libm_sample_s(c.sampler, u, z) * w[:, None] * c.slowdown for w, c in blend)  # type: ignore[arg-type]
    inv_sum = (1.0 / samples).sum(axis=1)
    conc = sum((w * c.concurrency for w, c in blend), np.zeros(k))
    shares = [w * c.concurrency / c.mean_itl_s for w, c in blend]
    total = sum(shares, np.zeros(k))
    np.testing.assert_array_equal(itl, replicas / inv_sum)
    np.testing.assert_array_equal(tput, replicas * conc * inv_sum / replicas)
    np.testing.assert_array_equal(miss, sum((s / total * c.tail for s, (_, c) in zip(shares, blend)), np.zeros(k)))


def test_analytic_figures_of_one_configuration_are_its_mean_itl_and_measured_rate(library: TraceLibrary) -> None:
    """The expected figures of one configuration: the mixture's per-token mean ITL under the cap,
    and replicas x the leaderboard's tokens per second slowed by the cap, with no draw taken."""
    meta = library.config("Llama-3.1-8B", 1, 128)
    assert meta.mean_itl_s is not None and meta.throughput_tok_s is not None
    c = _constants(library, "Llama-3.1-8B", 1, 128, 1.07)
    k = 5
    replicas = np.array([0.0, 0.5, 600.0, 600.0, 599.25])
    n_on = np.ceil(replicas).astype(np.int64)
    uniform, normal = np.random.default_rng(1), np.random.default_rng(2)
    m = ServingInput(uniform, normal, 600, replicas, n_on, 0, [(np.ones(k), c)], True)
    ((itl, tput, miss),) = serve_block([m], k, analytic=True)
    assert np.isnan(itl[0]) and tput[0] == 0.0 and miss[0] == 0.0  # no replica runs yet
    np.testing.assert_allclose(itl[1:], meta.mean_itl_s * 1.07, rtol=1e-15)
    np.testing.assert_allclose(tput[1:], replicas[1:] * meta.throughput_tok_s / 1.07, rtol=1e-14)
    np.testing.assert_array_equal(miss[1:], c.tail)
    assert uniform.random() == np.random.default_rng(1).random()  # the streams did not advance
    assert normal.standard_normal() == np.random.default_rng(2).standard_normal()


def test_analytic_figures_are_the_limit_of_the_sampled_ones_in_a_blend(library: TraceLibrary) -> None:
    """Over many replicas and steps the sampled ITL and throughput of a steady blend of two batch
    sizes tend to the analytic ones (integrated over the draws the blend's terms share)."""
    k, n = 400, 2000
    blend = [
        (np.full(k, 0.4), _constants(library, "Llama-3.1-70B", 4, 64, 1.0)),
        (np.full(k, 0.6), _constants(library, "Llama-3.1-70B", 4, 256, 1.0)),
    ]
    m = ServingInput(
        np.random.default_rng(3), np.random.default_rng(4), n, np.full(k, float(n)), np.full(k, n), n, blend, True, n
    )
    ((itl_s, tput_s, miss_s),) = serve_block([m], k)
    ((itl_a, tput_a, miss_a),) = serve_block([m], k, analytic=True)
    assert np.mean(itl_s) == pytest.approx(itl_a[0], rel=0.01)
    assert np.mean(tput_s) == pytest.approx(tput_a[0], rel=0.01)
    np.testing.assert_allclose(miss_s, miss_a, rtol=1e-12)  # the same analytic tails

"""The compiled serving kernel against numpy's arithmetic and hand-computed figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from openg2g.datacenter import TraceLibrary
from openg2g.datacenter.kernels import (
    CONCURRENCY,
    LOC_S,
    LOG_SCALES,
    MEAN_ITL_S,
    SIGMAS,
    SLOWDOWN,
    TAIL,
    THRESHOLDS,
    pairwise_sum,
    serve_model,
    serve_site,
)
from openg2g.datacenter.library import time_weighted_sampler
from openg2g.datacenter.serving import ServingConstants


def test_pairwise_sum_is_numpys_row_sum() -> None:
    """numpy halves rows over 128 values and sums blocks in eight partial sums: the kernel's sum of
    a row is numpy's bit for bit, at every length up to 300 and at long ones (values spread over
    ten decades, so the order shows)."""
    rng = np.random.default_rng(0)
    for n in [*range(1, 301), 1000, 1031, 4096, 8192, 8199, 100_003]:
        row = rng.lognormal(0.0, 5.0, n)
        assert pairwise_sum(row) == np.add.reduce(row), n


def _row(
    thresholds: list[float],
    sigmas: list[float],
    log_scales: list[float],
    loc_s: float,
    slowdown: float,
    conc: float,
    mean_itl_s: float,
    tail: float,
) -> np.ndarray:
    """A configuration as the kernel reads it (:attr:`ServingConstants.row`)."""
    return np.array([*thresholds, *sigmas, *log_scales, loc_s, slowdown, conc, mean_itl_s, tail])


def test_one_step_by_hand() -> None:
    """Two configurations, two sampled replicas of which one runs: the ITL of the running one is
    the blend of its two parts, each chosen by its uniform against the thresholds (0.5 picks part 2)."""
    configs = np.stack(
        [
            _row([0.2, 0.4, 0.9], [0.1, 0.2, 0.3, 0.4], [-3.0, -3.1, -3.2, -3.3], 0.01, 1.0, 64.0, 0.02, 0.0),
            _row([0.2, 0.4, 0.9], [0.5, 0.6, 0.7, 0.8], [-2.0, -2.1, -2.2, -2.3], 0.02, 1.25, 128.0, 0.05, 0.1),
        ]
    )
    u, z = np.array([0.5, 0.1]), np.array([0.7, -1.0])
    weights = np.array([[0.25], [0.75]])
    itl, tput, miss = np.empty(1), np.empty(1), np.empty(1)
    serve_model(u, z, np.array([1]), np.array([1.0]), configs, weights, True, itl, tput, miss)

    a = (math.exp(0.3 * 0.7 - 3.2) + 0.01) * 0.25 * 1.0  # part 2: thresholds 0.2 and 0.4 are <= 0.5
    b = (math.exp(0.7 * 0.7 - 2.2) + 0.02) * 0.75 * 1.25
    inv = 1.0 / (a + b)
    assert itl[0] == 1 / inv
    assert tput[0] == 1.0 * (0.25 * 64.0 + 0.75 * 128.0) * inv / 1
    shares = [0.25 * 64.0 / 0.02, 0.75 * 128.0 / 0.05]
    assert miss[0] == pytest.approx(shares[1] / sum(shares) * 0.1, rel=1e-15)


def test_a_step_without_running_replicas_serves_nothing() -> None:
    """No sampled replica runs: NaN ITL, no throughput, no misses, whatever the draws."""
    configs = _row([0.5, 0.5, 0.5], [0.3] * 4, [-3.0] * 4, 0.0, 1.0, 8.0, 0.05, 0.2)[None, :]
    itl, tput, miss = np.empty(2), np.empty(2), np.empty(2)
    u, z = np.array([0.1, 0.9, 0.3, 0.6]), np.zeros(4)
    serve_model(u, z, np.array([0, 2]), np.array([0.0, 2.0]), configs, np.ones((1, 2)), True, itl, tput, miss)
    assert math.isnan(itl[0]) and tput[0] == 0.0 and miss[0] == 0.0
    assert itl[1] == pytest.approx(math.exp(-3.0)) and miss[1] == pytest.approx(0.2)


def test_a_site_by_hand() -> None:
    """Three models in one call: a blend of two configurations with one of its two sampled replicas
    running, a model without latency data (no rows: NaN, NaN, 0, its draws skipped) and one sampled
    replica of three running, without a deadline; each reads its own draws, counts and rows."""
    blend = [
        _row([0.2, 0.4, 0.9], [0.1, 0.2, 0.3, 0.4], [-3.0, -3.1, -3.2, -3.3], 0.01, 1.0, 64.0, 0.02, 0.05),
        _row([0.2, 0.4, 0.9], [0.5, 0.6, 0.7, 0.8], [-2.0, -2.1, -2.2, -2.3], 0.02, 1.25, 128.0, 0.05, 0.1),
    ]
    alone = _row([0.1, 0.2, 0.3], [0.5, 0.6, 0.7, 0.8], [-2.0, -2.1, -2.2, -2.3], 0.02, 1.25, 128.0, 0.05, 0.1)
    figures = np.empty((3, 3, 1))
    serve_site(
        np.array([0.5, 0.1, 0.3, 0.95]),  # u: two draws of the first model, one each of the others
        np.array([0.7, -1.0, 5.0, 0.2]),
        np.array([2, 1, 1]),
        np.array([1, 0, 3]),
        np.array([2, 256, 1]),
        np.array([1.0, 4.0, 2.5]),
        np.concatenate([*blend, alone]),
        np.array([0, 2, 2, 3]),
        np.array([0.25, 0.75, 1.0]),
        np.array([True, True, False]),
        figures,
    )
    (itl, tput, miss) = figures[:, :, 0]

    a = (math.exp(0.3 * 0.7 - 3.2) + 0.01) * 0.25 * 1.0  # part 2 of each blend row
    b = (math.exp(0.7 * 0.7 - 2.2) + 0.02) * 0.75 * 1.25
    assert itl[0] == 1 / (1.0 / (a + b))
    assert tput[0] == 1.0 * (0.25 * 64.0 + 0.75 * 128.0) * (1.0 / (a + b)) / 1
    shares = [0.25 * 64.0 / 0.02, 0.75 * 128.0 / 0.05]
    assert miss[0] == pytest.approx((shares[0] * 0.05 + shares[1] * 0.1) / sum(shares), rel=1e-15)
    assert math.isnan(itl[1]) and math.isnan(tput[1]) and miss[1] == 0.0
    c = (math.exp(0.8 * 0.2 - 2.3) + 0.02) * 1.0 * 1.25  # u = 0.95 passes every threshold: part 3
    assert itl[2] == 1 / (1.0 / c)  # one sampled replica of the three running
    assert tput[2] == 2.5 * 128.0 * (1.0 / c) / 1
    assert miss[2] == 0.0  # no deadline


def test_the_row_holds_the_sampler_in_the_kernels_columns(library: TraceLibrary) -> None:
    """A configuration's row is its sampler's thresholds, sigmas and log-scales, then its constants."""
    sampler = time_weighted_sampler(library.config("Llama-3.1-8B", 1, 128).itl)  # type: ignore[arg-type]
    c = ServingConstants(sampler, 1.1, 50.0, 0.03, 0.02)
    assert c.row[THRESHOLDS : THRESHOLDS + 3].tolist() == sampler.thresholds.tolist()
    assert c.row[SIGMAS : SIGMAS + 4].tolist() == sampler.sigmas.tolist()
    assert c.row[LOG_SCALES : LOG_SCALES + 4].tolist() == sampler.log_scales.tolist()
    assert [c.row[i] for i in (LOC_S, SLOWDOWN, CONCURRENCY, MEAN_ITL_S, TAIL)] == [
        sampler.loc_s,
        1.1,
        50.0,
        0.03,
        0.02,
    ]

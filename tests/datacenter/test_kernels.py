"""The compiled serving kernel against numpy's arithmetic and hand-computed figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from openg2g.datacenter.kernels import pairwise_sum, serve_model
from openg2g.datacenter.serving import BlendTables


@pytest.mark.parametrize("n", [*range(1, 300), 1000, 1031, 4096, 8192, 8199, 100_003])
def test_pairwise_sum_is_numpys_row_sum(n: int) -> None:
    """numpy halves rows over 128 values and sums blocks in eight partial sums: the kernel's sum of
    a row is numpy's bit for bit (values spread over ten decades, so the order shows)."""
    row = np.random.default_rng(n).lognormal(0.0, 5.0, n)
    assert pairwise_sum(row) == np.add.reduce(row)


def _tables(
    grid: list[float], sigmas: list[list[float]], log_scales: list[list[float]], **per_config: list[float]
) -> BlendTables:
    return BlendTables(
        grid=np.array(grid),
        sigmas=np.array(sigmas),
        log_scales=np.array(log_scales),
        **{name: np.array(values) for name, values in per_config.items()},
    )


def test_one_step_by_hand() -> None:
    """Two configurations, two sampled replicas of which one runs: the ITL of the running one is
    the blend of its two parts, chosen by its uniform against the grid (0.4 <= 0.5 picks part 1)."""
    tables = _tables(
        [0.2, 0.4, 0.9],
        [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]],
        [[-3.0, -3.1, -3.2, -3.3], [-2.0, -2.1, -2.2, -2.3]],
        locs_s=[0.01, 0.02],
        slowdowns=[1.0, 1.25],
        concurrency=[64.0, 128.0],
        mean_itl_s=[0.02, 0.05],
        tails=[0.0, 0.1],
    )
    u, z = np.array([0.5, 0.1]), np.array([0.7, -1.0])
    weights = np.array([[0.25], [0.75]])
    itl, tput, miss = np.empty(1), np.empty(1), np.empty(1)
    replicas = np.array([1.0])
    serve_model(u, z, np.array([1]), replicas, tables, weights, True, itl, tput, miss)

    a = (math.exp(0.3 * 0.7 - 3.2) + 0.01) * 0.25 * 1.0  # part 2: thresholds 0.2 and 0.4 are <= 0.5
    b = (math.exp(0.7 * 0.7 - 2.2) + 0.02) * 0.75 * 1.25
    inv = 1.0 / (a + b)
    assert itl[0] == 1 / inv
    assert tput[0] == 1.0 * (0.25 * 64.0 + 0.75 * 128.0) * inv / 1
    shares = [0.25 * 64.0 / 0.02, 0.75 * 128.0 / 0.05]
    assert miss[0] == pytest.approx(shares[1] / sum(shares) * 0.1, rel=1e-15)


def test_a_step_without_running_replicas_serves_nothing() -> None:
    """No sampled replica runs: NaN ITL, no throughput, no misses, whatever the draws."""
    tables = _tables(
        [0.5],
        [[0.3, 0.3]],
        [[-3.0, -3.0]],
        locs_s=[0.0],
        slowdowns=[1.0],
        concurrency=[8.0],
        mean_itl_s=[0.05],
        tails=[0.2],
    )
    itl, tput, miss = np.empty(2), np.empty(2), np.empty(2)
    serve_model(
        np.array([0.1, 0.9, 0.3, 0.6]),
        np.zeros(4),
        np.array([0, 2]),
        np.array([0.0, 2.0]),
        tables,
        np.ones((1, 2)),
        True,
        itl,
        tput,
        miss,
    )
    assert math.isnan(itl[0]) and tput[0] == 0.0 and miss[0] == 0.0
    assert itl[1] == pytest.approx(math.exp(-3.0)) and miss[1] == pytest.approx(0.2)

"""The compiled loops of a site's phase power against numpy's expressions and hand-computed sums."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

from openg2g.datacenter.kernels import add_offset_power, add_replica_power, add_table_rows, replica_phase_sums


class _Ramp(NamedTuple):
    """A model during a ramp over one block: ``blend`` holds (doubled trace, offsets, weight per
    step) per configuration; the rest as :meth:`ReplayDatacenter._phase_power_direct` takes them."""

    blend: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    sample_idx: np.ndarray
    replicas: np.ndarray
    phase: np.ndarray
    width: int
    slots: int
    clip_w: float | None


def _numpy_direct(ramp: _Ramp) -> np.ndarray:
    """A site's replica-by-replica phase power as numpy computed it before the kernels."""
    blend, sample_idx, replicas, phase, width, slots, clip_w = ramp
    k, n_sub = sample_idx.shape
    n_on = np.minimum(np.ceil(replicas - 1e-9), slots).astype(np.int64)
    power = np.zeros((k, width))
    for doubled_w, offsets, w in blend:
        length = doubled_w.size // 2
        acc = np.zeros((k, width))
        for j in range(n_sub):
            acc += doubled_w[offsets[None, :width] + (sample_idx[:, j] % length)[:, None]]
        if clip_w is not None:
            acc = np.minimum(acc / n_sub, clip_w) * n_sub
        power += (w[:, None] / n_sub) * acc
    rows = np.flatnonzero(n_on > 0)
    frac = replicas[rows] - (n_on[rows] - 1)
    power[rows, n_on[rows] - 1] *= np.where(frac < 1.0, frac, 1.0)
    power = np.where(np.arange(width)[None, :] < n_on[:, None], power, 0.0)
    return np.stack([np.ascontiguousarray(power[:, phase[:width] == p]).sum(axis=1) for p in range(3)], axis=1)


def _kernel_direct(ramp: _Ramp) -> np.ndarray:
    """The same through the compiled loops."""
    blend, sample_idx, replicas, phase, width, slots, clip_w = ramp
    n_on = np.minimum(np.ceil(replicas - 1e-9), slots).astype(np.int64)
    power = np.zeros((sample_idx.shape[0], width))
    for doubled_w, offsets, w in blend:
        add_replica_power(
            power, doubled_w, offsets, sample_idx, doubled_w.size // 2, w, np.nan if clip_w is None else clip_w
        )
    phase_w = np.empty((sample_idx.shape[0], 3))
    replica_phase_sums(power, replicas, n_on, phase, phase_w)
    return phase_w


def test_table_rows_by_hand() -> None:
    """Two configurations of weights 0.25 and 0.75: each step adds the weighted rows at its sample
    index modulo the table's length (index 7 of a 5-row table is row 2)."""
    first = np.arange(15.0).reshape(5, 3)
    second = 100.0 + np.arange(12.0).reshape(4, 3)
    idx = np.array([[7], [4]])
    phase_w = np.zeros((2, 3))
    add_table_rows(phase_w, first, idx, 5, np.array([0.25, 0.25]))
    add_table_rows(phase_w, second, idx, 4, np.array([0.75, 0.75]))
    # step 0: rows 2 and 3; step 1: rows 4 and 0
    expected = np.array(
        [
            [0.25 * 6 + 0.75 * 109, 0.25 * 7 + 0.75 * 110, 0.25 * 8 + 0.75 * 111],
            [0.25 * 12 + 0.75 * 100, 0.25 * 13 + 0.75 * 101, 0.25 * 14 + 0.75 * 102],
        ]
    )
    np.testing.assert_array_equal(phase_w, expected)


def test_table_rows_are_numpys_bit_for_bit() -> None:
    """A blend of three configurations added into zeros equals numpy's ``phase_w += w[:, None] *
    table.take(idx % L)`` in the same order, bit for bit, for tables in either memory order (a
    site keeps them Fortran-ordered); one configuration of weight 1 is the table's rows + 0.0."""
    rng = np.random.default_rng(7)
    lengths = (459, 1009, 4096)
    tables = [rng.lognormal(8.0, 2.0, (length, 3)) for length in lengths]
    idx = rng.integers(0, 10**6, size=(10, 1))
    weights = [rng.random(10) * 1e-3, rng.random(10), rng.random(10)]
    expected = np.zeros((10, 3))
    for table, length, w in zip(tables, lengths, weights):
        expected += w[:, None] * table.take(idx[:, 0] % length, axis=0)
    for order in ("C", "F"):
        phase_w = np.zeros((10, 3))
        for table, length, w in zip(tables, lengths, weights):
            add_table_rows(phase_w, np.asarray(table, order=order), idx, length, w)
        assert phase_w.tobytes() == expected.tobytes()
    one = np.zeros((10, 3))
    add_table_rows(one, tables[0], idx, lengths[0], np.ones(10))
    assert one.tobytes() == (tables[0].take(idx[:, 0] % lengths[0], axis=0) + 0.0).tobytes()


def test_replica_power_by_hand() -> None:
    """Three replicas on phases a, b, a with one sample per step: at a count of 2.5 the third runs
    at half its power; at 1.5 the second does and the third not at all."""
    trace = np.array([10.0, 20.0, 30.0, 40.0])
    doubled = np.concatenate([trace, trace])
    offsets = np.array([0, 1, 3])
    power = np.zeros((1, 3))
    add_replica_power(power, doubled, offsets, np.array([[5]]), 4, np.array([1.0]), np.nan)
    np.testing.assert_array_equal(power, [[20.0, 30.0, 10.0]])  # samples 1, 2 and 4 = 0 of the trace
    phase_w = np.empty((2, 3))
    both = np.concatenate([power, power])
    replica_phase_sums(both, np.array([2.5, 1.5]), np.array([3, 2]), np.array([0, 1, 0]), phase_w)
    np.testing.assert_array_equal(phase_w, [[20.0 + 5.0, 30.0, 0.0], [20.0, 15.0, 0.0]])
    # capped at 25 W with two samples per step: the mean of 30 and 40 (35) clips to 25, twice
    capped = np.zeros((1, 1))
    add_replica_power(capped, doubled, np.array([0]), np.array([[2, 3]]), 4, np.array([0.5]), 25.0)
    np.testing.assert_array_equal(capped, [[0.5 / 2 * 50.0]])


def test_replica_power_is_numpys_bit_for_bit() -> None:
    """Ramps of up to 700 replicas (phase sums beyond numpy's 128-value blocks), blends of one to
    three configurations, one or three samples per step, capped or not, steps with no replica
    running: the kernels' phase power is numpy's, bit for bit."""
    rng = np.random.default_rng(11)
    for case in range(40):
        slots = int(rng.integers(1, 700))
        width = int(rng.integers(1, slots + 1))
        n_sub = int(rng.choice([1, 3]))
        k = 10
        phase = rng.integers(0, 3, size=slots)
        replicas = rng.uniform(0.0, width, size=k)
        replicas[0] = 0.0
        replicas[1] = float(width)
        sample_idx = rng.integers(0, 10**6, size=(k, 1)) + np.arange(1 - n_sub, 1)
        blend = []
        for _ in range(int(rng.integers(1, 4))):
            length = int(rng.integers(100, 5000))
            trace = rng.lognormal(6.0, 0.5, length)
            blend.append((np.concatenate([trace, trace]), rng.integers(0, length, size=slots), rng.random(k)))
        clip_w = None if case % 2 else 500.0
        ramp = _Ramp(blend, sample_idx, replicas, phase, width, slots, clip_w)
        expected, got = _numpy_direct(ramp), _kernel_direct(ramp)
        assert got.tobytes() == expected.tobytes(), case


def _kernel_by_offset(ramp: _Ramp) -> np.ndarray:
    """The same summed by trace offset (:func:`add_offset_power`)."""
    blend, sample_idx, replicas, phase, _, slots, clip_w = ramp
    n_on = np.minimum(np.ceil(replicas - 1e-9), slots).astype(np.int64)
    phase_w = np.zeros((sample_idx.shape[0], 3))
    for doubled_w, offsets, w in blend:
        add_offset_power(
            phase_w,
            doubled_w,
            offsets,
            phase,
            sample_idx,
            doubled_w.size // 2,
            w,
            np.nan if clip_w is None else clip_w,
            replicas,
            n_on,
        )
    return phase_w


def test_power_by_offset_by_hand() -> None:
    """The three replicas of :func:`test_replica_power_by_hand` (offsets 0, 1, 3 on phases a, b, a)
    and a fourth at offset 1 on phase a, at sample 5 (trace sample 1): at 3.5 replicas the fourth
    runs at half power, the histogram holding offset 1 on b and offsets 0 and 3 on a; then down to
    1.5 (the histogram emptied again) and 0."""
    trace = np.array([10.0, 20.0, 30.0, 40.0])
    doubled = np.concatenate([trace, trace])
    offsets, phase = np.array([0, 1, 3, 1]), np.array([0, 1, 0, 0])
    phase_w = np.zeros((3, 3))
    replicas = np.array([3.5, 1.5, 0.0])
    n_on = np.array([4, 2, 0])
    add_offset_power(phase_w, doubled, offsets, phase, np.array([[5], [5], [5]]), 4, np.ones(3), np.nan, replicas, n_on)
    np.testing.assert_array_equal(phase_w, [[20.0 + 10.0 + 0.5 * 30.0, 30.0, 0.0], [20.0, 0.5 * 30.0, 0.0], [0.0] * 3])


def test_power_by_offset_is_the_replica_sum_to_rounding() -> None:
    """Ramps of up to 20,000 replicas up and down within a block (the histogram following both
    ways), blends of one to three configurations, one or three samples per step, capped or not:
    by offset equals replica by replica to 1e-12 of the power."""
    rng = np.random.default_rng(12)
    for case in range(24):
        slots = int(rng.integers(1, 20_000))
        width = int(rng.integers(1, slots + 1))
        n_sub = int(rng.choice([1, 3]))
        k = 12
        phase = rng.integers(0, 3, size=slots)
        replicas = rng.uniform(0.0, width, size=k)
        replicas[0], replicas[1] = float(width), 0.0
        replicas[2:5] = np.floor(replicas[2:5])  # whole counts: no fractional replica
        sample_idx = rng.integers(0, 10**6, size=(k, 1)) + np.arange(1 - n_sub, 1)
        blend = []
        for _ in range(int(rng.integers(1, 4))):
            length = int(rng.integers(100, 2000))
            trace = rng.lognormal(6.0, 0.5, length)
            blend.append((np.concatenate([trace, trace]), rng.integers(0, length, size=slots), rng.random(k)))
        ramp = _Ramp(blend, sample_idx, replicas, phase, width, slots, None if case % 2 else 500.0)
        expected = _kernel_direct(ramp)
        np.testing.assert_allclose(_kernel_by_offset(ramp), expected, rtol=1e-12, atol=1e-9, err_msg=str(case))


def test_more_running_replicas_than_columns_is_refused() -> None:
    """A count beyond the block's replica columns is an error, as numpy's index was, not a write
    outside the array."""
    with pytest.raises(IndexError, match="more replicas running than columns"):
        replica_phase_sums(np.ones((1, 2)), np.array([3.0]), np.array([3]), np.zeros(2, np.int64), np.empty((1, 3)))

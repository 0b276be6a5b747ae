"""Compiled loops of a site's block (numba): its models' ITL sampling and phase power, fused.

:func:`serve_model` computes a model's serving figures for a block (:mod:`openg2g.datacenter.serving`)
in one pass over its draws, instead of a dozen numpy passes over arrays of ``configurations x
steps x samples`` and as many Python calls per model; :func:`serve_site` calls it for every model
of a site's block from flat arrays, so a block makes one compiled call: the blend of every
configuration's ITL sample, its inverse, the sum of the inverses over the replicas running, and the
per-step blends of concurrency and deadline tails. :func:`add_table_rows`, :func:`add_replica_power`
and :func:`replica_phase_sums` are the phase power of a model
(:meth:`ReplayDatacenter._phase_power <openg2g.datacenter.replay.ReplayDatacenter>`): from its
phase tables after a ramp, replica by replica during one. :func:`blend_inverse_itl` integrates a
blend's expected inverse ITL (the analytic ``itl_statistics``).

Each float comes from the same IEEE operations in the same order as the numpy expressions the
model was first written in, so the figures are the same bit for bit: the exponential is the C
library's, as numpy's on CPUs without AVX-512 (whose numpy exponential may differ in the last bit),
and row sums follow numpy's pairwise summation (:func:`pairwise_sum`).
``tests/datacenter/test_serving.py`` and ``tests/datacenter/test_phase_kernels.py`` check them
against the numpy expressions, bit for bit, on the machine that runs them.

numba compiles a function the first time it is called (about 3 s) and keeps the machine code in
``__pycache__`` beside this file (``cache=True``; in the user's cache folder when the package's is
read-only, or in ``NUMBA_CACHE_DIR``); later processes load it in about half a second with numba's
own import, once per process.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "CONCURRENCY",
    "LOC_S",
    "LOG_SCALES",
    "MEAN_ITL_S",
    "ROW",
    "SIGMAS",
    "SLOWDOWN",
    "TAIL",
    "THRESHOLDS",
    "add_offset_power",
    "add_replica_power",
    "add_table_rows",
    "blend_inverse_itl",
    "pairwise_sum",
    "replica_phase_sums",
    "serve_model",
    "serve_site",
]

THRESHOLDS, SIGMAS, LOG_SCALES, LOC_S, SLOWDOWN, CONCURRENCY, MEAN_ITL_S, TAIL = 0, 3, 7, 11, 12, 13, 14, 15
"""Columns of a configuration's row (:attr:`~openg2g.datacenter.serving.ServingConstants.row`):
its sampler's three part thresholds, four parts' sigmas and four log-scales, then one value each."""
ROW = TAIL + 1
"""Values in a configuration's row."""


_BLOCK = 128
"""numpy's ``PW_BLOCKSIZE``: rows up to this length are summed in eight interleaved partial sums."""


@numba.njit(cache=True)
def _block_sum(a: np.ndarray, lo: int, n: int) -> float:  # pragma: no cover - compiled
    """numpy's sum of ``a[lo:lo + n]`` for ``n <= 128``: in order below 8 values, else eight
    interleaved partial sums added pairwise, then the remainder in order."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = lo + 8
    whole = lo + n - n % 8
    while i < whole:
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        res += a[i]
        i += 1
    return res


@numba.njit(cache=True)
def _first_half(n: int) -> int:  # pragma: no cover - compiled
    """Where numpy splits a span of ``n`` values: half of it, rounded down to a multiple of 8."""
    half = n // 2
    return half - half % 8


@numba.njit(cache=True)
def pairwise_sum(a: np.ndarray) -> float:  # pragma: no cover - compiled
    """``np.add.reduce`` of a contiguous row, bit for bit: numpy halves a row longer than 128
    values (the first half a multiple of 8 long) and adds the two halves' sums, recursively.

    The recursion is unrolled on an explicit stack (a recursive version crashed when loaded from
    numba's cache): a frame is a span still to sum; ``left`` holds its first half's sum once known.
    """
    n = a.size
    if n <= _BLOCK:
        return _block_sum(a, 0, n)
    half = _first_half(n)
    if n - half <= _BLOCK:  # two blocks (a model's row of up to 256 samples): without the stack below
        return _block_sum(a, 0, half) + _block_sum(a, half, n - half)
    depth = 64  # spans halve at each level: 64 levels cover any array
    lo, size, left = np.empty(depth, np.int64), np.empty(depth, np.int64), np.empty(depth)
    left_done = np.zeros(depth, np.bool_)
    top = 0
    lo[0], size[0] = 0, n
    while True:
        if size[top] > _BLOCK:  # descend into the first half
            lo[top + 1], size[top + 1], left_done[top + 1] = lo[top], _first_half(size[top]), False
            top += 1
            continue
        value = _block_sum(a, lo[top], size[top])
        top -= 1
        # climb: a frame whose first half is done takes this as its second half's sum
        while top >= 0 and left_done[top]:
            value = left[top] + value
            top -= 1
        if top < 0:
            return value
        left[top], left_done[top] = value, True
        half = _first_half(size[top])
        lo[top + 1], size[top + 1], left_done[top + 1] = lo[top] + half, size[top] - half, False
        top += 1


@numba.njit(cache=True)
def serve_site(
    u: np.ndarray,
    z: np.ndarray,
    sampled: np.ndarray,
    n_on: np.ndarray,
    samples: np.ndarray,
    replicas: np.ndarray,
    configs: np.ndarray,
    blends: np.ndarray,
    weights: np.ndarray,
    has_deadline: np.ndarray,
    figures: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:func:`serve_model` of each model of a site's block, in one call: its ITL (s), throughput
    (tok/s) and deadline-miss fraction per step into ``figures[0, i]``, ``figures[1, i]`` and
    ``figures[2, i]``; NaN, NaN and 0 for a model without latency data (no configuration rows).
    Per-model arrays are flat, model after model, so the caller makes each with one copy.

    :param u: uniforms of every model's samples, model after model, each ``steps x sampled[i]`` in C order.
    :param z: standard normals, likewise.
    :param sampled: per model, the replica columns drawn each step.
    :param n_on: replicas running per step, model after model.
    :param samples: per model, the replicas whose ITL is sampled, at most (the running ones first).
    :param replicas: active (possibly fractional) replicas per step, model after model.
    :param configs: one :attr:`~openg2g.datacenter.serving.ServingConstants.row` after another,
        model after model, each model's in the order of its blend.
    :param blends: model ``i``'s configurations are ``blends[i]`` to ``blends[i + 1] - 1``; none if
        it has no latency data.
    :param weights: per configuration, its weight at each step, one after another.
    :param has_deadline: per model, it has an ITL deadline.
    :param figures: ``(3, models, steps)``, written.
    """
    steps = figures.shape[2]
    n_configs = configs.size // ROW
    rows, blend_weights = configs.reshape((n_configs, ROW)), weights.reshape((n_configs, steps))
    n_valid = np.empty(steps, np.int64)
    first_draw = 0
    for i in range(sampled.size):
        last_draw = first_draw + steps * sampled[i]
        first, end = blends[i], blends[i + 1]
        if first == end:
            figures[0, i] = np.nan
            figures[1, i] = np.nan
            figures[2, i] = 0.0
        else:
            for t in range(steps):
                n_valid[t] = min(n_on[i * steps + t], samples[i])
            serve_model(
                u[first_draw:last_draw],
                z[first_draw:last_draw],
                n_valid,
                replicas[i * steps : (i + 1) * steps],
                rows[first:end],
                blend_weights[first:end],
                has_deadline[i],
                figures[0, i],
                figures[1, i],
                figures[2, i],
            )
        first_draw = last_draw


@numba.njit(cache=True)
def serve_model(
    u: np.ndarray,
    z: np.ndarray,
    n_valid: np.ndarray,
    replicas: np.ndarray,
    configs: np.ndarray,
    weights: np.ndarray,
    has_deadline: bool,
    itl_s: np.ndarray,
    throughput_tok_s: np.ndarray,
    miss: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """One model's token-weighted ITL (s), throughput (tok/s) and deadline-miss fraction per step,
    into ``itl_s``, ``throughput_tok_s`` and ``miss`` (see :mod:`openg2g.datacenter.serving`).

    A sampled replica's ITL is the blend ``sum_c ((exp(sigma_c * z + log_scale_c) + loc_c) * w_c)
    * slowdown_c`` over the configurations ``c``, the part of each configuration's mixture chosen
    by ``searchsorted(thresholds_c, u, side="right")``, its terms added first to last. The model's
    ITL is ``n / sum(1 / ITL)`` over the ``n`` running sampled replicas, its throughput
    ``replicas * concurrency * sum(1 / ITL) / n``, and its miss fraction the blend of the
    configurations' tails weighted by their token shares ``w_c * concurrency_c / mean_itl_c``; a step
    without a running replica has NaN, 0 and 0.

    :param u: uniforms of the model's samples, ``steps x samples`` in C order.
    :param z: standard normals, likewise.
    :param n_valid: per step, the sampled replicas that run (the first ones).
    :param replicas: per step, the active (possibly fractional) replicas.
    :param configs: one :attr:`~openg2g.datacenter.serving.ServingConstants.row` per configuration.
    :param weights: per configuration, its weight at each step, ``(configurations, steps)``.
    :param has_deadline: the model has an ITL deadline (else its miss fraction is 0).
    """
    n_configs = configs.shape[0]
    steps = itl_s.size
    samples = u.size // steps
    row = np.empty(samples)
    term = np.empty(samples)
    for t in range(steps):
        draws = t * samples
        running = min(n_valid[t], samples)  # a stopped replica's sample is 0 whatever its draws
        # configuration by configuration over the samples, each sample's terms added first to last;
        # three loops, so that the exponential's calls run back to back
        for c in range(n_configs):
            t0, t1, t2 = configs[c, THRESHOLDS], configs[c, THRESHOLDS + 1], configs[c, THRESHOLDS + 2]
            for j in range(running):
                uj = u[draws + j]
                part = (t0 <= uj) + (t1 <= uj) + (t2 <= uj)  # searchsorted(side="right"), branch-free
                x = configs[c, SIGMAS + part] * z[draws + j]
                x += configs[c, LOG_SCALES + part]
                term[j] = x
            for j in range(running):
                term[j] = np.exp(term[j])
            loc_s, weight, slowdown = configs[c, LOC_S], weights[c, t], configs[c, SLOWDOWN]
            for j in range(running):
                x = term[j] + loc_s
                x *= weight
                x *= slowdown
                row[j] = x if c == 0 else row[j] + x
        for j in range(samples):
            row[j] = 1.0 / row[j] if j < running else 0.0
        inv_sum = pairwise_sum(row)
        conc = 0.0
        total = 0.0
        for c in range(n_configs):
            conc += weights[c, t] * configs[c, CONCURRENCY]
            total += weights[c, t] * configs[c, CONCURRENCY] / configs[c, MEAN_ITL_S]
        tail = 0.0
        if has_deadline:
            for c in range(n_configs):
                tail += weights[c, t] * configs[c, CONCURRENCY] / configs[c, MEAN_ITL_S] / total * configs[c, TAIL]
        if n_valid[t] > 0:
            itl_s[t] = n_valid[t] / inv_sum
            throughput_tok_s[t] = replicas[t] * conc * inv_sum / n_valid[t]
            miss[t] = tail
        else:
            itl_s[t] = np.nan
            throughput_tok_s[t] = 0.0
            miss[t] = 0.0


@numba.njit(cache=True)
def blend_inverse_itl(
    weights: np.ndarray, capped: np.ndarray, mass: np.ndarray, inverse: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``E[1 / ITL]`` of a blend per step by quadrature (:func:`openg2g.datacenter.serving.expected_inverse_itl`):
    ``inverse[t] = sum_{j, n} mass[j, n] / sum_c weights[c, t] * capped[c, j, n]``.

    :param weights: per configuration its weight at each step, ``(configurations, steps)``.
    :param capped: per configuration, ``u`` interval and normal node, its capped ITL sample (s).
    :param mass: probability of each (interval, node).
    :param inverse: per step, written (1/s).
    """
    n_configs, intervals, nodes = capped.shape
    for t in range(inverse.size):
        total = 0.0
        for j in range(intervals):
            for n in range(nodes):
                itl = 0.0
                for c in range(n_configs):
                    itl += weights[c, t] * capped[c, j, n]
                total += mass[j, n] / itl
        inverse[t] = total


# ---------------------------------------------------------------- a site's phase power
#
# The loops of ReplayDatacenter._phase_power (openg2g/datacenter/replay.py), each a numpy expression
# of a few passes and temporaries per configuration before: the same IEEE operations in the same
# order, so the same bits (tests/datacenter/test_phase_kernels.py checks them against those numpy
# expressions).


@numba.njit(cache=True)
def add_table_rows(
    phase_w: np.ndarray, table: np.ndarray, sample_idx: np.ndarray, length: int, weights: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Add one configuration's weighted phase-table rows: ``phase_w[t, p] += weights[t] *
    table[sample_idx[t, 0] % length, p]`` (W), one library sample per step.

    The numpy ``phase_w += weights[:, None] * table.take(sample_idx[:, 0] % length, axis=0)``, bit for
    bit; with ``phase_w`` zeros and weights exactly 1 it is ``table.take(...) + 0.0``.

    :param phase_w: per step and phase (W), ``(steps, 3)``, added to in place.
    :param table: power per sample index and phase (W), ``(length, 3)``.
    :param sample_idx: library sample index of each step, ``(steps, 1)`` (first column read).
    :param weights: the configuration's weight at each step.
    """
    for t in range(phase_w.shape[0]):
        row = sample_idx[t, 0] % length
        for p in range(3):
            phase_w[t, p] += weights[t] * table[row, p]


@numba.njit(cache=True)
def add_replica_power(
    power: np.ndarray,
    doubled_w: np.ndarray,
    offsets: np.ndarray,
    sample_idx: np.ndarray,
    length: int,
    weights: np.ndarray,
    clip_w: float,
) -> None:  # pragma: no cover - compiled
    """Add one configuration's weighted power of each replica, step by step (W).

    For replica ``r`` and step ``t`` with ``n`` library samples: ``acc = 0 + x[o_r + i_1 % L] + ...
    + x[o_r + i_n % L]`` (``x`` the doubled trace), clipped as ``min(acc / n, clip_w) * n`` unless
    ``clip_w`` is NaN (no cap), and ``power[t, r] += (weights[t] / n) * acc``: numpy's passes over
    the ``steps x replicas`` arrays, element by element, in the same order.

    :param power: per step and replica column (W), ``(steps, width)``, added to in place.
    :param doubled_w: the configuration's looped trace twice over (W per replica).
    :param offsets: each replica's offset modulo ``length`` (at least ``width`` of them).
    :param sample_idx: library sample indices of each step, ``(steps, n)``.
    :param clip_w: a replica's power cap (W; NaN: none).
    """
    steps, width = power.shape
    n_sub = sample_idx.shape[1]
    for t in range(steps):
        w = weights[t] / n_sub
        for r in range(width):
            acc = 0.0
            for j in range(n_sub):
                acc += doubled_w[offsets[r] + sample_idx[t, j] % length]
            if not np.isnan(clip_w):  # np.minimum: the first operand unless the second is smaller (or NaN)
                mean = acc / n_sub
                acc = (mean if mean <= clip_w or np.isnan(mean) else clip_w) * n_sub
            power[t, r] += w * acc


@numba.njit(cache=True)
def replica_phase_sums(
    power: np.ndarray, replicas: np.ndarray, n_on: np.ndarray, phase: np.ndarray, phase_w: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Per step, the power of the running replicas on each phase (W), into ``phase_w``.

    The last running replica ``n_on[t] - 1`` runs at the fraction ``replicas[t] - (n_on[t] - 1)``
    of its power (when below 1), replicas from ``n_on[t]`` on are zero, and each phase's sum is
    numpy's row sum (:func:`pairwise_sum`) over that phase's columns in order, zeros included.
    ``power`` is scaled in place.

    :param power: per step and replica column (W), ``(steps, width)``.
    :param replicas: per step, the active (possibly fractional) replica count.
    :param n_on: per step, the replicas running (its ceiling, at most ``width``).
    :param phase: each replica column's phase (0, 1 or 2).
    :param phase_w: per step and phase (W), ``(steps, 3)``, written.
    :raises IndexError: a step runs more replicas than ``power`` has columns.
    """
    steps, width = power.shape
    row = np.empty(width)
    for t in range(steps):
        on = n_on[t]
        if on > width:  # numpy's index would fail; a compiled write would land outside the array
            raise IndexError("replica_phase_sums: more replicas running than columns")
        if on > 0:
            frac = replicas[t] - (on - 1)
            if frac < 1.0:  # numpy multiplied by 1.0 otherwise, which changes no bit
                power[t, on - 1] *= frac
        for p in range(3):
            n = 0
            for r in range(width):
                if phase[r] == p:
                    row[n] = power[t, r] if r < on else 0.0
                    n += 1
            phase_w[t, p] = pairwise_sum(row[:n])


@numba.njit(cache=True)
def add_offset_power(
    phase_w: np.ndarray,
    doubled_w: np.ndarray,
    offsets: np.ndarray,
    phase: np.ndarray,
    sample_idx: np.ndarray,
    length: int,
    weights: np.ndarray,
    clip_w: float,
    replicas: np.ndarray,
    n_on: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Add one configuration's weighted power per step and phase (W), by trace offset, not replica.

    Two replicas at the same offset draw the same power, so a phase's whole replicas draw
    ``sum_j h_p[j] v_t[j]``, with ``h_p`` the histogram of their offsets and ``v_t[j]`` the power
    (weighted, clipped as :func:`add_replica_power` does) of a replica at offset ``j``: a step costs
    O(``length``) instead of O(replicas). The histogram follows the whole replicas from step to
    step (O(replicas started or stopped)). The last running replica ``n_on[t] - 1`` draws the
    fraction ``replicas[t] - (n_on[t] - 1)`` of its power when below 1, as in
    :func:`replica_phase_sums`. The sums run in another order than the replica-by-replica path's,
    so the two agree to rounding (about 1e-15 of the power), not bit for bit.

    :param phase_w: per step and phase (W), ``(steps, 3)``, added to in place.
    :param offsets: each replica's offset modulo ``length`` (at least ``max(n_on)`` of them).
    :param phase: each replica's phase (0, 1 or 2).
    :param replicas: per step, the active (possibly fractional) replica count.
    :param n_on: per step, the replicas running (the ceiling of ``replicas``).
    Other parameters as :func:`add_replica_power`.
    """
    steps = phase_w.shape[0]
    n_sub = sample_idx.shape[1]
    hist = np.zeros((3, length), dtype=np.int64)
    v = np.empty(length)
    whole = 0
    for t in range(steps):
        on = n_on[t]
        frac = replicas[t] - (on - 1) if on > 0 else 1.0
        full = on - 1 if frac < 1.0 else on
        while whole < full:
            hist[phase[whole], offsets[whole]] += 1
            whole += 1
        while whole > full:
            whole -= 1
            hist[phase[whole], offsets[whole]] -= 1
        w = weights[t] / n_sub
        for j in range(length):
            acc = 0.0
            for s in range(n_sub):
                acc += doubled_w[j + sample_idx[t, s] % length]
            if not np.isnan(clip_w):
                mean = acc / n_sub
                acc = (mean if mean <= clip_w or np.isnan(mean) else clip_w) * n_sub
            v[j] = w * acc
        for p in range(3):
            total = 0.0
            for j in range(length):
                if hist[p, j] != 0:
                    total += hist[p, j] * v[j]
            phase_w[t, p] += total
        if full < on:
            phase_w[t, phase[on - 1]] += frac * v[offsets[on - 1]]

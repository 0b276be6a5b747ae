"""A training job's power: a PARAMETERIZED synthetic model, not a measured trace.

Our data (ML.ENERGY) holds inference measurements only, so a training job is synthesized. The
model is the one the public OpenG2G study uses (arXiv 2605.05519, gpu2grid/openg2g 0.2.0), written
here from its description; every parameter is a field of :class:`TrainingSpec` whose defaults are
the study's values. One per-GPU trace of ``trace_s`` seconds is sampled every
:data:`TRACE_DT_S` from ``numpy.random.default_rng(seed)``, drawing in this order:

1. **plateaus**: starting high, alternating lengths ``U(high_s)`` at ``high_w_per_gpu`` (compute)
   and ``U(low_s)`` at ``low_w_per_gpu`` (gradient communication), each rounded to whole samples;
2. **noise**: independent ``N(0, noise_w)`` per sample, first for every high-plateau sample in
   time order, then for every low one;
3. **smoothing**: a centred moving average over ``round(smoothing_s / 0.1)`` samples, wrapping
   around the trace's end because the trace repeats;
4. **dips**: ``Poisson(dips_per_s * trace_s)`` dips, each at a uniform start, ``round(U(dip_s)/0.1)``
   samples long (none if that is 0; then no depth is drawn), ``U(dip_depth_w)`` deep, floored at 0 W.

The trace is then scaled by ``peak_w_per_gpu / max(trace)`` (the study's 400 W peak turns its 211 W
mean into 253 W) and repeats with period ``trace_s``. At job start, power is capped by the line
from ``ramp_from_w_per_gpu`` rising to ``high_w_per_gpu`` (both rescaled) over ``ramp_s``: the
start-up ramp. The study's trace carries its ramp in its first samples and so replays it every
loop; here it happens once, at start.

**Lockstep or independent.** In synchronous data-parallel training every GPU of the job computes
and communicates at the same instants, so by default (``sync: lockstep``) all GPUs follow the
one trace and the job's power swings by hundreds of kW within seconds. ``sync: independent``
gives each 8-GPU server its own seeded offset into the trace (uncoordinated jobs): the same mean,
far smaller swings. The job draws power in ``[start_s, end_s)`` and nothing outside.
"""

from __future__ import annotations

import math

import numpy as np

from openg2g.datacenter.config import TrainingSpec

__all__ = ["TRACE_DT_S", "TrainingJob", "synthesize_trace"]

TRACE_DT_S = 0.1
"""Sample period of the synthesized per-GPU trace (s)."""

_GPUS_PER_SERVER = 8


def synthesize_trace(spec: TrainingSpec) -> np.ndarray:
    """The per-GPU power trace of one period, before the peak rescale (W, one sample per 0.1 s).

    See the module docstring for the draws and their order.
    """
    rng = np.random.default_rng(spec.seed)
    n = round(spec.trace_s / TRACE_DT_S)
    levels = np.empty(n)
    start, high = 0, True
    while start < n:
        length = round(rng.uniform(*(spec.high_s if high else spec.low_s)) / TRACE_DT_S)
        levels[start : start + length] = spec.high_w_per_gpu if high else spec.low_w_per_gpu
        start += length
        high = not high
    is_high = levels > (spec.high_w_per_gpu + spec.low_w_per_gpu) / 2
    power = levels.copy()
    power[is_high] += rng.normal(0.0, spec.noise_w, int(is_high.sum()))
    power[~is_high] += rng.normal(0.0, spec.noise_w, int((~is_high).sum()))
    window = max(1, round(spec.smoothing_s / TRACE_DT_S))
    if window > 1:
        # centred like numpy's "same" convolution, but wrapping because the trace repeats
        lead = (window - 1) // 2
        padded = np.concatenate([power[n - lead :], power, power[: window - 1 - lead]])
        power = np.convolve(padded, np.full(window, 1.0 / window), mode="valid")
    for _ in range(rng.poisson(spec.dips_per_s * spec.trace_s)):
        first = int(rng.uniform(0.0, spec.trace_s) / TRACE_DT_S)
        last = min(n, first + round(rng.uniform(*spec.dip_s) / TRACE_DT_S))
        if last > first:
            depth = rng.uniform(*spec.dip_depth_w)
            power[first:last] = np.maximum(power[first:last] - depth, 0.0)
    return np.maximum(power, 0.0)


class TrainingJob:
    """Power drawn by one training job over time (see the module docstring).

    :param spec: the job.
    """

    def __init__(self, spec: TrainingSpec) -> None:
        self.spec = spec
        raw = synthesize_trace(spec)
        peak = float(raw.max())
        self.scale = spec.peak_w_per_gpu / peak if spec.peak_w_per_gpu is not None and peak > 0 else 1.0
        self.per_gpu_w = raw * self.scale
        """One period of the per-GPU trace after the rescale (W)."""
        n_servers = math.ceil(spec.gpus / _GPUS_PER_SERVER)
        if spec.sync == "lockstep":
            self._offsets = np.zeros(1)
            self._gpus = np.array([float(spec.gpus)])
        else:
            rng = np.random.default_rng([spec.seed, 1])
            self._offsets = rng.integers(0, self.per_gpu_w.size, size=n_servers).astype(float)
            self._gpus = np.full(n_servers, float(_GPUS_PER_SERVER))
            self._gpus[-1] = spec.gpus - _GPUS_PER_SERVER * (n_servers - 1)

    @property
    def mean_w_per_gpu(self) -> float:
        """Mean per-GPU power over one period of the trace, ramp excluded (W)."""
        return float(self.per_gpu_w.mean())

    def runs_within(self, first_s: float, last_s: float) -> bool:
        """Whether the job draws power at any time in ``[first_s, last_s]`` (else :meth:`power_w`
        is 0 there)."""
        return last_s >= self.spec.start_s and first_s < self.spec.end_s

    def power_w(self, t_s: np.ndarray | float) -> np.ndarray:
        """Total power of the job's GPUs at times ``t_s`` (W), shaped like ``t_s``.

        Between trace samples the power is interpolated linearly.
        """
        t = np.asarray(t_s, dtype=np.float64)
        since = t - self.spec.start_s
        running = (since >= 0) & (t < self.spec.end_s)
        x = np.where(running, since, 0.0)[..., None] / TRACE_DT_S + self._offsets
        k = np.floor(x)
        frac = x - k
        n = self.per_gpu_w.size
        i = k.astype(np.int64) % n
        per_gpu = self.per_gpu_w[i] * (1.0 - frac) + self.per_gpu_w[(i + 1) % n] * frac
        if self.spec.ramp_s > 0:
            spec = self.spec
            rise = (spec.high_w_per_gpu - spec.ramp_from_w_per_gpu) * np.minimum(since / spec.ramp_s, 1.0)
            cap = self.scale * (spec.ramp_from_w_per_gpu + rise)
            per_gpu = np.where((since < spec.ramp_s)[..., None], np.minimum(per_gpu, cap[..., None]), per_gpu)
        return np.where(running, per_gpu @ self._gpus, 0.0)

"""Trace-replay datacenter: every inference replica replays a measured power timeline.

Model of one site (all numbers per step of length ``dt_s``):

**Layout and phases.** GPUs sit in servers of :data:`GPUS_PER_SERVER` = 8, each wired to one
phase; the site's ``layout`` (:mod:`openg2g.datacenter.layout`) gives each replica slot its phase.
By default (``packed``) each model's replica slots fill consecutive servers (a 1-GPU model puts 8
replicas on a server, an 8-GPU model one), models one after another in the order of the site spec,
then the training job's servers, server ``s`` (counted over the whole site from 0) on phase
``"abc"[s % 3]``; ``pool`` is the public OpenG2G study's phase-balanced server pool. Replicas beyond
the configured count (added by :class:`SetReplicas`, :class:`ShiftReplicas`) continue their
model's pattern; replicas are started and stopped from the end of each model's list. With
``whole_servers`` a model runs the replicas that fill its last server (:meth:`_Model.powered`).

**Replica power.** Replica ``r`` of a model at batch size ``b`` draws ``P_b[(k + o_r) mod L_b]`` where
``P_b`` is the library timeline (W per replica, 0.1 s samples, ``L_b`` samples), ``k`` the sample
index of the simulation time and ``o_r`` an offset drawn uniformly from the seed, so replicas are
desynchronized. For looping, each timeline is made periodic by a linear cross-fade over its last
:data:`LOOP_FADE_S` seconds into its start (:func:`loop_trace`), then scaled by a factor within a
fraction of a percent of 1 so that its mean is the measured mean exactly: no jump at the seam, no
bias in energy. With the site's ``template_s`` the timeline is instead the study's template
(:func:`repeat_trace`), mean as it falls. A step longer than 0.1 s averages the samples it covers.

**Batch-size change.** Every replica of the model moves from its old timeline to the new one with
the weight of the new timeline rising as ``1 - exp(-(t - t_cmd) / tau)``: power, ITL and token rate
are blends of both configurations with these weights. ``tau`` is :data:`FILL_TAU_S` = 1 s when the
batch grows (queued requests are admitted within a few decode iterations) and, when it shrinks,
half the mean request duration at the old batch (``avg_output_len * mean_ITL / 2``, the mean
residual time of the requests that must drain: 1.4-30 s for the bundled configurations, 3-17 s at
batch 128). Commands during a transition decay all previous weights with the new ``tau``, so power
is continuous.

**Latency and throughput.** Each step, for up to ``itl_samples`` replicas per model (the site's;
:data:`ITL_SAMPLES` by default), one ITL is
drawn from the configuration's measured lognormal mixture (``loc + scale*exp(sigma*N(0,1))``,
component by weight) in its time-weighted form (:meth:`ItlMixture.time_weighted_sample_s`: the ITL
a sequence sees over a 0.1 s window, where long gaps take more time than their token count). A
replica's tokens in the step are ``c * dt / ITL`` with ``c`` its effective number of decoding
sequences, anchored so that the expected tokens per second equal the leaderboard's measured output
throughput at that (model, GPUs, batch): ``c = throughput_tok_s * mean_itl_s``. The model's ITL is
the token-weighted mean over the sampled replicas (an estimate of the measured per-token mean
ITL); its throughput ``replicas * mean(c / ITL)``. ``itl_statistics: analytic`` reports instead
their limit over many replicas, with no draw (:func:`openg2g.datacenter.serving.expected_figures`):
the per-token mean ITL and the measured throughput for one configuration, the blend's
``E[1 / ITL]`` integrated in a transition. The deadline-miss fraction is computed
analytically, not sampled: the fraction of tokens over the deadline is ``1 - F(deadline / s)``
with ``F`` the mixture CDF and ``s`` the power-cap slowdown, blended by token share in transitions.

**Power cap (a documented model, not a measurement: the ML.ENERGY data holds no capped runs).**
A per-GPU cap ``cap`` clips each replica sample to ``gpus * cap``. Speed follows
``ITL_capped = ITL * max(1, P_mean / (gpus * cap)) ** alpha`` with ``P_mean`` the configuration's
mean power and :data:`CAP_ALPHA` = 0.4: memory-bound decode loses far less speed than power
(industry reports for H100 inference: a 14 % cap cut costs 5-8 % throughput, i.e. alpha 0.35-0.5).
Throughput falls by the same factor. Caps must lie in the H100 SXM settable range 200-700 W; the
reports cover 602-700 W only (:data:`~openg2g.core.limits.CAP_CALIBRATED_MIN_W`), so the engine
counts caps below 602 W in the run summary (``power_caps_below_calibration``): tokens per joule
doubling at a 200 W cap is the exponent extrapolated, not a measurement.

**Replica ramps.** :class:`SetReplicas`, :class:`SetInferenceScale` and :class:`ShiftReplicas` move
the active replica count linearly from its present value to a whole target over ``ramp_s``; the
fractional counts on the way run the last replica at that fraction of its power (the ramp's
progress). :class:`SetInferenceScale` aims each model at the whole count nearest ``fraction`` of
its configured replicas, a half rounded up (:func:`scaled_replicas`); the other two take whole
counts only.

**Facility.** Per phase ``p = pue * (GPU power of inference + training on that phase) + base``
with ``base = base_load_kw_per_phase * 1000``; the site spec's default PUE is 1.0 (GPU power only).
Typical values: 1.1 for hyperscale facilities (Google fleet, 2023), 1.58 industry average (Uptime
Institute Global Data Center Survey 2023). Reactive power ``q = p * tan(acos(pf))`` per phase.
Training GPUs (:mod:`openg2g.datacenter.training`, a parameterized model) are reserved for the
whole run in capacity checks. :class:`SetSiteOnline` ``(False)`` makes the site draw nothing
(models report zero replicas and throughput); ``(True)`` resumes the previous state at once.

**Loss of supply.** While the grid has no path from a source to the site's bus
(:meth:`~openg2g.core.interfaces.DatacenterBackend.set_supply`, e.g. the line feeding it out of
service) the site draws nothing and serves nothing: power, reactive power, training power,
replicas, tokens and energy are zero and the ITL is undefined (NaN). The requests in flight are
lost with the power. Commands still act on the commanded state (batch sizes, caps, replica ramps
run on in time), and the site resumes that state at once when supply returns: a restart
modelled as instantaneous, with no warm-up. Its random draws go on during the loss, so every step
after it equals the same step of a run that never lost supply.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from types import ModuleType
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np
import scipy.fft

from openg2g.core.commands import (
    Command,
    DatacenterCommand,
    SetBatchSize,
    SetInferenceScale,
    SetPowerCap,
    SetReplicas,
    SetSiteOnline,
    ShiftReplicas,
)
from openg2g.core.errors import CommandError, TraceError
from openg2g.core.interfaces import DatacenterBackend, ModelInfo, SiteInfo, TrainingInfo
from openg2g.core.limits import CAP_MAX_W, CAP_MIN_W, MAX_DURATION_S
from openg2g.core.state import DatacenterSeries, DatacenterState, ModelSeries
from openg2g.datacenter.config import SiteSpec
from openg2g.datacenter.layout import GPUS_PER_SERVER, ModelSlots, replica_phases
from openg2g.datacenter.library import ItlMixture, TraceConfig, TraceLibrary, time_weighted_sampler
from openg2g.datacenter.serving import ITL_SAMPLES, ServingConstants, ServingInput, serve_block
from openg2g.datacenter.training import TrainingJob

__all__ = [
    "CAP_ALPHA",
    "CAP_MAX_W",
    "CAP_MIN_W",
    "FILL_TAU_S",
    "GPUS_PER_SERVER",
    "ITL_SAMPLES",
    "LOOP_FADE_S",
    "ReplayDatacenter",
    "SitePeak",
    "loop_trace",
    "repeat_trace",
    "scaled_replicas",
]

LOOP_FADE_S = 5.0
"""Cross-fade window that closes each trace into a loop (s); at most a quarter of the trace."""
FILL_TAU_S = 1.0
"""Time constant of a batch-size increase (s)."""
CAP_ALPHA = 0.4
"""Exponent of the power-cap slowdown model (assumption, see the module docstring)."""
_WEIGHT_FLOOR = 1e-4
_Count = TypeVar("_Count", float, np.ndarray)
# phase tables kept per model (least recently used dropped first), spectra per configuration (oldest first)
_TABLES_KEPT = 32

_BY_OFFSET = 8
"""A model whose replicas (during a ramp, or capped with several library samples per step)
outnumber its trace's samples this many times is summed by trace offset (O(samples) per step,
:func:`~openg2g.datacenter.kernels.add_offset_power`), not replica by replica (O(replicas)). The
two agree to rounding only, so the bound sits above every bundled ramp (the largest,
``transmission_four_campuses``' 2,520 Llama-3.1-8B replicas on a 459-sample trace, is 5.5x) and
their tables stay bit for bit."""


def scaled_replicas(fraction: float, configured: int) -> int:
    """The whole number of replicas nearest ``fraction * configured``, a half rounded up.

    The fraction is taken as the decimal it is written as (``repr``), so ``0.35`` of 10 is the tie
    3.5 (4 replicas), not the float product 3.4999999999999996.
    """
    return math.floor(Fraction(repr(fraction)) * configured + Fraction(1, 2))


def loop_trace(power_w: np.ndarray, fade_samples: int) -> np.ndarray:
    """Make a timeline periodic: drop its last ``fade_samples`` and cross-fade them into its start.

    ``y[i] = a_i x[i] + (1 - a_i) x[N - W + i]`` for ``i < W`` with ``a_i = (i + 0.5) / W``, and
    ``y[i] = x[i]`` after; ``y`` has ``N - W`` samples and ``y[-1] = x[N-W-1]`` is followed by
    ``y[0] ~ x[N-W]``, the sample that followed it in the measurement. ``y`` is then scaled so that
    its mean equals the mean of ``x``: dropping and blending samples would otherwise bias a
    configuration's energy (by up to 0.3 % on the bundled traces, which start and end differently).
    """
    x = np.asarray(power_w, dtype=np.float64)
    w = int(fade_samples)
    if w <= 0:
        return x.copy()
    n = x.size
    a = (np.arange(w) + 0.5) / w
    y = x[: n - w].copy()
    y[:w] = a * x[:w] + (1 - a) * x[n - w :]
    looped_mean = y.mean()
    return y * (x.mean() / looped_mean) if looped_mean > 0 else y


def repeat_trace(power_w: np.ndarray, samples: int) -> np.ndarray:
    """The study's per-GPU template: the timeline without its last sample, repeated from its start.

    ``y[i] = x[i mod (N - 1)]`` for ``i < samples``: the public OpenG2G study samples the measured
    trace, taken as periodic with period ``(N - 1) dt``, at ``i dt`` (a 51 s trace of 511 samples
    repeats every 510). Nothing is blended or rescaled: the mean is that of the samples the
    template happens to hold, which differs from the measured mean by up to half a percent
    (:attr:`SiteSpec.template_s`).
    """
    x = np.asarray(power_w, dtype=np.float64)
    return x[np.arange(samples) % max(x.size - 1, 1)]


def _slots(replicas: int, capacity_replicas: int, gpus: int, whole_servers: bool) -> int:
    """Replica slots of a model: every replica it may run, its servers filled when running whole servers."""
    slots = max(replicas, capacity_replicas)
    if whole_servers:
        slots = math.ceil(-(-slots * gpus // GPUS_PER_SERVER) * GPUS_PER_SERVER / gpus)
    return slots


def _per_server(gpus: int) -> float:
    """Replicas of ``gpus`` GPUs on one 8-GPU server (a fraction for replicas spanning servers)."""
    return GPUS_PER_SERVER / gpus


def _read_only(array: np.ndarray) -> np.ndarray:
    """Hand ``array`` (fresh, owned by nobody else) over to a state, which then needs no copy."""
    array.flags.writeable = False
    return array


def _constant(cache: dict[tuple[int, type, float | None], np.ndarray], k: int, value: float | None) -> np.ndarray:
    """A read-only array of ``k`` copies of ``value`` (``None``: NaN), kept in ``cache``: every block
    of a steady site repeats the same replica counts, batch sizes, caps and flags."""
    key = (k, type(value), value)
    array = cache.get(key)
    if array is None:
        if len(cache) >= 64:
            cache.clear()
        array = cache[key] = _read_only(np.full(k, np.nan if value is None else value))
    return array


@functools.cache
def _kernels() -> ModuleType:
    """The compiled loops (:mod:`openg2g.datacenter.kernels`), imported when a site first steps so
    that ``import openg2g`` does not load numba; kept, since an import statement in a function costs
    microseconds at every call."""
    from openg2g.datacenter import kernels

    return kernels


@functools.lru_cache(maxsize=4096)
def _tail(mix: ItlMixture, itl_s: float) -> float:
    """Fraction of tokens with ITL above ``itl_s`` (cached: it changes only with batch and cap)."""
    return float(1.0 - mix.cdf(itl_s))


class _ReplayedTrace(NamedTuple):
    """What replay makes of one library trace, whatever the site: shared by every site built from
    the same library (an env builds a new site for each episode whose spec differs, e.g. in its
    training job), so that it is made, and its spectra computed, once per process.

    :param doubled_w: the looped (or template) timeline twice over (W per replica), read-only.
    :param mean_w: its mean (W).
    :param spectra: the :meth:`_Config.spectrum` of each clip, filled as they are asked for.
    """

    doubled_w: np.ndarray
    mean_w: float
    spectra: dict[float | None, np.ndarray]


@functools.lru_cache(maxsize=512)
def _replayed_trace(
    library: TraceLibrary, model: str, gpus: int, batch: int, template_s: float | None
) -> _ReplayedTrace:
    """The :class:`_ReplayedTrace` of a configuration: looped (:func:`loop_trace`), or the study's
    template of ``template_s`` seconds (:func:`repeat_trace`)."""
    meta = library.config(model, gpus, batch)
    power = library.power(model, gpus, batch)
    if template_s is None:
        looped = loop_trace(power, int(min(LOOP_FADE_S / library.dt_s, meta.samples // 4)))
    else:
        looped = repeat_trace(power, round(template_s / library.dt_s) + 1)
    return _ReplayedTrace(_read_only(np.concatenate([looped, looped])), float(looped.mean()), {})


@dataclass
class _Config:
    """One batch size of one model, prepared for replay."""

    meta: TraceConfig
    doubled_w: np.ndarray  # looped trace twice over (read-only), so index o + k never needs a modulo
    length: int
    mean_w: float
    concurrency: float  # c: decoding sequences; tokens per second of a replica = c / ITL
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # o_r mod length
    spectra: dict[float | None, np.ndarray] = field(default_factory=dict)  # see spectrum; shared, _ReplayedTrace

    @functools.cached_property
    def fft_n(self) -> int:
        """Length of the transforms of :meth:`_Model.phase_table`: the trace's own length when
        pocketfft has fast kernels for it, else a fast length of at least twice it (why: the comment
        in :meth:`_Model.phase_table`)."""
        n = scipy.fft.next_fast_len(self.length, real=True)
        return self.length if n == self.length else scipy.fft.next_fast_len(2 * self.length, real=True)

    def spectrum(self, clip_w: float | None) -> np.ndarray:
        """``rfft`` over :attr:`fft_n` samples of one replica's looped power (W), clipped at
        ``clip_w`` (``None``: not clipped): one period when ``fft_n`` is the length, else two
        periods and zeros.

        It depends on neither the replicas' offsets nor their count, so it is kept across resets
        (each of which draws new offsets, hence new phase tables)."""
        spectrum = self.spectra.get(clip_w)
        if spectrum is None:
            if len(self.spectra) >= _TABLES_KEPT:  # caps can take any value: keep the latest few
                del self.spectra[next(iter(self.spectra))]
            x = self.doubled_w[: min(self.fft_n, 2 * self.length)]
            x = x if clip_w is None else np.minimum(x, clip_w)
            spectrum = self.spectra[clip_w] = _read_only(scipy.fft.rfft(x, n=self.fft_n))
        return spectrum


@dataclass
class _Model:
    """Runtime state of one served model."""

    name: str
    gpus: int
    configured: int
    batch_sizes: tuple[int, ...]
    initial_batch: int
    deadline_s: float | None
    slots: int
    phase: np.ndarray
    configs: dict[int, _Config]
    raw_offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    weights: dict[int, float] = field(default_factory=dict)  # batch -> weight at weights_t_s
    weights_t_s: float = 0.0
    tau_s: float = 1.0
    batch: int = 0
    ramp: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # (a0, a1, t0, t1)
    cap_w_per_gpu: float | None = None
    per_server: float = 0.0  # replicas per 8-GPU server when running whole servers; 0: fractional counts
    tables: dict[tuple[int, int, float | None], np.ndarray] = field(default_factory=dict)  # see phase_table
    uniform_rng: np.random.Generator = field(default_factory=np.random.default_rng)  # ITL component choice
    normal_rng: np.random.Generator = field(default_factory=np.random.default_rng)  # ITL lognormal draws
    serving_constants: dict[tuple[int, float | None], ServingConstants] = field(default_factory=dict)  # see serving()
    constants: dict[tuple[int, type, float | None], np.ndarray] = field(default_factory=dict)  # see _constant

    def counts_block(
        self, t_s: np.ndarray, t_first: float, commanded: bool = False
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Active (possibly fractional) replica count at each time (linear ramp), the replicas
        running (its ceiling: a fractional last one runs) and their least number; ``t_first`` is
        ``min(t_s)``. With whole servers the counts are those that run (:meth:`powered`), unless
        ``commanded``."""
        a0, a1, t0, t1 = self.ramp
        if t_first >= t1:  # the ramp is over: the common case, without the temporaries below
            a = a1 if commanded else self.powered(a1)
            n_on = min(math.ceil(a - 1e-9), self.slots)
            return _constant(self.constants, t_s.size, a), _constant(self.constants, t_s.size, n_on), n_on
        if t1 <= t0:
            replicas = np.where(t_s >= t1, a1, a0)
        else:
            replicas = np.where(t_s >= t1, a1, np.where(t_s <= t0, a0, a0 + (a1 - a0) * (t_s - t0) / (t1 - t0)))
        if not commanded and self.per_server:
            replicas = self.powered(replicas)
        running = np.minimum(np.ceil(replicas - 1e-9), self.slots).astype(np.int64)
        return replicas, running, int(running.min())

    def powered(self, replicas: _Count) -> _Count:
        """The replicas that run for a commanded count: with whole servers the count rounded to a
        whole number (half to even, as the study) and raised to fill its last server; else itself."""
        if not self.per_server:
            return replicas
        return np.ceil(np.rint(replicas) / self.per_server - 1e-9) * self.per_server

    def active(self, t_s: float) -> float:
        """The commanded (possibly fractional) replica count at ``t_s``."""
        return float(self.counts_block(np.array([t_s]), t_s, commanded=True)[0][0])

    def target(self) -> float:
        return self.ramp[1]

    def set_target(self, t_s: float, replicas: float, ramp_s: float) -> None:
        self.ramp = (self.active(t_s), float(replicas), t_s, t_s + max(ramp_s, 0.0))

    def width(self) -> int:
        """Replica columns a block computes: enough for the whole present ramp.

        Fixed for a ramp, not for a block, so every array a block reduces has the same length
        whatever the block's span: block-stepped and step-by-step runs agree bit for bit.
        """
        a0, a1, _, _ = self.ramp
        return min(math.ceil(max(self.powered(a0), self.powered(a1)) - 1e-9), self.slots)

    def phase_table(self, batch: int, n_full: int) -> np.ndarray:
        """Power per phase (W) of replicas ``0 .. n_full - 1`` at ``batch`` under the present cap,
        at every sample index of the looped trace: shape ``(length, 3)`` (a Fortran-ordered view).
        Built once and kept."""
        key = (batch, n_full, self.cap_w_per_gpu)
        if key in self.tables:
            self.tables[key] = self.tables.pop(key)  # most recently used last
        else:
            if len(self.tables) >= _TABLES_KEPT:
                del self.tables[next(iter(self.tables))]
            c = self.configs[batch]
            spectrum = c.spectrum(None if self.cap_w_per_gpu is None else self.gpus * self.cap_w_per_gpu)
            # T_p(k) = sum over replicas r of phase p of x[(o_r + k) mod L] = sum_j h_p[j] x[(j + k) mod L]
            # with h_p the histogram of their offsets: a circular cross-correlation, done by FFT in
            # O(L log L) whatever the replica count (rounding ~1e-15 of the phase's power). The three
            # phases go through scipy's pocketfft in one call: the same bits as numpy's, row by row,
            # in 0.6 of its time on the bundled trace lengths. A length with a prime factor above 5
            # (every bundled one) would take pocketfft's slower paths, Bluestein's for a large prime:
            # there the same sums are the linear correlation of h_p with two periods of x, both
            # zero-padded to a fast length n >= 2L, whose first L lags never wrap (half the time
            # over the bundled lengths, 0.4 of it on the longest; docs/performance.md, "Env throughput")
            # The histograms go into one zero-padded float array and the product overwrites their
            # transform: the same values through the same transforms as rfft(h, n=fft_n) of the
            # integer counts, without three fresh arrays of the padded length (0.85 of the time)
            offsets, phase = c.offsets[:n_full], self.phase[:n_full]
            h = np.zeros((3, c.fft_n))
            for p in range(3):
                h[p, : c.length] = np.bincount(offsets[phase == p], minlength=c.length)
            product = scipy.fft.rfft(h, axis=1, overwrite_x=True)
            np.conj(product, out=product)
            product *= spectrum
            table = scipy.fft.irfft(product, n=c.fft_n, axis=1, overwrite_x=True)
            # kept as the rows the transform gives (a view of them when unpadded), handed out
            # transposed: the copy into sample-major order took about 4 % of a table's build
            self.tables[key] = np.ascontiguousarray(table[:, : c.length]).T
        return self.tables[key]

    def serving(self, batch: int) -> ServingConstants:
        """The ITL sampling constants of ``batch`` under the present cap (computed once, kept)."""
        key = (batch, self.cap_w_per_gpu)
        cached = self.serving_constants.get(key)
        if cached is not None:
            return cached
        c = self.configs[batch]
        mix = c.meta.itl
        slowdown = (
            1.0 if self.cap_w_per_gpu is None else max(1.0, c.mean_w / (self.gpus * self.cap_w_per_gpu)) ** CAP_ALPHA
        )
        mean_itl_s = mix.mean_s() * slowdown if mix is not None else float("nan")
        tail = 0.0
        if mix is not None and self.deadline_s is not None:
            tail = _tail(mix, self.deadline_s / slowdown)
        sampler = time_weighted_sampler(mix) if mix is not None else None
        cached = ServingConstants(sampler, slowdown, c.concurrency, mean_itl_s, tail)
        self.serving_constants[key] = cached
        return cached

    def weights_at(self, t_s: float) -> dict[int, float]:
        """The weight of each configuration at ``t_s``: :func:`_blends` at one time (its floats,
        without its arrays for many models and times: a batch command asks this once)."""
        if len(self.weights) == 1 and self.batch in self.weights:
            return {self.batch: 1.0}
        # numpy's exp, as _blends takes it (libm's may differ in the last bit); the products,
        # comparisons and sum below are the same IEEE operations in Python floats
        decay = float(np.exp(-max(t_s - self.weights_t_s, 0.0) / self.tau_s))
        out: dict[int, float] = {}
        rest = 0.0
        for b, w in self.weights.items():  # in the order of weights, as _blends adds them
            if b != self.batch:
                w *= decay
                if w > _WEIGHT_FLOOR:
                    out[b] = w
                    rest += w
        out[self.batch] = 1.0 - rest
        return out


def _blends(models: list[_Model], t_s: np.ndarray, ones: dict) -> list[list[tuple[int, np.ndarray]]]:
    """Each model's batch configurations with weight at the times ``t_s``, as ``(batch, weight per
    time)`` in the order their terms are added: earlier batches in the order of ``weights``, the
    current batch last, taking the rest. All models' decays are computed together.

    :param ones: a cache of read-only arrays of ones (the weight of a model in no transition).
    """
    blends: list[list[tuple[int, np.ndarray]]] = [[] for _ in models]
    moving = []
    for i, m in enumerate(models):
        if len(m.weights) == 1 and m.batch in m.weights:  # no transition: weight 1 (= 1 - 0)
            blends[i] = [(m.batch, _constant(ones, t_s.size, 1.0))]
        else:
            moving.append(i)
    if not moving:
        return blends
    earlier = [[(b, w) for b, w in models[i].weights.items() if b != models[i].batch] for i in moving]
    since = t_s[None, :] - np.array([models[i].weights_t_s for i in moving])[:, None]
    decay = np.exp(-np.maximum(since, 0.0) / np.array([models[i].tau_s for i in moving])[:, None])
    start = np.zeros((len(moving), max(len(e) for e in earlier)))
    for r, e in enumerate(earlier):
        start[r, : len(e)] = [w for _, w in e]
    weights = start[:, :, None] * decay[:, None, :]
    weights = np.where(weights > _WEIGHT_FLOOR, weights, 0.0)
    kept = cast(list[list[bool]], weights.any(axis=2).tolist())
    # the current batch takes what the earlier ones left, summed in their order (zeros add nothing)
    rest = np.zeros(decay.shape)
    for j in range(weights.shape[1]):
        rest += weights[:, j]
    current = 1.0 - rest
    for r, i in enumerate(moving):
        blends[i] = [(b, weights[r, j]) for j, (b, _) in enumerate(earlier[r]) if kept[r][j]]
        blends[i].append((models[i].batch, current[r]))
    return blends


@dataclass(frozen=True)
class SitePeak:
    """An estimate of a site's largest facility power (:meth:`ReplayDatacenter.peak_estimate`).

    :param serving_gpus: GPUs of the inference replicas the site starts with.
    :param training_gpus: GPUs of its training job (0 without one).
    :param peak_w: the estimated peak facility power, all phases (W).
    """

    serving_gpus: int
    training_gpus: int
    peak_w: float


class ReplayDatacenter(DatacenterBackend):
    """A datacenter site replaying measured per-replica power traces (see the module docstring).

    Build it with :meth:`from_spec`.
    """

    def __init__(
        self,
        spec: SiteSpec,
        library: TraceLibrary,
        models: list[_Model],
        training: TrainingJob | None,
        training_phase_share: np.ndarray,
        capacity_gpus: int,
    ):
        self.name = spec.name
        self.spec = spec
        self.library = library
        self.capacity_gpus = capacity_gpus
        self._models = {m.name: m for m in models}
        self._training = training
        self._training_share = training_phase_share
        self._q_per_p = math.tan(math.acos(spec.power_factor))
        self._base_w = spec.base_load_kw_per_phase * 1000.0
        self.energy_j = 0.0
        self._constants: dict[tuple[int, type, float | None], np.ndarray] = {}
        self.reset(0)

    @classmethod
    def from_spec(cls, spec: SiteSpec, library: TraceLibrary) -> ReplayDatacenter:
        """Build a site from its scenario spec and a trace library.

        :raises TraceError: the spec names a configuration the library does not hold (run
            :func:`openg2g.datacenter.validate_site` first for a full list of problems).
        """
        from openg2g.datacenter.validate import validate_site

        problems = validate_site(spec, library, 0)
        if problems:
            raise TraceError(f"site {spec.name!r}: " + "; ".join(f"{loc}: {msg}" for loc, msg in problems))
        training_gpus = spec.training.gpus if spec.training else 0
        used = sum(m.replicas * m.gpus_per_replica for m in spec.models) + training_gpus
        capacity = spec.gpu_capacity if spec.gpu_capacity is not None else used
        pool = spec.pool_replicas or {}
        slots_of = [
            _slots(
                ms.replicas, (capacity - training_gpus) // ms.gpus_per_replica, ms.gpus_per_replica, spec.whole_servers
            )
            for ms in spec.models
        ]
        phases, share = replica_phases(
            spec.layout,
            [
                ModelSlots(
                    ms.model,
                    ms.gpus_per_replica,
                    pool.get(ms.model, ms.replicas) if spec.layout == "pool" else ms.replicas,
                    slots,
                )
                for ms, slots in zip(spec.models, slots_of)
            ],
            capacity,
            training_gpus,
        )
        models: list[_Model] = []
        for ms, slots, phase in zip(spec.models, slots_of, phases):
            measured = library.batch_sizes(ms.model, ms.gpus_per_replica)
            allowed = tuple(sorted(ms.batch_sizes)) if ms.batch_sizes is not None else measured
            configs: dict[int, _Config] = {}
            for b in allowed:
                meta = library.config(ms.model, ms.gpus_per_replica, b)
                trace = _replayed_trace(library, ms.model, ms.gpus_per_replica, b, spec.template_s)
                mean_itl_s = meta.mean_itl_s if meta.mean_itl_s is not None else float("nan")
                tput = meta.throughput_tok_s if meta.throughput_tok_s is not None else float("nan")
                configs[b] = _Config(
                    meta=meta,
                    doubled_w=trace.doubled_w,
                    length=trace.doubled_w.size // 2,
                    mean_w=trace.mean_w,
                    concurrency=tput * mean_itl_s,
                    spectra=trace.spectra,
                )
            models.append(
                _Model(
                    name=ms.model,
                    gpus=ms.gpus_per_replica,
                    configured=ms.replicas,
                    batch_sizes=allowed,
                    initial_batch=ms.batch_size,
                    deadline_s=ms.itl_deadline_s,
                    slots=slots,
                    phase=phase,
                    configs=configs,
                    per_server=_per_server(ms.gpus_per_replica) if spec.whole_servers else 0.0,
                )
            )
        training = TrainingJob(spec.training) if spec.training is not None else None
        return cls(spec, library, models, training, share, capacity)

    # ------------------------------------------------------------------ protocol

    def info(self) -> SiteInfo:
        """Static facts: per-model measured means per allowed batch size."""
        infos = {}
        for m in self._models.values():
            cfgs = [m.configs[b] for b in m.batch_sizes]
            infos[m.name] = ModelInfo(
                model=m.name,
                gpus_per_replica=m.gpus,
                replicas=m.configured,
                batch_sizes=m.batch_sizes,
                power_w=tuple(c.meta.mean_power_w for c in cfgs),
                itl_s=tuple(c.meta.mean_itl_s if c.meta.mean_itl_s is not None else float("nan") for c in cfgs),
                throughput_tok_s=tuple(
                    c.meta.throughput_tok_s if c.meta.throughput_tok_s is not None else float("nan") for c in cfgs
                ),
                itl_deadline_s=m.deadline_s,
                initial_batch_size=m.initial_batch,
                curve_fits=self.library.curve_fits(m.name, m.gpus, m.batch_sizes),
                miss_fraction=tuple(
                    _tail(c.meta.itl, m.deadline_s) if c.meta.itl is not None and m.deadline_s is not None else 0.0
                    for c in cfgs
                ),
                power_cap_range_w=(CAP_MIN_W, CAP_MAX_W),
            )
        job = self._training
        training = (
            None
            if job is None
            else TrainingInfo(
                start_s=job.spec.start_s,
                end_s=job.spec.end_s,
                gpus=job.spec.gpus,
                mean_power_w=job.mean_w_per_gpu * job.spec.gpus,
                peak_power_w=float(job.per_gpu_w.max()) * job.spec.gpus,
            )
        )
        return SiteInfo(
            site=self.name,
            bus=self.spec.bus,
            models=infos,
            power_factor=self.spec.power_factor,
            pue=self.spec.pue,
            training=training,
            gpu_capacity=self.capacity_gpus,
        )

    def reset(self, seed: int) -> None:
        """Initial replicas, batch sizes and no caps; replica offsets and ITL draws from ``seed``."""
        seqs = np.random.SeedSequence(seed).spawn(len(self._models) + 1)
        # one uniform and one normal stream per model, so a block's draws are the concatenation of
        # its steps' draws whatever the block's length
        itl_seqs = seqs[-1].spawn(2 * len(self._models))
        for i, (m, ss) in enumerate(zip(self._models.values(), seqs)):
            m.uniform_rng = np.random.default_rng(itl_seqs[2 * i])
            m.normal_rng = np.random.default_rng(itl_seqs[2 * i + 1])
            m.raw_offsets = np.random.default_rng(ss).integers(0, 2**40, size=m.slots, dtype=np.int64)
            for c in m.configs.values():
                c.offsets = m.raw_offsets % c.length
            m.tables = {}
            m.batch = m.initial_batch
            m.weights = {m.batch: 1.0}
            m.weights_t_s = 0.0
            m.tau_s = FILL_TAU_S
            m.ramp = (float(m.configured), float(m.configured), 0.0, 0.0)
            m.cap_w_per_gpu = None
        self._online = True
        self.energy_j = 0.0

    def step(self, t_s: float, dt_s: float) -> DatacenterState:
        """Advance over ``(t_s - dt_s, t_s]``; power is the mean over the library samples it covers."""
        return self.step_block(np.array([t_s]), dt_s).state(0)

    def step_block(self, t_s: np.ndarray, dt_s: float) -> DatacenterSeries:
        """Advance over the steps ending at ``t_s``, all in one vectorized pass (no command between)."""
        t = np.asarray(t_s, dtype=np.float64)
        k = t.size
        dt_lib = self.library.dt_s
        n_sub = max(1, round(dt_s / dt_lib))
        # library sample indices each step covers, shape (K, n_sub)
        sample_idx = np.rint(t / dt_lib).astype(np.int64)[:, None] + np.arange(1 - n_sub, 1)
        t_first = float(t.min())
        counts = {m.name: m.counts_block(t, t_first) for m in self._models.values()}
        running = [(m, width) for m in self._models.values() if self._online and (width := m.width()) > 0]
        blends = _blends([m for m, _ in running], t, self._constants)
        it_phase_w = np.zeros((k, 3))
        power_w: dict[str, np.ndarray] = {}
        inputs: list[ServingInput] = []
        for (m, width), blend in zip(running, blends):
            replicas, n_on, n_on_min = counts[m.name]
            phase_w = self._phase_power(m, blend, t, t_first, sample_idx, replicas, n_on, width)
            it_phase_w += phase_w
            power_w[m.name] = phase_w.sum(axis=1)
            serving = [(w, m.serving(b)) for b, w in blend]
            has_deadline = m.deadline_s is not None
            inputs.append(
                ServingInput(
                    m.uniform_rng,
                    m.normal_rng,
                    width,
                    replicas,
                    n_on,
                    n_on_min,
                    serving,
                    has_deadline,
                    self.spec.itl_samples,
                )
            )
        figures = dict(zip(power_w, serve_block(inputs, k, self.spec.itl_statistics == "analytic")))
        models: dict[str, ModelSeries] = {}
        for m in self._models.values():
            replicas = counts[m.name][0]
            if m.name in figures:
                models[m.name] = self._series(m, replicas, power_w[m.name], *figures[m.name])
            else:  # offline, or no replica to run
                reported = replicas if self._online else np.zeros(k)
                models[m.name] = self._series(m, reported, np.zeros(k), np.full(k, np.nan), np.zeros(k), np.zeros(k))
        train_w = np.zeros(k)
        if self._training is not None and self._training.runs_within(t_first - dt_s, float(t.max()) + dt_s):
            train_w = self._training.power_w(sample_idx * dt_lib).mean(axis=1)
            it_phase_w += train_w[:, None] * self._training_share
        if self._online:
            p_w = self._facility_w(it_phase_w)
        else:
            p_w = np.zeros((k, 3))
            train_w = np.zeros(k)
        series = DatacenterSeries(
            site=self.name,
            t_s=t,
            p_w=_read_only(p_w),
            q_var=_read_only(p_w * self._q_per_p),
            models=models,
            training_power_w=_read_only(train_w),
            online=_constant(self._constants, k, self._online),
            supplied=_constant(self._constants, k, True),
        )
        if not self.supplied:
            # computed in full, then dropped: the random draws go on as if it ran, so the steps
            # after supply returns are those of a run that never lost it
            series = series.without_supply()
        for total_w in series.power_w.tolist():
            self.energy_j += total_w * dt_s
        return series

    def _facility_w(self, it_phase_w: np.ndarray) -> np.ndarray:
        """Facility power per phase (W) of the GPU power per phase ``it_phase_w`` (W): PUE and the
        base load (the module docstring's **Facility**)."""
        return self.spec.pue * it_phase_w + self._base_w

    def peak_estimate(self) -> SitePeak:
        """The site's facility power were every replica it starts with at the highest sample of its
        model's library trace over the batch sizes the site allows, and the training job at its
        peak: an estimate from the traces' per-batch peaks, an upper bound of what a run without
        replica or training changes draws (replicas are desynchronized, so they rarely peak
        together), before any power cap.
        """
        it_w = 0.0
        for m in self._models.values():
            # not always the largest batch's: a small batch's trace can hold the highest prefill spike
            peak_w = max(float(self.library.power(m.name, m.gpus, b).max()) for b in m.batch_sizes)
            it_w += float(m.powered(float(m.configured))) * peak_w
        info = self.info().training
        it_w += info.peak_power_w if info is not None else 0.0
        # the facility model is per phase and linear: any split of the GPU power over the phases
        # gives the same total
        facility_w = float(self._facility_w(np.full(3, it_w / 3.0)).sum())
        return SitePeak(
            serving_gpus=sum(m.configured * m.gpus for m in self._models.values()),
            training_gpus=info.gpus if info is not None else 0,
            peak_w=facility_w,
        )

    def _phase_power(
        self,
        m: _Model,
        blend: list[tuple[int, np.ndarray]],
        t: np.ndarray,
        t_first: float,
        sample_idx: np.ndarray,
        replicas: np.ndarray,
        n_on: np.ndarray,
        width: int,
    ) -> np.ndarray:
        """GPU power per step and phase of one running model (W); ``replicas`` and ``n_on`` as
        :meth:`_Model.counts_block` gives them, ``width`` as :meth:`_Model.width`."""
        # Once a ramp is over the replica count is fixed, and a phase's power is a periodic function
        # of the sample index: read it from a table. During a ramp, sum replica by replica.
        tables = sample_idx.shape[1] == 1 or m.cap_w_per_gpu is None  # a cap clips each replica's step mean
        if tables and t_first >= m.ramp[3]:
            return self._phase_power_steady(m, blend, sample_idx, None)
        steady = t >= m.ramp[3] if tables else np.zeros(t.size, dtype=bool)
        phase_w = np.zeros((t.size, 3))
        if steady.any():
            phase_w[steady] = self._phase_power_steady(m, blend, sample_idx, steady)
        ramping = ~steady
        w_ramp = [(b, w[ramping]) for b, w in blend]
        phase_w[ramping] = self._phase_power_direct(
            m, w_ramp, sample_idx[ramping], replicas[ramping], n_on[ramping], width
        )
        return phase_w

    def _phase_power_direct(
        self,
        m: _Model,
        blend: list[tuple[int, np.ndarray]],
        sample_idx: np.ndarray,
        replicas: np.ndarray,
        n_on: np.ndarray,
        width: int,
    ) -> np.ndarray:
        """GPU power per step and phase (W) for any replica counts (``n_on`` the replicas running at
        each step, as :meth:`_Model.counts_block` gives them): replica by replica, or by trace offset
        once the replicas outnumber the offsets :data:`_BY_OFFSET` times (a large site's ramp)."""
        kernels = _kernels()
        clip_w = math.nan if m.cap_w_per_gpu is None else m.gpus * m.cap_w_per_gpu
        if width > _BY_OFFSET * max(m.configs[b].length for b, _ in blend):
            phase_w = np.zeros((sample_idx.shape[0], 3))
            for b, w in blend:
                c = m.configs[b]
                kernels.add_offset_power(
                    phase_w, c.doubled_w, c.offsets, m.phase, sample_idx, c.length, w, clip_w, replicas, n_on
                )
            return phase_w
        power = np.zeros((sample_idx.shape[0], width))
        for b, w in blend:
            c = m.configs[b]
            kernels.add_replica_power(power, c.doubled_w, c.offsets, sample_idx, c.length, w, clip_w)
        phase_w = np.empty((sample_idx.shape[0], 3))
        kernels.replica_phase_sums(power, replicas, n_on, m.phase, phase_w)
        return phase_w

    def _phase_power_steady(
        self, m: _Model, blend: list[tuple[int, np.ndarray]], sample_idx: np.ndarray, rows: np.ndarray | None
    ) -> np.ndarray:
        """GPU power per step and phase (W) at the ramp's final count, from per-phase tables, at
        the steps ``rows`` selects (``None``: all)."""
        n_sub = sample_idx.shape[1]
        idx = sample_idx if rows is None else sample_idx[rows]
        replicas = min(float(m.powered(m.ramp[1])), float(m.slots))
        n_on = min(math.ceil(replicas - 1e-9), m.slots)
        frac = replicas - (n_on - 1)
        n_full = n_on - 1 if frac < 1.0 else n_on
        phase_w = np.zeros((idx.shape[0], 3))
        if n_sub == 1 and n_full == n_on:
            # one sample of whole replicas: the loop below reduces to 0 + (w / 1) * (0 + T[k]); the
            # zeros it adds could only turn a -0.0 into 0.0, which the sum into phase_w does
            add_table_rows = _kernels().add_table_rows
            for b, w in blend:
                add_table_rows(
                    phase_w, m.phase_table(b, n_full), idx, m.configs[b].length, w if rows is None else w[rows]
                )
            return phase_w
        for b, w in blend:
            c = m.configs[b]
            table = m.phase_table(b, n_full)
            w_rows = w if rows is None else w[rows]
            acc = np.zeros((idx.shape[0], 3))
            for j in range(n_sub):
                acc += table[idx[:, j] % c.length]
            if n_full < n_on:  # the fractional last replica
                x = c.doubled_w[c.offsets[n_full] + idx % c.length]
                if m.cap_w_per_gpu is not None:
                    x = np.minimum(x, m.gpus * m.cap_w_per_gpu)
                acc[:, m.phase[n_full]] += frac * x.sum(axis=1)
            phase_w += (w_rows[:, None] / n_sub) * acc
        return phase_w

    @staticmethod
    def _series(
        m: _Model, replicas: np.ndarray, power_w: np.ndarray, itl_s: np.ndarray, tput: np.ndarray, miss: np.ndarray
    ) -> ModelSeries:
        k = replicas.size
        return ModelSeries(
            model=m.name,
            replicas=_read_only(replicas),
            batch_size=_constant(m.constants, k, m.batch),
            power_w=_read_only(power_w),
            itl_s=_read_only(itl_s),
            throughput_tok_s=_read_only(tput),
            deadline_miss_fraction=_read_only(miss),
            power_cap_w=_constant(m.constants, k, m.cap_w_per_gpu),
            itl_deadline_s=m.deadline_s,
        )

    # ------------------------------------------------------------------ commands

    def apply(self, command: Command, t_s: float) -> None:
        """Carry out a datacenter command at ``t_s`` (see the module docstring for each effect);
        one handler per command type (:data:`_HANDLERS`, a subclass taking its base's).

        :raises CommandError: a command a site does not handle, wrong site, unknown model,
            unmeasured batch size, cap out of range, negative counts, or a replica target beyond
            the site's GPU capacity.
        """
        # a dict lookup: singledispatchmethod built a bound dispatcher at every call (a batch
        # command per model and env step)
        handler = _HANDLERS.get(type(command))
        if handler is None:
            handler = next((_HANDLERS[c] for c in type(command).__mro__ if c in _HANDLERS), None)
            if handler is None:
                raise CommandError(f"site {self.name!r} cannot carry out {type(command).__name__}")
        handler(self, command, t_s)

    def _check_site(self, command: DatacenterCommand) -> None:
        if command.site != self.name:
            raise CommandError(f"{type(command).__name__} for site {command.site!r} delivered to site {self.name!r}")

    def _set_batch_size(self, command: SetBatchSize, t_s: float) -> None:
        self._check_site(command)
        m = self._model(command.model)
        if command.batch_size not in m.batch_sizes:
            raise CommandError(
                f"site {self.name!r}: batch size {command.batch_size} not available for {m.name}; "
                f"valid: {list(m.batch_sizes)}"
            )
        if command.batch_size != m.batch:
            weights = m.weights_at(t_s)
            tau = FILL_TAU_S if command.batch_size > m.batch else self._drain_tau_s(m.configs[m.batch])
            m.weights, m.weights_t_s, m.tau_s = weights, t_s, tau
            m.batch = command.batch_size

    def _set_power_cap(self, command: SetPowerCap, t_s: float) -> None:
        self._check_site(command)
        cap = command.cap_w_per_gpu
        if cap is not None and not CAP_MIN_W <= cap <= CAP_MAX_W:
            raise CommandError(
                f"site {self.name!r}: power cap {cap} W per GPU outside the H100 range {CAP_MIN_W:.0f}-{CAP_MAX_W:.0f} W"
            )
        targets = [self._model(command.model)] if command.model is not None else list(self._models.values())
        for m in targets:
            m.cap_w_per_gpu = cap

    def _set_replicas(self, command: SetReplicas, t_s: float) -> None:
        self._check_site(command)
        m = self._model(command.model)
        self._check_ramp(command.ramp_s)
        if command.replicas < 0:
            raise CommandError(f"site {self.name!r}: replicas must be >= 0, got {command.replicas}")
        self._check_capacity({m.name: float(command.replicas)}, t_s)
        m.set_target(t_s, command.replicas, command.ramp_s)

    def _set_inference_scale(self, command: SetInferenceScale, t_s: float) -> None:
        self._check_site(command)
        self._check_ramp(command.ramp_s)
        if not command.fraction >= 0:
            raise CommandError(f"site {self.name!r}: inference scale must be >= 0, got {command.fraction}")
        scaled = {m.name: float(scaled_replicas(command.fraction, m.configured)) for m in self._models.values()}
        self._check_capacity(scaled, t_s)
        for m in self._models.values():
            m.set_target(t_s, scaled[m.name], command.ramp_s)

    def _set_site_online(self, command: SetSiteOnline, t_s: float) -> None:
        self._check_site(command)
        self._online = bool(command.online)

    def _shift_replicas(self, command: ShiftReplicas, t_s: float) -> None:
        if command.site == command.to_site:
            raise CommandError(f"shift_replicas: source and destination are both {command.site!r}")
        if command.replicas < 0:
            raise CommandError(f"shift_replicas: replicas must be >= 0, got {command.replicas}")
        self._check_ramp(command.ramp_s)
        if command.site == self.name:
            m = self._model(command.model)
            if m.target() < command.replicas:
                raise CommandError(
                    f"site {self.name!r}: cannot shift {command.replicas} replicas of {m.name}, "
                    f"only {m.target():g} are (or are ramping to be) active"
                )
            m.set_target(t_s, m.target() - command.replicas, command.ramp_s)
        elif command.to_site == self.name:
            if command.model not in self._models:
                raise CommandError(
                    f"site {self.name!r} does not serve {command.model!r} and cannot receive its replicas; "
                    f"it serves {sorted(self._models)}"
                )
            m = self._models[command.model]
            self._check_capacity({m.name: m.target() + command.replicas}, t_s)
            m.set_target(t_s, m.target() + command.replicas, command.ramp_s)
        else:
            raise CommandError(
                f"shift_replicas from {command.site!r} to {command.to_site!r} delivered to site {self.name!r}"
            )

    def _model(self, name: str | None) -> _Model:
        if name not in self._models:
            raise CommandError(f"site {self.name!r} does not serve model {name!r}; it serves {sorted(self._models)}")
        return self._models[name]

    def _check_ramp(self, ramp_s: float) -> None:
        if not 0 <= ramp_s <= MAX_DURATION_S:
            raise CommandError(
                f"site {self.name!r}: ramp_s must be >= 0 s and at most a year ({MAX_DURATION_S} s), got {ramp_s}"
            )

    def _check_capacity(self, targets: dict[str, float], t_s: float) -> None:
        """GPUs of every model at max(present, target) plus training must fit the capacity."""
        training = self._training.spec.gpus if self._training is not None else 0
        need, parts = training, []
        for m in self._models.values():
            count = max(m.active(t_s), targets.get(m.name, m.target()), 0.0 if m.name in targets else m.target())
            if not math.isfinite(count):
                raise CommandError(f"site {self.name!r}: {m.name}: {count} replicas is not a finite count")
            gpus = math.ceil(count - 1e-9) * m.gpus
            need += gpus
            parts.append(f"{m.name}: {gpus}")
        if training:
            parts.append(f"training: {training}")
        if need > self.capacity_gpus:
            raise CommandError(
                f"site {self.name!r}: {need} GPUs needed ({', '.join(parts)}) exceed its capacity of {self.capacity_gpus}"
            )

    def _drain_tau_s(self, c: _Config) -> float:
        meta = c.meta
        if meta.avg_output_len_tokens is None or meta.mean_itl_s is None:
            return FILL_TAU_S
        return max(FILL_TAU_S, meta.avg_output_len_tokens * meta.mean_itl_s / 2)


_HANDLERS: dict[type[Command], Callable[[ReplayDatacenter, Any, float], None]] = {
    SetBatchSize: ReplayDatacenter._set_batch_size,
    SetPowerCap: ReplayDatacenter._set_power_cap,
    SetReplicas: ReplayDatacenter._set_replicas,
    SetInferenceScale: ReplayDatacenter._set_inference_scale,
    SetSiteOnline: ReplayDatacenter._set_site_online,
    ShiftReplicas: ReplayDatacenter._shift_replicas,
}
"""The handler of each command type :meth:`ReplayDatacenter.apply` carries out."""

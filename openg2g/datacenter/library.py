"""The trace library: measured per-replica GPU power timelines plus per-configuration metadata.

On disk a library is a folder with two files (format ``openg2g-traces/2``):

- ``index.json``: :class:`LibraryIndex`, the sample period, one :class:`TraceConfig` per
  (model, GPUs per replica, batch size) with its mean power, inter-token-latency (ITL) mixture,
  throughput and provenance, and the controllers' curves (:class:`StoredFits`) of each
  (model, GPUs) on some batch-size grids. Format ``openg2g-traces/1`` is the same without fits
  and still loads (controllers then fit at run time);
- ``power.npz``: one compressed float32 array per configuration (key
  :func:`power_key`), the summed board power of the replica's GPUs (W) every ``dt_s`` seconds.

The bundled library (``traces/`` at the repository top level) is built by
``openg2g traces build`` (:mod:`openg2g.datacenter.build`); ``traces/PROVENANCE.md`` records
its sources and transformation.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Final, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from scipy.special import ndtr

from openg2g.core.errors import TraceError
from openg2g.core.interfaces import CurveFits, LogisticParams, StoredCurve
from openg2g.core.paths import bundled_dir

__all__ = [
    "FORMAT",
    "INDEX_FILE",
    "POWER_FILE",
    "ItlMixture",
    "LibraryIndex",
    "StoredCurveModel",
    "StoredFits",
    "TimeWeightedSampler",
    "TraceConfig",
    "TraceLibrary",
    "power_key",
    "time_weighted_sampler",
]

FORMAT: Final = "openg2g-traces/2"
INDEX_FILE = "index.json"
POWER_FILE = "power.npz"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ItlMixture(_Frozen):
    """Two-component shifted lognormal mixture of per-token inter-token latency (ITL).

    A sample is ``loc_s + scale_s[k] * exp(sigma[k] * z)`` with ``z ~ N(0, 1)`` and component
    ``k`` drawn with probability ``weight[k]``; component 0 is the steady decode mode, 1 the
    stall tail. Fitted per (model, batch) by the ML.ENERGY Benchmark (``latency_fits.csv``).
    """

    loc_s: float = Field(ge=0, description="Shift (s).")
    weight: tuple[float, float] = Field(description="Component weights (steady, stall), sum 1.")
    sigma: tuple[float, float] = Field(description="Log standard deviations (steady, stall).")
    scale_s: tuple[float, float] = Field(description="Lognormal scales exp(mu) (steady, stall) (s).")

    @model_validator(mode="after")
    def _check(self) -> ItlMixture:
        if abs(sum(self.weight) - 1.0) > 1e-6 or min(self.weight) < 0:
            raise ValueError(f"weights must be >= 0 and sum to 1, got {self.weight}")
        if min(self.sigma) <= 0 or min(self.scale_s) <= 0:
            raise ValueError(f"sigma and scale_s must be > 0, got {self.sigma}, {self.scale_s}")
        return self

    def cdf(self, itl_s: np.ndarray | float) -> np.ndarray:
        """P(ITL <= itl_s) for one token."""
        x = np.asarray(itl_s, dtype=np.float64) - self.loc_s
        out = np.zeros_like(x)
        pos = x > 0
        logx = np.log(x[pos])
        for w, s, c in zip(self.weight, self.sigma, self.scale_s):
            out[pos] += w * ndtr((logx - math.log(c)) / s)
        return out

    def mean_s(self) -> float:
        """Mean ITL per token (s)."""
        return self.loc_s + sum(w * c * math.exp(s * s / 2) for w, s, c in zip(self.weight, self.sigma, self.scale_s))

    def quantile_s(self, q: float) -> float:
        """The ``q``-quantile of the per-token ITL (s), by bisection on :meth:`cdf`."""
        lo, hi = self.loc_s, self.loc_s + max(self.scale_s) * math.exp(8 * max(self.sigma))
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if self.cdf(mid) < q:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)

    def sample_s(self, u: np.ndarray, z: np.ndarray) -> np.ndarray:
        """ITL samples (s) from uniforms ``u`` (component choice) and standard normals ``z``."""
        stall = u < self.weight[1]
        scale = np.where(stall, self.scale_s[1], self.scale_s[0])
        sigma = np.where(stall, self.sigma[1], self.sigma[0])
        return self.loc_s + scale * np.exp(sigma * z)

    def time_weighted_sample_s(self, u: np.ndarray, z: np.ndarray) -> np.ndarray:
        """ITL samples (s) of the length-biased mixture ``g(x) = x f(x) / E[ITL]``.

        ``g`` is what a sequence experiences over a random window of time (long gaps cover more
        time): weighting these samples by tokens (``1 / x``) gives back the per-token mixture ``f``,
        so a token-weighted mean of them estimates :meth:`mean_s`. ``g`` is again a lognormal
        mixture: per component, ``loc * f_k`` and ``y f_k(y)``, the latter lognormal with
        ``mu + sigma**2`` (size-biasing shifts a lognormal's log-mean by its log-variance).

        :param u: uniforms in [0, 1) choosing the sub-component.
        :param z: standard normals.
        """
        return time_weighted_sampler(self).sample_s(u, z)


class TimeWeightedSampler:
    """The four lognormal parts of a mixture's length-biased form, prepared once for many draws.

    :param mix: the per-token mixture (see :meth:`ItlMixture.time_weighted_sample_s`).
    """

    def __init__(self, mix: ItlMixture) -> None:
        weights, log_scales, sigmas = [], [], []
        for w, s, c in zip(mix.weight, mix.sigma, mix.scale_s):
            weights += [w * mix.loc_s, w * c * math.exp(s * s / 2)]
            log_scales += [math.log(c), math.log(c) + s * s]
            sigmas += [s, s]
        cum = np.cumsum(weights) / sum(weights)
        self.loc_s = mix.loc_s
        self.thresholds = cum[:3]
        self.log_scales = np.array(log_scales)
        self.sigmas = np.array(sigmas)

    def sample_s(self, u: np.ndarray, z: np.ndarray) -> np.ndarray:
        """ITL samples (s) from uniforms ``u`` (the part) and standard normals ``z`` (same shape)."""
        # the part whose cumulative weight u passes: the count of thresholds <= u (they ascend)
        part = np.searchsorted(self.thresholds, u, side="right")
        out = self.sigmas.take(part)
        out *= z
        out += self.log_scales.take(part)
        np.exp(out, out=out)
        out += self.loc_s
        return out


@functools.lru_cache(maxsize=1024)
def time_weighted_sampler(mix: ItlMixture) -> TimeWeightedSampler:
    """The (cached) :class:`TimeWeightedSampler` of ``mix``."""
    return TimeWeightedSampler(mix)


class TraceConfig(_Frozen):
    """Metadata of one (model, GPUs per replica, batch size) power trace.

    Latency fields are ``None`` for traces imported without latency measurements.
    """

    model: str
    gpus: int = Field(gt=0, description="GPUs per replica (tensor/expert parallel degree).")
    batch: int = Field(gt=0, description="Batch size: vLLM max_num_seqs.")
    samples: int = Field(gt=1, description="Number of power samples.")
    duration_s: float = Field(gt=0, description="Trace duration (s).")
    mean_power_w: float = Field(gt=0, description="Mean summed GPU power of one replica over the trace (W).")
    source: str = Field(description="Source file(s) the trace was derived from (comma-separated).")
    source_sha256: str | None = Field(
        default=None, description="SHA-256 of the source files' bytes, concatenated in the order of source."
    )
    itl: ItlMixture | None = Field(default=None, description="Per-token ITL mixture (s).")
    mean_itl_s: float | None = Field(default=None, description="Mean per-token ITL of the mixture (s).")
    median_itl_s: float | None = Field(default=None, description="Median per-token ITL of the mixture (s).")
    p99_itl_s: float | None = Field(default=None, description="99th-percentile per-token ITL of the mixture (s).")
    throughput_tok_s: float | None = Field(default=None, description="Output tokens per second of one replica.")
    throughput_source: Literal["leaderboard", "itl_fit", "none"] = Field(
        default="none",
        description="leaderboard: measured H100 entry; itl_fit: k * batch / mean ITL (no leaderboard entry; see build).",
    )
    running_seqs: float | None = Field(
        None, description="Mean running sequences (leaderboard avg_batch_size, else batch)."
    )
    avg_output_len_tokens: float | None = Field(default=None, description="Mean output length per request (tokens).")
    leaderboard_avg_power_w: float | None = Field(default=None, description="Leaderboard H100 avg_power_watts (W).")
    leaderboard_median_itl_s: float | None = Field(default=None, description="Leaderboard median ITL (s).")
    leaderboard_p99_itl_s: float | None = Field(default=None, description="Leaderboard p99 ITL (s).")

    @property
    def key(self) -> str:
        """The configuration's array name in ``power.npz``."""
        return power_key(self.model, self.gpus, self.batch)


class StoredCurveModel(_Frozen):
    """One stored curve (:class:`~openg2g.core.interfaces.StoredCurve`): exactly one of ``logistic``
    (``[l_span, x0, k, b0]``) and ``pchip`` (four rows of per-interval cubic coefficients)."""

    logistic: LogisticParams | None = None
    pchip: tuple[tuple[float, ...], ...] | None = None

    @model_validator(mode="after")
    def _check(self) -> StoredCurveModel:
        if (self.logistic is None) == (self.pchip is None):
            raise ValueError("give exactly one of logistic and pchip")
        values = list(self.logistic or ()) + [v for row in self.pchip or () for v in row]
        if not all(math.isfinite(v) for v in values):
            raise ValueError("curve parameters must be finite")
        return self


class StoredFits(_Frozen):
    """The curves (:mod:`openg2g.datacenter.fits`) of one (model, GPUs) on one batch-size grid,
    fitted to the library's ``mean_power_w``, ``mean_itl_s`` and ``throughput_tok_s`` at
    ``batch_sizes``."""

    model: str
    gpus: int = Field(gt=0, description="GPUs per replica.")
    batch_sizes: tuple[int, ...] = Field(min_length=2, description="Batch sizes fitted, ascending, all measured.")
    power_w: StoredCurveModel = Field(description="Mean power per replica (W).")
    itl_s: StoredCurveModel = Field(description="Mean inter-token latency (s).")
    throughput_tok_s: StoredCurveModel = Field(description="Output throughput per replica (tok/s).")

    @model_validator(mode="after")
    def _check(self) -> StoredFits:
        if any(b <= a for a, b in zip(self.batch_sizes, self.batch_sizes[1:])):
            raise ValueError(f"batch_sizes must be strictly ascending, got {list(self.batch_sizes)}")
        intervals = len(self.batch_sizes) - 1
        for name in ("power_w", "itl_s", "throughput_tok_s"):
            pchip = getattr(self, name).pchip
            if pchip is not None and (len(pchip) != 4 or any(len(row) != intervals for row in pchip)):
                raise ValueError(f"{name}: pchip needs 4 rows of {intervals} coefficients (one per interval)")
        return self

    @classmethod
    def of(cls, model: str, gpus: int, fits: CurveFits) -> StoredFits:
        """The stored form of ``fits``."""
        curves = {
            name: StoredCurveModel(logistic=c.logistic, pchip=c.pchip)
            for name, c in (
                ("power_w", fits.power_w),
                ("itl_s", fits.itl_s),
                ("throughput_tok_s", fits.throughput_tok_s),
            )
        }
        return cls(model=model, gpus=gpus, batch_sizes=fits.batch_sizes, **curves)

    def curve_fits(self) -> CurveFits:
        """The curves as a controller receives them in ``ModelInfo.curve_fits``."""
        return CurveFits(
            self.batch_sizes,
            *(
                StoredCurve(logistic=c.logistic, pchip=c.pchip)
                for c in (self.power_w, self.itl_s, self.throughput_tok_s)
            ),
        )


class LibraryIndex(_Frozen):
    """Contents of ``index.json``."""

    format: Literal["openg2g-traces/1", "openg2g-traces/2"] = FORMAT
    dt_s: float = Field(gt=0, description="Sample period of every trace (s).")
    description: str = ""
    configs: list[TraceConfig]
    curve_fits: list[StoredFits] = Field(
        default=[], description="Curve fits per (model, GPUs) and batch-size grid (format 2 only)."
    )

    @model_validator(mode="after")
    def _unique(self) -> LibraryIndex:
        keys = [c.key for c in self.configs]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"configuration listed twice: {dup}")
        if self.curve_fits and self.format == "openg2g-traces/1":
            raise ValueError("curve_fits need format openg2g-traces/2")
        measured: dict[tuple[str, int], set[int]] = {}
        for c in self.configs:
            measured.setdefault((c.model, c.gpus), set()).add(c.batch)
        seen = set()
        for i, f in enumerate(self.curve_fits):
            grid = (f.model, f.gpus, f.batch_sizes)
            if grid in seen:
                raise ValueError(f"curve_fits.{i}: {f.model} on {f.gpus} GPUs at {list(f.batch_sizes)} listed twice")
            seen.add(grid)
            missing = sorted(set(f.batch_sizes) - measured.get((f.model, f.gpus), set()))
            if missing:
                raise ValueError(f"curve_fits.{i}: {f.model} on {f.gpus} GPUs has no configuration at batch {missing}")
        return self


@functools.lru_cache(maxsize=8)
def _read_library(folder: Path, stamps: tuple[tuple[int, int], ...]) -> TraceLibrary:
    """Read and check a library folder; ``stamps`` (size and mtime of its files) only key the cache."""
    index_file, power_file = folder / INDEX_FILE, folder / POWER_FILE
    try:
        index = LibraryIndex.model_validate(json.loads(index_file.read_text()))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise TraceError(f"{index_file}: malformed trace index: {exc}") from None
    power: dict[str, np.ndarray] = {}
    try:
        with np.load(power_file) as npz:
            for c in index.configs:
                if c.key not in npz.files:
                    raise TraceError(f"{power_file}: no array {c.key!r} listed in {index_file.name}")
                arr = np.asarray(npz[c.key], dtype=np.float64)
                if arr.ndim != 1 or arr.size != c.samples or not np.all(np.isfinite(arr)):
                    raise TraceError(
                        f"{power_file}: array {c.key!r} has shape {arr.shape}, expected ({c.samples},) finite values"
                    )
                arr.flags.writeable = False
                power[c.key] = arr
    except (OSError, ValueError) as exc:
        raise TraceError(f"{power_file}: unreadable trace arrays: {exc}") from None
    return TraceLibrary(index, power, folder)


def power_key(model: str, gpus: int, batch: int) -> str:
    """Array name of a configuration in ``power.npz``."""
    return f"{model}__g{gpus}__b{batch}"


class TraceLibrary:
    """Read-only access to a trace library folder. Build one with :meth:`load`.

    :param index: parsed ``index.json``.
    :param power_w: configuration key -> read-only float64 array of replica power (W).
    :param path: folder it was read from.
    """

    def __init__(self, index: LibraryIndex, power_w: dict[str, np.ndarray], path: Path):
        self.index = index
        self.path = path
        self.dt_s: float = index.dt_s
        self._configs = {(c.model, c.gpus, c.batch): c for c in index.configs}
        self._power_w = power_w
        self._fits = {(f.model, f.gpus, f.batch_sizes): f for f in index.curve_fits}

    @classmethod
    def load(cls, path: Path | None = None) -> TraceLibrary:
        """Read a library folder; ``None`` reads the bundled one.

        A library is read once per process while its two files keep their size and modification
        time (30 ms saved per later load: a run loads it to validate and again to build): the
        object is immutable, so every caller shares it.

        :raises TraceError: missing files, malformed index, or arrays inconsistent with it.
        """
        try:
            folder = Path(path) if path is not None else bundled_dir("traces")
        except FileNotFoundError as exc:
            raise TraceError(f"no bundled trace library: {exc}") from None
        stamps = []
        for f in (folder / INDEX_FILE, folder / POWER_FILE):
            if not f.is_file():
                raise TraceError(f"{f}: trace library file not found")
            stat = f.stat()
            stamps.append((stat.st_size, stat.st_mtime_ns))
        return _read_library(folder, tuple(stamps))

    def models(self) -> list[str]:
        """Model names, sorted."""
        return sorted({m for m, _, _ in self._configs})

    def gpus(self, model: str) -> tuple[int, ...]:
        """Measured GPUs-per-replica counts of ``model``, ascending (empty if unknown)."""
        return tuple(sorted({g for m, g, _ in self._configs if m == model}))

    def batch_sizes(self, model: str, gpus: int) -> tuple[int, ...]:
        """Measured batch sizes of ``model`` on ``gpus`` GPUs per replica, ascending."""
        return tuple(sorted(b for m, g, b in self._configs if m == model and g == gpus))

    def configs(self) -> list[TraceConfig]:
        """All configurations, sorted by model, GPUs and batch size."""
        return [self._configs[k] for k in sorted(self._configs)]

    def config(self, model: str, gpus: int, batch: int) -> TraceConfig:
        """Metadata of one configuration.

        :raises TraceError: not in the library (the message lists what is).
        """
        try:
            return self._configs[(model, gpus, batch)]
        except KeyError:
            raise TraceError(self._missing(model, gpus, batch)) from None

    def curve_fits(self, model: str, gpus: int, batch_sizes: tuple[int, ...]) -> CurveFits | None:
        """The stored curve fits of ``model`` on ``gpus`` GPUs at exactly ``batch_sizes`` (ascending),
        ``None`` when the library has none for that grid."""
        stored = self._fits.get((model, gpus, tuple(batch_sizes)))
        return stored.curve_fits() if stored is not None else None

    def power(self, model: str, gpus: int, batch: int) -> np.ndarray:
        """Read-only replica power (W, summed over its GPUs), one sample every :attr:`dt_s` s."""
        return self._power_w[self.config(model, gpus, batch).key]

    def _missing(self, model: str, gpus: int, batch: int) -> str:
        if model not in self.models():
            return f"unknown model {model!r}; the library at {self.path} has {self.models()}"
        if gpus not in self.gpus(model):
            return f"{model} was not measured on {gpus} GPUs per replica; measured: {list(self.gpus(model))}"
        return (
            f"{model} on {gpus} GPUs was not measured at batch size {batch}; "
            f"measured: {list(self.batch_sizes(model, gpus))}"
        )

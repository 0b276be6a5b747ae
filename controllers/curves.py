"""Smooth per-replica curves of power, latency and throughput against ``x = log2(batch size)``.

Model-based controllers (OFO, MPC) need values and slopes between the measured batch sizes. Each
curve is a four-parameter logistic fitted to the measured means in :class:`ModelInfo`
(:mod:`openg2g.datacenter.fits`)::

    y(x) = b0 + L / (1 + exp(-k (x - x0)))        dy/dx = L k s (1 - s),  s = 1 / (1 + exp(-k (x - x0)))

When a logistic fit fails or is worse than the data allow (fewer than four points, a
non-converged least-squares solve, or an error above ``max_relative_error``), the curve falls back
to a shape-preserving monotone cubic (PCHIP) through the measured points, so a controller always
gets a curve that passes near the data. The trace library stores these curves for its measured
batch sizes and the bundled scenarios' grid (``ModelInfo.curve_fits``), so that a run needs
neither the fits nor scipy; a model on another batch-size grid, or with imported traces, is fitted
here when the controller resets.

This module also holds the batch-size grid helpers every batch controller shares: projection of a
continuous ``log2`` batch onto the measured sizes, and one-step moves along them.
"""

from __future__ import annotations

import bisect
import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ModelInfo, StoredCurve
from openg2g.datacenter.fits import MAX_RELATIVE_ERROR, fit, log2_batches, pchip_coefficients

__all__ = [
    "Curve",
    "LogisticCurve",
    "ModelCurves",
    "PchipCurve",
    "SecantCurve",
    "fit_curve",
    "log2_bounds",
    "project_batch",
    "step_batch",
]


class Curve(ABC):
    """A smooth scalar function of ``x = log2(batch size)`` with its first two derivatives."""

    @abstractmethod
    def value(self, x: float | np.ndarray) -> np.ndarray | float:
        """Curve value at ``x``."""

    @abstractmethod
    def slope(self, x: float | np.ndarray) -> np.ndarray | float:
        """Derivative ``dy/dx`` at ``x``."""

    @abstractmethod
    def curvature(self, x: float | np.ndarray) -> np.ndarray | float:
        """Second derivative ``d2y/dx2`` at ``x``."""


@dataclass(frozen=True)
class LogisticCurve(Curve):
    """``y = b0 + L / (1 + exp(-k (x - x0)))``.

    :param l_span: amplitude ``L`` (units of ``y``).
    :param x0: midpoint (log2 batch).
    :param k: steepness (1 / log2 batch).
    :param b0: offset (units of ``y``).
    """

    l_span: float
    x0: float
    k: float
    b0: float

    def _sigmoid(self, x: float | np.ndarray) -> np.ndarray:
        if isinstance(x, float):
            # a controller's step evaluates one x at a time: the same operations on Python floats
            # (np.clip and array conversions cost more than the arithmetic), the same np.exp
            z_one = min(max(-self.k * (x - self.x0), -60.0), 60.0)
            return 1.0 / (1.0 + np.exp(z_one))
        z = np.clip(-self.k * (np.asarray(x, dtype=float) - self.x0), -60.0, 60.0)
        return 1.0 / (1.0 + np.exp(z))

    def value(self, x: float | np.ndarray) -> np.ndarray | float:
        out = self.b0 + self.l_span * self._sigmoid(x)
        return float(out) if np.ndim(out) == 0 else out

    def slope(self, x: float | np.ndarray) -> np.ndarray | float:
        s = self._sigmoid(x)
        out = self.l_span * self.k * s * (1.0 - s)
        return float(out) if np.ndim(out) == 0 else out

    def curvature(self, x: float | np.ndarray) -> np.ndarray | float:
        s = self._sigmoid(x)
        out = self.l_span * self.k * self.k * s * (1.0 - s) * (1.0 - 2.0 * s)
        return float(out) if np.ndim(out) == 0 else out


@dataclass(frozen=True)
class PchipCurve(Curve):
    """Monotone piecewise cubic (PCHIP) through measured points, continued beyond the ends by the
    end intervals' cubics.

    :param x: the points' abscissae (log2 batch), ascending.
    :param y: the points' values.
    :param coefficients: :attr:`StoredCurve.pchip` rows: row ``j`` holds, per interval ``i``, the
        coefficient of ``(x - x_i) ** (3 - j)`` (scipy's ``PchipInterpolator(x, y).c``, which
        :meth:`through` computes; a library stores them so that runs need not import scipy).
    """

    x: tuple[float, ...]
    y: tuple[float, ...]
    coefficients: tuple[tuple[float, ...], ...]

    @classmethod
    def through(cls, x: np.ndarray, y: np.ndarray) -> PchipCurve:
        """The PCHIP cubic through ``(x, y)`` (at least two points)."""
        return cls(tuple(x.tolist()), tuple(y.tolist()), pchip_coefficients(x, y))

    @cached_property
    def _value_rows(self) -> np.ndarray:
        return np.asarray(self.coefficients, dtype=float)

    @cached_property
    def _slope_rows(self) -> np.ndarray:
        return self._value_rows[:-1] * np.array([3.0, 2.0, 1.0])[:, None]

    @cached_property
    def _curvature_rows(self) -> np.ndarray:
        return self._slope_rows[:-1] * np.array([2.0, 1.0])[:, None]

    def _evaluate(self, rows: np.ndarray, x: float | np.ndarray) -> np.ndarray | float:
        # the polynomial of x's interval in powers of (x - x_i), summed from the constant term up:
        # scipy's PPoly evaluates in this order, so the floats equal its own bit for bit
        if isinstance(x, float):
            return self._evaluate_at(rows, x)
        breaks = np.asarray(self.x)
        xq = np.asarray(x, dtype=float)
        i = np.clip(np.searchsorted(breaks, xq, side="right") - 1, 0, breaks.size - 2)
        s = xq - breaks[i]
        out = np.zeros_like(s)
        power = np.ones_like(s)
        for j in range(rows.shape[0] - 1, -1, -1):
            out = out + rows[j, i] * power
            if j > 0:
                power = power * s
        return float(out) if np.ndim(out) == 0 else out

    def _evaluate_at(self, rows: np.ndarray, x: float) -> float:
        """:meth:`_evaluate` at one point, in the same float operations on Python floats."""
        i = min(max(bisect.bisect_right(self.x, x) - 1, 0), len(self.x) - 2)
        s = x - self.x[i]
        out, power = 0.0, 1.0
        for j in range(rows.shape[0] - 1, -1, -1):
            out = out + float(rows[j, i]) * power
            if j > 0:
                power = power * s
        return out

    def value(self, x: float | np.ndarray) -> np.ndarray | float:
        return self._evaluate(self._value_rows, x)

    def slope(self, x: float | np.ndarray) -> np.ndarray | float:
        return self._evaluate(self._slope_rows, x)

    def curvature(self, x: float | np.ndarray) -> np.ndarray | float:
        return self._evaluate(self._curvature_rows, x)


@dataclass(frozen=True)
class SecantCurve(Curve):
    """The broken line through measured points, continued beyond the ends by the end segments.

    For a quantity whose means a smooth fit would bend away from where it matters: the fraction of
    tokens over a deadline is ~0 up to some batch size and then rises steeply, so a PCHIP through it
    leans on the neighbouring flat points (its end slope can be ~0 where the fraction rises fastest).
    The slope of a segment is its secant; a point that ends a segment takes the segment above it
    (the last point, the last segment).

    :param x: the points' abscissae (log2 batch), ascending.
    :param y: the points' values.
    """

    x: tuple[float, ...]
    y: tuple[float, ...]

    def _segment(self, x: float) -> int:
        return min(max(bisect.bisect_right(self.x, x) - 1, 0), len(self.x) - 2)

    def _secant(self, i: int) -> float:
        return (self.y[i + 1] - self.y[i]) / (self.x[i + 1] - self.x[i])

    def value(self, x: float | np.ndarray) -> np.ndarray | float:
        if np.ndim(x) == 0:
            i = self._segment(float(x))
            return self.y[i] + self._secant(i) * (float(x) - self.x[i])
        return np.array([self.value(float(v)) for v in np.asarray(x, dtype=float)])

    def slope(self, x: float | np.ndarray) -> np.ndarray | float:
        if np.ndim(x) == 0:
            return self._secant(self._segment(float(x)))
        return np.array([self.slope(float(v)) for v in np.asarray(x, dtype=float)])

    def curvature(self, x: float | np.ndarray) -> np.ndarray | float:
        return 0.0 if np.ndim(x) == 0 else np.zeros(np.shape(x))


def fit_curve(x: Sequence[float], y: Sequence[float], *, max_relative_error: float = MAX_RELATIVE_ERROR) -> Curve:
    """Fit a logistic to ``(x, y)``; fall back to PCHIP when the fit is poor or impossible.

    :param x: log2 batch sizes, ascending.
    :param y: measured values at ``x``.
    :param max_relative_error: largest accepted ``max|fit - y| / (max(y) - min(y))``.
    :return: the fitted curve.
    :raises ControllerError: fewer than two points, or non-finite data.
    """
    xa, ya = _points(x, y)
    return _curve(xa, ya, fit(xa, ya, max_relative_error))


def _points(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    if xa.size < 2 or xa.size != ya.size:
        raise ControllerError(f"need at least two (x, y) points of equal length to fit a curve, got {xa.size}")
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(ya))):
        raise ControllerError("cannot fit a curve to non-finite measurements")
    return xa, ya


def _curve(xa: np.ndarray, ya: np.ndarray, stored: StoredCurve) -> Curve:
    """The curve ``stored`` describes, through the points ``(xa, ya)``."""
    if stored.logistic is not None:
        l_span, x0, k, b0 = stored.logistic
        return LogisticCurve(l_span=l_span, x0=x0, k=k, b0=b0)
    assert stored.pchip is not None  # a StoredCurve holds exactly one of the two
    return PchipCurve(tuple(xa.tolist()), tuple(ya.tolist()), stored.pchip)


@dataclass(frozen=True)
class ModelCurves:
    """Per-replica power (W), inter-token latency (s) and throughput (tok/s) vs ``log2(batch)``.

    :param model: model name.
    :param batch_sizes: measured batch sizes (ascending), the projection grid.
    :param power_w: GPU power per replica.
    :param itl_s: mean inter-token latency.
    :param throughput_tok_s: output throughput per replica.
    :param miss_fraction: fraction of tokens over the ITL deadline (:class:`SecantCurve` through the
        site's steady-state fractions, made non-decreasing in batch: a larger batch never shortens
        the tail, a dip is the measurement's noise); ``None`` when the site cannot tell.
    """

    model: str
    batch_sizes: tuple[int, ...]
    power_w: Curve
    itl_s: Curve
    throughput_tok_s: Curve
    miss_fraction: Curve | None = None

    @classmethod
    def from_model_info(cls, info: ModelInfo) -> ModelCurves:
        """The three curves of one model's measured per-batch means: the library's stored fits when
        it has them for these batch sizes, else fitted now."""
        if not info.batch_sizes:
            raise ControllerError(f"model {info.model!r} has no measured batch sizes")
        batch_sizes = tuple(int(b) for b in info.batch_sizes)
        x = log2_batches(batch_sizes)
        ys = (tuple(info.power_w), tuple(info.itl_s), tuple(info.throughput_tok_s))
        stored = info.curve_fits
        if stored is not None and stored.batch_sizes == batch_sizes:
            params = (stored.power_w, stored.itl_s, stored.throughput_tok_s)
            curves = [_curve(*_points(x, y), p) for y, p in zip(ys, params)]
        else:
            curves = [_fit_cached(x, y) for y in ys]
        miss = None
        if len(info.miss_fraction) == len(batch_sizes) and len(batch_sizes) >= 2:
            xa, ya = _points(x, info.miss_fraction)
            miss = SecantCurve(tuple(xa.tolist()), tuple(np.maximum.accumulate(ya).tolist()))
        power, itl, throughput = curves
        return cls(info.model, batch_sizes, power, itl, throughput, miss)

    @property
    def x_min(self) -> float:
        """log2 of the smallest measured batch size."""
        return math.log2(self.batch_sizes[0])

    @property
    def x_max(self) -> float:
        """log2 of the largest measured batch size."""
        return math.log2(self.batch_sizes[-1])


@functools.lru_cache(maxsize=512)
def _fit_cached(x: tuple[float, ...], y: tuple[float, ...]) -> Curve:
    # the multi-start fit takes ~0.2 s per model; sweeps and repeated resets see the same data
    return fit_curve(x, y)


def log2_bounds(batch_sizes: Sequence[int]) -> tuple[float, float]:
    """``(log2(min), log2(max))`` of a batch-size grid."""
    return math.log2(min(batch_sizes)), math.log2(max(batch_sizes))


def project_batch(x: float, batch_sizes: Sequence[int]) -> int:
    """The measured batch size nearest to ``2**x`` in log2 distance (ties go to the smaller size).

    :param x: continuous log2 batch size.
    :param batch_sizes: measured batch sizes.
    """
    grid = _log2_grid(tuple(batch_sizes))
    if not grid:
        raise ControllerError("cannot project onto an empty batch-size list")
    return min(grid, key=lambda g: (abs(g[0] - x), g[1]))[1]


@functools.lru_cache(maxsize=1024)
def _log2_grid(batch_sizes: tuple[int, ...]) -> tuple[tuple[float, int], ...]:
    """``(log2(b), b)`` of each batch size, ascending (a controller projects onto the same sizes every step)."""
    return tuple((math.log2(b), b) for b in sorted(int(b) for b in batch_sizes))


def step_batch(batch_size: int, batch_sizes: Sequence[int], steps: int) -> int:
    """Move ``steps`` places along the measured sizes from the one nearest ``batch_size``.

    The result stays within the measured sizes (moving past an end returns the end size).
    """
    sizes = sorted(int(b) for b in batch_sizes)
    i = sizes.index(project_batch(math.log2(max(batch_size, 1)), sizes))
    return sizes[min(max(i + steps, 0), len(sizes) - 1)]

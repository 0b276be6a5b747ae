"""Smooth per-replica curves of power, latency and throughput against ``x = log2(batch size)``.

Model-based controllers (OFO, MPC) need values and slopes between the measured batch sizes. Each
curve is a four-parameter logistic fitted to the measured means in :class:`ModelInfo`::

    y(x) = b0 + L / (1 + exp(-k (x - x0)))        dy/dx = L k s (1 - s),  s = 1 / (1 + exp(-k (x - x0)))

When a logistic fit fails or is worse than the data allow (fewer than four points, a non-converged
least-squares solve, or an error above ``max_relative_error``), the curve falls back to a
shape-preserving monotone cubic (PCHIP) through the measured points, so a controller always gets a
curve that passes near the data.

This module also holds the batch-size grid helpers every batch controller shares: projection of a
continuous ``log2`` batch onto the measured sizes, and one-step moves along them.
"""

from __future__ import annotations

import functools
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.interpolate import PchipInterpolator
from scipy.optimize import OptimizeWarning, curve_fit

from openg2g.core.errors import ControllerError
from openg2g.core.protocols import ModelInfo

__all__ = [
    "Curve",
    "LogisticCurve",
    "ModelCurves",
    "PchipCurve",
    "fit_curve",
    "log2_bounds",
    "project_batch",
    "step_batch",
]


class Curve(ABC):
    """A smooth scalar function of ``x = log2(batch size)`` with its slope."""

    @abstractmethod
    def value(self, x: float | np.ndarray) -> np.ndarray | float:
        """Curve value at ``x``."""

    @abstractmethod
    def slope(self, x: float | np.ndarray) -> np.ndarray | float:
        """Derivative ``dy/dx`` at ``x``."""


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
        z = np.clip(-self.k * (np.asarray(x, dtype=float) - self.x0), -60.0, 60.0)
        return 1.0 / (1.0 + np.exp(z))

    def value(self, x: float | np.ndarray) -> np.ndarray | float:
        out = self.b0 + self.l_span * self._sigmoid(x)
        return float(out) if np.ndim(out) == 0 else out

    def slope(self, x: float | np.ndarray) -> np.ndarray | float:
        s = self._sigmoid(x)
        out = self.l_span * self.k * s * (1.0 - s)
        return float(out) if np.ndim(out) == 0 else out


@dataclass(frozen=True)
class PchipCurve(Curve):
    """Monotone cubic through measured points, extrapolated linearly with the end slopes."""

    x: tuple[float, ...]
    y: tuple[float, ...]

    @cached_property
    def _interp(self) -> PchipInterpolator:
        return PchipInterpolator(np.asarray(self.x), np.asarray(self.y), extrapolate=True)

    @cached_property
    def _deriv(self) -> PchipInterpolator:
        return self._interp.derivative()

    def value(self, x: float | np.ndarray) -> np.ndarray | float:
        out = self._interp(np.asarray(x, dtype=float))
        return float(out) if np.ndim(out) == 0 else out

    def slope(self, x: float | np.ndarray) -> np.ndarray | float:
        out = self._deriv(np.asarray(x, dtype=float))
        return float(out) if np.ndim(out) == 0 else out


def _logistic(x: np.ndarray, l_span: float, x0: float, k: float, b0: float) -> np.ndarray:
    return b0 + l_span / (1.0 + np.exp(np.clip(-k * (x - x0), -60.0, 60.0)))


def fit_curve(x: Sequence[float], y: Sequence[float], *, max_relative_error: float = 0.05) -> Curve:
    """Fit a logistic to ``(x, y)``; fall back to PCHIP when the fit is poor or impossible.

    :param x: log2 batch sizes, ascending.
    :param y: measured values at ``x``.
    :param max_relative_error: largest accepted ``max|fit - y| / (max(y) - min(y))``.
    :return: the fitted curve.
    :raises ControllerError: fewer than two points, or non-finite data.
    """
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    if xa.size < 2 or xa.size != ya.size:
        raise ControllerError(f"need at least two (x, y) points of equal length to fit a curve, got {xa.size}")
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(ya))):
        raise ControllerError("cannot fit a curve to non-finite measurements")
    span = float(ya.max() - ya.min())
    fallback = PchipCurve(tuple(xa.tolist()), tuple(ya.tolist()))
    if xa.size < 4 or span <= 0.0:
        return fallback
    best: tuple[float, np.ndarray] | None = None
    sign = 1.0 if ya[-1] >= ya[0] else -1.0
    for x0_start in np.linspace(xa.min(), xa.max() + 2.0, 5):
        for k_start in (0.5, 1.0, 2.0):
            p0 = [sign * span * 1.2, x0_start, k_start, float(ya.min() if sign > 0 else ya.max())]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", OptimizeWarning)
                    warnings.simplefilter("ignore", RuntimeWarning)
                    params, _ = curve_fit(_logistic, xa, ya, p0=p0, maxfev=4000)
            except (RuntimeError, ValueError):
                continue
            err = float(np.max(np.abs(_logistic(xa, *params) - ya)))
            if np.all(np.isfinite(params)) and (best is None or err < best[0]):
                best = (err, params)
    if best is None or best[0] > max_relative_error * span:
        return fallback
    l_span, x0, k, b0 = (float(v) for v in best[1])
    return LogisticCurve(l_span=l_span, x0=x0, k=k, b0=b0)


@dataclass(frozen=True)
class ModelCurves:
    """Per-replica power (W), inter-token latency (s) and throughput (tok/s) vs ``log2(batch)``.

    :param model: model name.
    :param batch_sizes: measured batch sizes (ascending), the projection grid.
    :param power_w: GPU power per replica.
    :param itl_s: mean inter-token latency.
    :param throughput_tok_s: output throughput per replica.
    """

    model: str
    batch_sizes: tuple[int, ...]
    power_w: Curve
    itl_s: Curve
    throughput_tok_s: Curve

    @classmethod
    def from_model_info(cls, info: ModelInfo) -> ModelCurves:
        """Fit the three curves to the measured per-batch means of one model."""
        if not info.batch_sizes:
            raise ControllerError(f"model {info.model!r} has no measured batch sizes")
        x = [math.log2(b) for b in info.batch_sizes]
        return cls(
            model=info.model,
            batch_sizes=tuple(int(b) for b in info.batch_sizes),
            power_w=_fit_cached(tuple(x), tuple(info.power_w)),
            itl_s=_fit_cached(tuple(x), tuple(info.itl_s)),
            throughput_tok_s=_fit_cached(tuple(x), tuple(info.throughput_tok_s)),
        )

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
    sizes = sorted(int(b) for b in batch_sizes)
    if not sizes:
        raise ControllerError("cannot project onto an empty batch-size list")
    return min(sizes, key=lambda b: (abs(math.log2(b) - x), b))


def step_batch(batch_size: int, batch_sizes: Sequence[int], steps: int) -> int:
    """Move ``steps`` places along the measured sizes from the one nearest ``batch_size``.

    The result stays within the measured sizes (moving past an end returns the end size).
    """
    sizes = sorted(int(b) for b in batch_sizes)
    i = sizes.index(project_batch(math.log2(max(batch_size, 1)), sizes))
    return sizes[min(max(i + steps, 0), len(sizes) - 1)]

"""Curves of a model's per-batch mean power, latency and throughput against ``x = log2(batch)``.

Model-based controllers (:mod:`openg2g.controllers.curves`) need these quantities between the measured
batch sizes. Each is fitted with a four-parameter logistic::

    y(x) = b0 + L / (1 + exp(-k (x - x0)))

by least squares from 15 starting points, keeping the fit with the smallest largest error; where
no logistic fits (:func:`fit_logistic`), the curve is the monotone piecewise cubic (PCHIP) through
the points. The fits take about 0.1 s per curve and need scipy's optimizer and interpolators
(0.3-0.5 s to import), so :func:`openg2g.datacenter.build.build_library` stores the curves in the
trace library (:class:`~openg2g.core.interfaces.CurveFits`) and a controller fits only data the
library has no curves for. A stored curve is exactly the floats :func:`fit` returns.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from openg2g.core.interfaces import CurveFits, LogisticParams, StoredCurve

__all__ = ["MAX_RELATIVE_ERROR", "fit", "fit_logistic", "fit_model", "log2_batches", "logistic", "pchip_coefficients"]

MAX_RELATIVE_ERROR = 0.05
"""Largest accepted ``max|fit - y| / (max(y) - min(y))`` of a logistic fit."""


def logistic(x: np.ndarray, l_span: float, x0: float, k: float, b0: float) -> np.ndarray:
    """``b0 + l_span / (1 + exp(-k (x - x0)))``, the exponent clipped to +-60 against overflow."""
    return b0 + l_span / (1.0 + np.exp(np.clip(-k * (x - x0), -60.0, 60.0)))


def log2_batches(batch_sizes: Sequence[int]) -> tuple[float, ...]:
    """``x = log2(batch size)`` of each batch size: the abscissa of every fit."""
    return tuple(math.log2(b) for b in batch_sizes)


def fit_logistic(x: np.ndarray, y: np.ndarray, max_relative_error: float = MAX_RELATIVE_ERROR) -> LogisticParams | None:
    """Best logistic through finite points ``(x, y)``, or ``None`` where a logistic does not fit.

    :param x: log2 batch sizes, ascending (float64).
    :param y: measured values at ``x`` (float64, finite).
    :param max_relative_error: largest accepted ``max|fit - y| / (max(y) - min(y))``.
    :return: ``(l_span, x0, k, b0)``; ``None`` for fewer than four points, constant ``y``, no
        converged start, or a best fit missing a point by more than the accepted error.
    """
    span = float(y.max() - y.min())
    if x.size < 4 or span <= 0.0:
        return None
    from scipy.optimize import OptimizeWarning, curve_fit  # 0.3 s to import; only fits need it

    best: tuple[float, np.ndarray] | None = None
    sign = 1.0 if y[-1] >= y[0] else -1.0
    for x0_start in np.linspace(x.min(), x.max() + 2.0, 5):
        for k_start in (0.5, 1.0, 2.0):
            p0 = [sign * span * 1.2, x0_start, k_start, float(y.min() if sign > 0 else y.max())]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", OptimizeWarning)
                    warnings.simplefilter("ignore", RuntimeWarning)
                    params, _ = curve_fit(logistic, x, y, p0=p0, maxfev=4000)
            except (RuntimeError, ValueError):
                continue
            err = float(np.max(np.abs(logistic(x, *params) - y)))
            if np.all(np.isfinite(params)) and (best is None or err < best[0]):
                best = (err, params)
    if best is None or best[0] > max_relative_error * span:
        return None
    l_span, x0, k, b0 = (float(v) for v in best[1])
    return l_span, x0, k, b0


def pchip_coefficients(x: np.ndarray, y: np.ndarray) -> tuple[tuple[float, ...], ...]:
    """The monotone piecewise cubic (PCHIP) through ``(x, y)`` as :attr:`StoredCurve.pchip` rows.

    :param x: strictly ascending abscissae, at least two.
    :param y: values at ``x``.
    """
    from scipy.interpolate import PchipInterpolator  # 0.3-0.5 s to import; only fits need it

    return tuple(tuple(float(v) for v in row) for row in PchipInterpolator(x, y, extrapolate=True).c)


def fit(x: np.ndarray, y: np.ndarray, max_relative_error: float = MAX_RELATIVE_ERROR) -> StoredCurve:
    """The curve of finite points ``(x, y)`` (at least two, ``x`` ascending): the best logistic if
    it fits (:func:`fit_logistic`), else the PCHIP cubic through the points."""
    params = fit_logistic(x, y, max_relative_error)
    return StoredCurve(logistic=params) if params is not None else StoredCurve(pchip=pchip_coefficients(x, y))


def fit_model(
    batch_sizes: Sequence[int],
    power_w: Sequence[float],
    itl_s: Sequence[float],
    throughput_tok_s: Sequence[float],
) -> CurveFits:
    """The three curves of one model on the batch sizes given (ascending, at least two), as stored in
    a library.

    :param power_w: mean GPU power per replica at each batch size (W).
    :param itl_s: mean inter-token latency at each batch size (s).
    :param throughput_tok_s: output throughput per replica at each batch size (tok/s).
    :raises ValueError: fewer than two batch sizes, lengths differ or a value is not finite.
    """
    x = np.asarray(log2_batches(batch_sizes), dtype=float)
    if x.size < 2:
        raise ValueError(f"need at least two batch sizes to fit curves, got {list(batch_sizes)}")
    fits = []
    for name, values in (("power_w", power_w), ("itl_s", itl_s), ("throughput_tok_s", throughput_tok_s)):
        y = np.asarray(values, dtype=float)
        if y.shape != x.shape or not np.all(np.isfinite(y)):
            raise ValueError(f"{name}: need {x.size} finite values, one per batch size, got {list(values)}")
        fits.append(fit(x, y))
    return CurveFits(tuple(int(b) for b in batch_sizes), *fits)

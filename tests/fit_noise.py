"""Comparing results whose last digits depend on the host: curve fits, and other computed numbers.

A least-squares fit (scipy's ``curve_fit``, MINPACK's Levenberg-Marquardt) ends in floats whose
last digits depend on the host's vector and BLAS kernels, and its parameters inherit that noise
amplified by the fit's conditioning: the trace library's stored fits and a refit on an AVX-512
Xeon differ by 1.1e-6 relative in one parameter (Llama-3.1-405B's power on the scenarios' grid,
1.1348904 against 1.1348891), by about 1e-8 elsewhere. Simulations do not see this: they use the
stored fits, the same bits on every host. Tests that check "the stored fits are what the fit gives"
therefore compare what two fits predict over the batch-size range (:func:`assert_same_predictions`),
within a tolerance drawn from the data's own scatter about the fit (:func:`prediction_tolerance`),
not their parameters. :func:`assert_close` compares other nested numbers at a tolerance the
caller gives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from openg2g.controllers.curves import Curve, ModelCurves
from openg2g.core.interfaces import ModelInfo
from openg2g.datacenter.library import TraceLibrary

__all__ = ["FTOL", "XTOL", "assert_close", "assert_same_predictions", "library_curves", "prediction_tolerance"]

MEANS = (("power_w", "mean_power_w"), ("itl_s", "mean_itl_s"), ("throughput_tok_s", "throughput_tok_s"))
"""Each curve of :class:`~openg2g.controllers.curves.ModelCurves` and the configuration field of the
means it is fitted to."""

FTOL = 1.49012e-08
"""``curve_fit``'s (MINPACK ``lmdif``'s) default stop: the sum of squares falls by less than this,
relative, in a step (the square root of float64's epsilon)."""

XTOL = 1.49012e-08
"""``curve_fit``'s other default stop: a step moves the parameters by less than this, relative."""


def prediction_tolerance(y: np.ndarray, residuals: np.ndarray) -> float:
    """How far apart two least-squares fits of the points ``y`` may predict, given one fit's
    ``residuals`` (``y - fit``, the measured scatter of the data about the curve).

    Near the minimum ``S*`` of the sum of squares, a fit whose predictions at the points lie ``d``
    from the optimum's has ``S = S* + |d|^2``; Levenberg-Marquardt stops once a step gains less
    than ``FTOL S``, so a stopped fit is within ``sqrt(FTOL S*)`` of the optimum and two fits within
    ``2 sqrt(FTOL) |r|``: 2.4e-4 of the residuals' norm. Host noise stays far inside (stored against
    refit here: at most 5.5e-6 of the residual standard error; refits of data perturbed by 1e-10:
    7e-6), and a data point changed by a small fraction of the scatter moves the fit by more. A
    curve through its points (as many points as parameters, a PCHIP) has no scatter; the bound is
    then the other stop, a relative parameter step under ``XTOL``: ``2 XTOL max|y|``.
    """
    return 2.0 * math.sqrt(FTOL) * float(np.linalg.norm(residuals)) + 2.0 * XTOL * float(np.max(np.abs(y)))


def assert_same_predictions(a: Curve, b: Curve, x: Sequence[float], y: Sequence[float], what: str) -> None:
    """Assert that two fits ``a`` and ``b`` of the points ``(x, y)`` predict alike over the range
    of ``x`` (at the points and at 401 evenly spaced ``x`` from the first to the last), within
    :func:`prediction_tolerance` of ``a``'s residuals; the message names ``what``."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    grid = np.union1d(np.linspace(xa.min(), xa.max(), 401), xa)
    gap = np.abs(np.asarray(a.value(grid)) - np.asarray(b.value(grid)))
    tolerance = prediction_tolerance(ya, ya - np.asarray(a.value(xa)))
    worst = int(np.argmax(gap))
    assert gap[worst] <= tolerance, (
        f"{what}: the fits predict {gap[worst]:.6g} apart at x = {grid[worst]:.4g}, beyond the {tolerance:.3g} "
        "two least-squares fits of these points may differ by (tests/fit_noise.py)"
    )


def library_curves(
    library: TraceLibrary, model: str, gpus: int, batch_sizes: tuple[int, ...]
) -> tuple[list[float], dict[str, tuple[float, ...]], ModelCurves]:
    """``x = log2(batch)`` of ``batch_sizes``, the library's measured means at them per curve
    (``power_w``, ``itl_s``, ``throughput_tok_s``) and the curves a controller gets from the
    library's stored fits of them."""
    cfgs = [library.config(model, gpus, b) for b in batch_sizes]
    ys = {name: tuple(float(getattr(c, field)) for c in cfgs) for name, field in MEANS}
    stored = library.curve_fits(model, gpus, batch_sizes)
    assert stored is not None, f"{model} on {gpus} GPUs: no stored fits at {list(batch_sizes)}"
    info = ModelInfo(
        model=model,
        gpus_per_replica=gpus,
        replicas=1,
        batch_sizes=batch_sizes,
        power_w=ys["power_w"],
        itl_s=ys["itl_s"],
        throughput_tok_s=ys["throughput_tok_s"],
        itl_deadline_s=None,
        initial_batch_size=batch_sizes[0],
        curve_fits=stored,
    )
    return [math.log2(b) for b in batch_sizes], ys, ModelCurves.from_model_info(info)


def assert_close(a: Any, b: Any, path: str, rtol: float) -> None:
    """Assert that two nested structures (dicts, lists, tuples, numbers, strings, None) are the same
    except for floats, which agree to ``rtol``; the message names the path."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        assert a.keys() == b.keys(), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            assert_close(a[k], b[k], f"{path}.{k}", rtol)
    elif isinstance(a, Sequence) and not isinstance(a, str) and isinstance(b, Sequence) and not isinstance(b, str):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        # a vector of numbers (a complex value's parts, a matrix row) agrees to rtol of its largest
        # entry: a part that is 0 in exact arithmetic is rounding noise of the others (1e-20 ohm
        # beside 1e-1 ohm), whatever its own relative error
        numbers = [x for x in (*a, *b) if isinstance(x, float) and math.isfinite(x)]
        scale = max((abs(x) for x in numbers), default=0.0) if len(numbers) == 2 * len(a) else 0.0
        for i, (x, y) in enumerate(zip(a, b)):
            if scale and isinstance(x, float) and isinstance(y, float):
                same = math.isclose(x, y, rel_tol=rtol, abs_tol=rtol * scale)
                assert same, f"{path}[{i}]: {x!r} != {y!r} (rtol {rtol} of the largest entry, {scale:g})"
            else:
                assert_close(x, y, f"{path}[{i}]", rtol)
    elif isinstance(a, float) and isinstance(b, float):
        same = math.isclose(a, b, rel_tol=rtol, abs_tol=1e-300) or (math.isnan(a) and math.isnan(b))
        assert same, f"{path}: {a!r} != {b!r} (rtol {rtol})"
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"

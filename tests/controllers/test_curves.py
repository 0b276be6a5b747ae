"""Curve fits (run-time and stored with the trace library) and batch-grid helpers."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from openg2g.controllers.curves import (
    Curve,
    LogisticCurve,
    ModelCurves,
    PchipCurve,
    SecantCurve,
    fit_curve,
    project_batch,
    step_batch,
)
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import CurveFits, StoredCurve
from openg2g.datacenter.build import FIT_GRIDS
from openg2g.datacenter.library import TraceLibrary
from tests.controllers.conftest import toy_model
from tests.fit_noise import assert_same_predictions, library_curves


def test_logistic_fit_recovers_exact_parameters():
    true = LogisticCurve(l_span=400.0, x0=6.0, k=1.0, b0=300.0)
    x = np.arange(3, 10, dtype=float)
    fit = fit_curve(x, true.value(x))
    assert isinstance(fit, LogisticCurve)
    assert fit.value(6.5) == pytest.approx(true.value(6.5), rel=1e-6)
    assert fit.slope(6.5) == pytest.approx(true.slope(6.5), rel=1e-5)


def test_logistic_slope_is_the_derivative():
    c = LogisticCurve(l_span=2.0, x0=1.0, k=1.5, b0=-1.0)
    h = 1e-6
    for x in (-1.0, 0.5, 1.0, 4.0):
        assert c.slope(x) == pytest.approx((c.value(x + h) - c.value(x - h)) / (2 * h), rel=1e-6)


def test_too_few_points_fall_back_to_pchip_through_the_data():
    fit = fit_curve([3.0, 4.0, 5.0], [1.0, 2.0, 2.5])
    assert isinstance(fit, PchipCurve)
    assert fit.value(4.0) == pytest.approx(2.0)
    assert fit.slope(4.5) > 0


def test_fit_rejects_bad_input():
    with pytest.raises(ControllerError, match="at least two"):
        fit_curve([1.0], [1.0])
    with pytest.raises(ControllerError, match="non-finite"):
        fit_curve([1.0, 2.0], [1.0, float("nan")])


def test_model_curves_from_model_info_pass_through_measurements():
    info = toy_model()
    curves = ModelCurves.from_model_info(info)
    for b, p, l, t in zip(info.batch_sizes, info.power_w, info.itl_s, info.throughput_tok_s):
        x = math.log2(b)
        assert curves.power_w.value(x) == pytest.approx(p, rel=1e-3)
        assert curves.itl_s.value(x) == pytest.approx(l, rel=1e-3)
        assert curves.throughput_tok_s.value(x) == pytest.approx(t, rel=1e-3)
    assert (curves.x_min, curves.x_max) == (3.0, 9.0)


def test_projection_and_steps_stay_on_measured_sizes():
    sizes = [8, 16, 32, 64, 128, 256, 512]
    assert project_batch(math.log2(100), sizes) == 128
    assert project_batch(math.log2(90), sizes) == 64
    assert project_batch(6.5, sizes) == 64  # tie goes to the smaller size
    assert project_batch(20.0, sizes) == 512 and project_batch(-3.0, sizes) == 8
    assert step_batch(128, sizes, -1) == 64
    assert step_batch(512, sizes, +1) == 512
    assert step_batch(100, sizes, +2) == 512


@pytest.mark.slow
def test_stored_fits_are_the_run_time_fit() -> None:
    # by what the two fits predict, within the data's scatter (tests/fit_noise.py): their parameters
    # differ from host to host; a run uses the stored bits
    library = TraceLibrary.load()
    grids = {(f.model, f.gpus, f.batch_sizes) for f in library.index.curve_fits}
    for model in library.models():
        (gpus,) = library.gpus(model)
        # every bundled model has fits on its measured sizes and on the bundled scenarios' grid
        assert {(model, gpus, library.batch_sizes(model, gpus)), *((model, gpus, g) for g in FIT_GRIDS)} <= grids
    for model, gpus, batch_sizes in sorted(grids):
        x, ys, curves = library_curves(library, model, gpus, batch_sizes)
        for name, y in ys.items():
            assert_same_predictions(getattr(curves, name), fit_curve(x, y), x, y, f"{model} {batch_sizes} {name}")


def test_fits_are_compared_by_what_they_predict_not_by_their_parameters() -> None:
    """Llama-3.1-405B's power on the scenarios' grid, whose refit on an AVX-512 Xeon moved k by 1.1e-6
    relative: a refit of the means perturbed at 1e-10 (host noise) moves a parameter as much,
    which a comparison of parameters at 1e-6 refused, yet predicts the same power; a mean moved by
    1% of the data's scatter about the curve (0.45 W of a 45 W residual standard error) does not."""
    x, ys, curves = library_curves(TraceLibrary.load(), "Llama-3.1-405B", 8, FIT_GRIDS[0])
    stored = curves.power_w
    assert isinstance(stored, LogisticCurve)
    y = np.array(ys["power_w"])
    noisy = fit_curve(x, y * (1 + 1e-10 * np.random.default_rng(0).standard_normal(y.size)))
    assert isinstance(noisy, LogisticCurve)
    moved = max(abs(getattr(noisy, p) / getattr(stored, p) - 1) for p in ("l_span", "x0", "k", "b0"))
    assert moved > 1e-6
    assert_same_predictions(stored, noisy, x, y, "host noise")
    residuals = y - np.asarray(stored.value(np.array(x)))
    changed = y.copy()
    changed[3] += 0.01 * math.sqrt(residuals @ residuals / (y.size - 4))
    with pytest.raises(AssertionError, match=r"changed mean: the fits predict .* apart at x = "):
        assert_same_predictions(stored, fit_curve(x, changed), x, y, "changed mean")


def test_stored_fits_are_used_only_for_their_own_batch_sizes() -> None:
    info = toy_model()
    fitted = ModelCurves.from_model_info(info)
    pchip = ((0.0,) * 6, (0.0,) * 6, (1.0,) * 6, (2.0,) * 6)  # y = 2 + (x - x_i) on every interval
    stored = CurveFits(
        info.batch_sizes,
        StoredCurve(logistic=(1.0, 2.0, 3.0, 4.0)),
        StoredCurve(pchip=pchip),
        StoredCurve(logistic=(5.0, 6.0, 7.0, 8.0)),
    )
    curves = ModelCurves.from_model_info(replace(info, curve_fits=stored))
    assert curves.power_w == LogisticCurve(l_span=1.0, x0=2.0, k=3.0, b0=4.0)
    assert curves.throughput_tok_s == LogisticCurve(l_span=5.0, x0=6.0, k=7.0, b0=8.0)
    x = tuple(math.log2(b) for b in info.batch_sizes)
    assert curves.itl_s == PchipCurve(x, info.itl_s, pchip)
    assert curves.itl_s.value(3.5) == 2.5 and curves.itl_s.slope(3.5) == 1.0
    # curves of another grid (e.g. the full measured one when the scenario restricts batch sizes) are ignored
    other = replace(stored, batch_sizes=(8, 16, 32, 64, 128, 256, 512, 1024))
    assert ModelCurves.from_model_info(replace(info, curve_fits=other)) == fitted


def test_pchip_curve_equals_scipy_bit_for_bit() -> None:
    from scipy.interpolate import PchipInterpolator

    rng = np.random.default_rng(7)
    x = np.log2(np.array([8, 16, 32, 64, 96, 128, 256, 512], dtype=float))
    y = np.array([300.0, 320.0, 380.0, 380.0, 450.0, 430.0, 500.0, 505.0])  # flat and falling parts too
    curve = PchipCurve.through(x, y)
    ref = PchipInterpolator(x, y, extrapolate=True)
    points = np.concatenate(
        [rng.uniform(x[0] - 3.0, x[-1] + 3.0, 10_000), x, np.nextafter(x, 99.0), np.nextafter(x, -99.0)]
    )
    for ours, theirs in ((curve.value, ref), (curve.slope, ref.derivative())):
        assert np.array_equal(np.asarray(ours(points)).view(np.int64), theirs(points).view(np.int64))
        assert all(ours(float(p)) == float(theirs(p)) for p in points[:200])


@pytest.mark.parametrize(
    "curve",
    [
        LogisticCurve(l_span=400.0, x0=6.0, k=1.3, b0=300.0),
        LogisticCurve(l_span=-0.02, x0=2.0, k=40.0, b0=0.05),  # saturates: the exponent is clipped at +-60
        PchipCurve.through(np.log2([8.0, 16, 32, 64, 128, 256, 512]), np.array([1.0, 3, 4, 4.5, 7, 7.2, 9])),
    ],
)
def test_one_point_evaluates_to_the_array_evaluation_bit_for_bit(curve: Curve) -> None:
    # controllers evaluate one x at a time through a Python-float path; it must give the floats
    # of the vectorized evaluation exactly, beyond the ends and at the break points too
    x = np.concatenate([np.linspace(-5.0, 15.0, 2001), np.log2([8.0, 16, 512]), [np.nan]])
    for method in ("value", "slope"):
        as_array = np.asarray(getattr(curve, method)(x))
        one_by_one = np.array([getattr(curve, method)(float(xi)) for xi in x])
        assert as_array.tobytes() == one_by_one.tobytes(), method


def test_the_secant_curve_is_the_broken_line_through_its_points():
    """Between points the line's value and its segment's slope; beyond the ends the end segments
    continued; a point ends one segment and takes the next one's slope; no curvature."""
    curve = SecantCurve((3.0, 4.0, 6.0), (0.0, 0.01, 0.11))
    assert curve.value(3.5) == pytest.approx(0.005)
    assert curve.value(5.0) == pytest.approx(0.06)
    assert curve.value(7.0) == pytest.approx(0.16) and curve.value(2.0) == pytest.approx(-0.01)
    assert curve.slope(4.0) == pytest.approx(0.05) and curve.slope(6.0) == pytest.approx(0.05)
    assert curve.slope(3.0) == pytest.approx(0.01)
    np.testing.assert_allclose(curve.slope(np.array([3.5, 5.0])), [0.01, 0.05])
    assert curve.curvature(5.0) == 0.0

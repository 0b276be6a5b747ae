"""Curve fits and batch-grid helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from controllers.curves import LogisticCurve, ModelCurves, PchipCurve, fit_curve, project_batch, step_batch
from openg2g.core.errors import ControllerError
from tests.controllers.conftest import toy_model


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

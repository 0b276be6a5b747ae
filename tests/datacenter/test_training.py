"""The training-job model against the public OpenG2G study's job and against hand-computed
square waves."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from openg2g.datacenter.training import TRACE_DT_S, TrainingJob, synthesize_trace
from openg2g.scenario.schema import TrainingSpec

STUDY_RAW_PEAK_W = 334.4495
"""Maximum of the study's per-GPU trace before its rescale, at t = 376.5 s (computed by running
gpu2grid/openg2g 0.2.0's generator with its defaults; /tmp/refstudy FACTS 1.8)."""
STUDY_MEAN_W = 252.7525
"""The study's mean per-GPU training power over its 1000-2000 s window (same source)."""


def _study_job() -> TrainingJob:
    return TrainingJob(TrainingSpec(gpus=2400, start_s=1000, end_s=2000))


def test_defaults_reproduce_the_study_trace() -> None:
    """Seed 2 with the study's parameters draws the study's trace: the same peak at the same time."""
    raw = synthesize_trace(TrainingSpec(gpus=1, start_s=0, end_s=1))
    assert raw.size == 10_000
    assert raw.max() == pytest.approx(STUDY_RAW_PEAK_W, abs=1e-4)
    assert int(raw.argmax()) * TRACE_DT_S == pytest.approx(376.5)


def test_study_job_mean_and_peak_per_gpu() -> None:
    job = _study_job()
    t = 1000.0 + np.arange(10_000) * TRACE_DT_S
    per_gpu = job.power_w(t) / 2400
    assert per_gpu.max() == pytest.approx(400.0, rel=1e-9)
    assert per_gpu.mean() == pytest.approx(STUDY_MEAN_W, rel=0.01)
    # 2,400 GPUs in lockstep: ~607 kW on average, swinging by hundreds of kW within seconds
    assert per_gpu.mean() * 2400 == pytest.approx(606.6e3, rel=0.01)
    assert np.max(np.abs(np.diff(per_gpu[180:]))) * 2400 > 200e3


def test_ramp_caps_the_start_and_window_is_half_open() -> None:
    job = _study_job()
    assert job.power_w(999.9) == 0.0 and job.power_w(2000.0) == 0.0
    # at start the cap is the ramp origin, 50 W rescaled
    assert job.power_w(1000.0) == pytest.approx(2400 * 50.0 * job.scale)
    ramp = job.power_w(1000.0 + np.arange(180) * TRACE_DT_S) / 2400
    cap = job.scale * (50.0 + 175.0 * np.arange(180) * TRACE_DT_S / 18.0)
    assert np.all(ramp <= cap + 1e-9)


def test_square_wave_special_case() -> None:
    """Fixed plateau lengths without noise, dips, smoothing or ramp: a square wave, 650 W for
    1.6 s and 250 W for 0.4 s, 80 % compute."""
    spec = TrainingSpec(
        gpus=10,
        start_s=0,
        end_s=100,
        high_w_per_gpu=650,
        low_w_per_gpu=250,
        high_s=(1.6, 1.6),
        low_s=(0.4, 0.4),
        noise_w=0,
        dips_per_s=0,
        smoothing_s=0,
        ramp_s=0,
        peak_w_per_gpu=None,
    )
    p = TrainingJob(spec).power_w(np.arange(1000) * TRACE_DT_S)
    assert set(np.round(p).tolist()) == {6500.0, 2500.0}
    assert np.mean(np.isclose(p, 6500.0)) == pytest.approx(0.8)
    assert p[15] == pytest.approx(6500.0) and p[16] == pytest.approx(2500.0) and p[20] == pytest.approx(6500.0)


def test_independent_servers_keep_the_mean_and_smooth_the_swings() -> None:
    lock = _study_job()
    indep = TrainingJob(TrainingSpec(gpus=2400, start_s=1000, end_s=2000, sync="independent"))
    t = 1100.0 + np.arange(9000) * TRACE_DT_S
    p_lock, p_ind = lock.power_w(t), indep.power_w(t)
    assert p_ind.mean() == pytest.approx(lock.mean_w_per_gpu * 2400, rel=0.01)
    assert p_ind.std() < 0.1 * p_lock.std()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("peak_w_per_gpu", 0),
        ("peak_w_per_gpu", 5000),
        ("high_s", (0.0, 0.0)),
        ("low_s", (15.0, 10.0)),
        ("dip_depth_w", (float("inf"), float("inf"))),
        ("end_s", float("inf")),
        ("sync", "sometimes"),
    ],
)
def test_bad_parameters_are_rejected(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        TrainingSpec.model_validate({"gpus": 8, "start_s": 0, "end_s": 10, field: value})

"""Frequency metrics (openg2g.grid.frequency_metrics) on hand-computed piecewise-linear trajectories."""

from __future__ import annotations

import numpy as np
import pytest

from openg2g.grid.frequency_metrics import FrequencyMonitor, frequency_metrics

# 60 Hz until the event at 1 s, down at -0.2 Hz/s to 59.8 Hz at 2 s, up at 0.1 Hz/s to 59.9 Hz at 3 s, then flat
DIP_T = [0.0, 1.0, 2.0, 3.0, 60.0]
DIP_F = [60.0, 60.0, 59.8, 59.9, 59.9]


# the same with the fall steeper in its first half: -0.3 Hz/s to 59.85 Hz at 1.5 s, then -0.1 Hz/s
KINK_T = [0.0, 1.0, 1.5, 2.0, 3.0, 60.0]
KINK_F = [60.0, 60.0, 59.85, 59.8, 59.9, 59.9]


def test_dip_by_hand() -> None:
    got = frequency_metrics(KINK_T, KINK_F, event_t_s=1.0)
    assert (got.nadir_hz, got.nadir_t_s) == (59.8, 2.0)
    assert (got.zenith_hz, got.zenith_t_s) == (60.0, 0.0)
    # the steepest half-second is the first after the event: -0.15 Hz over 0.5 s
    assert got.rocof_hz_s == pytest.approx(-0.3, rel=1e-12)
    assert got.rocof_t_s == pytest.approx(1.5, abs=1e-12)
    assert got.rocof_window_s == 0.5
    # Value B: the mean over 21 s to 53 s, flat at 59.9 Hz
    assert got.settling_hz == pytest.approx(59.9, abs=1e-12)
    # the last sample outside 59.9 +- 0.01 Hz is 59.8 Hz at 2 s; the rise crosses 59.89 Hz nine
    # tenths of the way to 3 s
    assert got.settling_t_s == pytest.approx(2.9, abs=1e-9)
    assert got.event_t_s == 1.0


def test_windows_starting_between_samples_are_read_by_interpolation() -> None:
    # the same dip sampled every 0.3 s from 0.05 s: no sample falls on the event or 0.5 s after it
    t = np.arange(0.05, 60.0, 0.3)
    f = np.interp(t, DIP_T, DIP_F)
    got = frequency_metrics(t, f, event_t_s=1.0)
    assert got.rocof_hz_s == pytest.approx(-0.2, rel=1e-9)
    # the lowest sample is 2.15 s, on the rise: 59.8 + 0.1 * 0.15 Hz (1.85 s, on the fall, is 59.83 Hz)
    assert got.nadir_hz == pytest.approx(59.815, abs=1e-9)
    assert got.nadir_t_s == pytest.approx(2.15, abs=1e-9)


def test_a_window_longer_than_the_fall_averages_it() -> None:
    # a 2 s window: at best 0 s to 2 s, 60 -> 59.8 Hz (1 s to 3 s nets only -0.1 Hz)
    got = frequency_metrics(DIP_T, DIP_F, event_t_s=1.0, rocof_window_s=2.0)
    assert got.rocof_hz_s == pytest.approx(-0.1, rel=1e-12)
    assert got.rocof_t_s == pytest.approx(2.0, abs=1e-12)


def test_value_b_of_a_ramp_and_a_frequency_still_moving() -> None:
    # linear from 59.8 Hz at 20 s to 59.9 Hz at 52 s after an event at 0: the mean is the midpoint;
    # at 52 s it is 0.05 Hz from that mean, outside the band, so it has not settled
    got = frequency_metrics([0.0, 20.0, 52.0, 70.0], [60.0, 59.8, 59.9, 59.9], event_t_s=0.0)
    assert got.settling_hz == pytest.approx(59.85, abs=1e-12)
    assert got.settling_t_s is None
    wide = frequency_metrics([0.0, 20.0, 52.0, 70.0], [60.0, 59.8, 59.9, 59.9], event_t_s=0.0, settling_band_hz=0.06)
    # 60 Hz is 0.15 Hz off; the fall from 60 to 59.8 Hz over 20 s crosses 59.91 Hz at 9 s
    assert wide.settling_t_s == pytest.approx(9.0, abs=1e-9)


def test_never_leaving_the_band_settles_at_the_event() -> None:
    got = frequency_metrics([0.0, 10.0, 60.0], [60.0, 60.004, 60.0], event_t_s=5.0)
    # Value B over 25 s to 57 s of a line: its value at 41 s, 60.004 - 0.004 * 31 / 50 Hz
    assert got.settling_hz == pytest.approx(60.00152, abs=1e-12)
    assert got.settling_t_s == 5.0


def test_short_trajectories_have_no_settling_or_rocof() -> None:
    got = frequency_metrics([0.0, 0.2, 0.4], [60.0, 59.99, 59.98], event_t_s=0.0)
    assert got.rocof_hz_s is None and got.rocof_t_s is None
    assert got.settling_hz is None and got.settling_t_s is None
    assert got.nadir_hz == 59.98
    none = frequency_metrics([0.0, 100.0], [60.0, 60.0], event_t_s=None)
    assert none.event_t_s is None and none.settling_hz is None


def test_the_monitor_marks_the_event_once_with_the_sample_at_its_instant() -> None:
    m = FrequencyMonitor()
    m.add(0.0, 60.0)
    m.add(1.0, 60.0)
    m.mark_event(1.0)
    m.mark_event(3.0)  # the first event counts
    for t, f in zip(KINK_T[2:], KINK_F[2:], strict=True):
        m.add(t, f)
    assert m.result() == frequency_metrics(KINK_T, KINK_F, event_t_s=1.0)


@pytest.mark.parametrize(
    ("t", "f", "words"),
    [
        ([0.0, 1.0], [60.0], "one length"),
        ([0.0, 2.0, 1.0], [60.0, 60.0, 60.0], "time order"),
        ([0.0, 1.0], [60.0, float("nan")], "finite"),
        ([], [], "no frequency sample"),
    ],
)
def test_bad_trajectories_are_refused(t: list[float], f: list[float], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        frequency_metrics(t, f, event_t_s=0.0)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="rocof_window_s"):
        FrequencyMonitor(rocof_window_s=0.0)
    with pytest.raises(ValueError, match="settling_band_hz"):
        FrequencyMonitor(settling_band_hz=float("nan"))
    with pytest.raises(ValueError, match="event_t_s"):
        FrequencyMonitor(event_t_s=float("inf"))
    m = FrequencyMonitor()
    m.add(5.0, 60.0)
    with pytest.raises(ValueError, match="before the last sample"):
        m.mark_event(4.0)

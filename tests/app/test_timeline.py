"""The feeder view's time against hand-worked answers: nearest steps, previous/next, the slider's
marks, the worst step, playback frames and links."""

from __future__ import annotations

import numpy as np
import pytest

from openg2g.app.timeline import (
    FIT,
    link_search,
    nearest_step,
    next_play_time,
    read_link,
    slider_settings,
    stepped,
    worst_step,
)
from openg2g.plot.overview import HIGHEST_V, LOWEST_V, Line, Overview, Panel
from openg2g.plot.timeline import Marks

# one-second steps, then one-cycle steps through a fault at 5 s, then one-second steps again
FAULT = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 5.0 + 1 / 60, 5.0 + 2 / 60, 6.0, 7.0])


@pytest.mark.parametrize(
    ("t_s", "index"),
    [(-3.0, 0), (1.0, 0), (1.4, 0), (1.5, 0), (1.51, 1), (5.02, 5), (5.03, 6), (6.5, 7), (6.51, 8), (99.0, 8)],
)
def test_the_nearest_step_the_earlier_of_two_equally_near(t_s: float, index: int) -> None:
    assert nearest_step(FAULT, t_s) == index


def test_previous_and_next_walk_the_steps_and_hold_at_the_ends() -> None:
    assert stepped(FAULT, 5.0, 1) == 5.0 + 1 / 60
    assert stepped(FAULT, 5.0 + 1 / 60 + 1e-12, 1) == 5.0 + 2 / 60  # a slider's float noise
    assert stepped(FAULT, 6.0, -1) == 5.0 + 2 / 60
    assert stepped(FAULT, 1.0, -1) == 1.0
    assert stepped(FAULT, 7.0, 1) == 7.0


def test_the_slider_runs_in_seconds_with_round_marks_and_the_worst_step() -> None:
    times = np.arange(1, 3601) * 1.0  # an hour at 1 s
    at = slider_settings(times, worst_s=1234.0)
    assert (at.minimum, at.maximum, at.step) == (1.0, 3600.0, 1.0)
    # 3599 s / 6 = 600 s, the clock's 10 minutes: 600 to 3000 s between the ends (3600 s is the last
    # step's), but not 1200 s, under the worst step's label
    assert at.marks == {
        1.0: "1 s",
        600.0: "600 s",
        1234.0: {"label": "worst", "style": {"color": "#b30000", "fontWeight": "bold"}},
        1800.0: "1800 s",
        2400.0: "2400 s",
        3000.0: "3000 s",
        3600.0: "3600 s",
    }
    near_a_mark = slider_settings(times, worst_s=1790.0)  # 1800 s would be under "worst"
    assert list(near_a_mark.marks) == [1.0, 600.0, 1200.0, 1790.0, 2400.0, 3000.0, 3600.0]
    tenths = slider_settings(np.arange(1, 201) * 0.1, worst_s=None)
    assert tenths.step == 0.1  # not the float difference of two steps (0.09999999999999964)
    fault = slider_settings(FAULT, worst_s=None)
    assert fault.step == 0.0166666667  # fine enough to reach every one-cycle step of an hour
    assert fault.marks == {1.0: "1 s", 2.0: "2 s", 3.0: "3 s", 4.0: "4 s", 5.0: "5 s", 6.0: "6 s", 7.0: "7 s"}
    day = slider_settings(np.arange(0, 86401) * 1.0, worst_s=None)
    assert list(day.marks) == [0.0, 21600.0, 43200.0, 64800.0, 86400.0]  # 6 h apart
    single = slider_settings(np.array([0.1]), worst_s=0.1)
    assert (single.minimum, single.maximum) == (0.1, 0.1)
    assert single.marks == {0.1: {"label": "worst", "style": {"color": "#b30000", "fontWeight": "bold"}}}


def _overview(lowest: list[float], highest: list[float]) -> Overview:
    t = np.arange(1.0, len(lowest) + 1)
    voltage = Panel(
        "voltage", "voltage (pu)", [Line(LOWEST_V, t, np.array(lowest)), Line(HIGHEST_V, t, np.array(highest))]
    )
    power = Panel("dc_power", "power (MW)", [Line("P a", t, np.full(t.size, -5.0))])  # not a voltage
    return Overview([power, voltage], Marks((), ()), t)


def test_the_worst_step_is_the_smallest_margin_to_either_limit() -> None:
    # margins: lowest - 0.95 = (0.03, 0.01, 0.02, nan); 1.05 - highest = (0.02, 0.04, 0.005, nan)
    assert worst_step(_overview([0.98, 0.96, 0.97, np.nan], [1.03, 1.01, 1.045, np.nan]), 0.95, 1.05) == 3.0
    # beyond a limit is worse than near one: 0.93 is 0.02 below
    assert worst_step(_overview([0.98, 0.93, 0.97], [1.03, 1.01, 1.045]), 0.95, 1.05) == 2.0
    # equal margins: the earliest
    assert worst_step(_overview([0.96, 0.96], [1.0, 1.0]), 0.95, 1.05) == 1.0
    assert worst_step(_overview([np.nan, np.nan], [np.nan, np.nan]), 0.95, 1.05) is None


def test_playback_frames_at_a_speed_and_back_to_the_start() -> None:
    times = np.round(np.arange(1, 201) * 0.1, 10)  # 20 s at 0.1 s, as the tests' runs
    assert next_play_time(times, 0.1, "10") == pytest.approx(7.1)  # 10 x 0.7 s a frame
    assert next_play_time(times, 14.1, "10") == 20.0  # the last step, not beyond it
    assert next_play_time(times, 20.0, "10") == 0.1  # then the first again
    assert next_play_time(times, 0.1, "1") == pytest.approx(0.8)
    assert next_play_time(times, 0.1, FIT) == pytest.approx(0.3)  # 19.9 s / 100 frames: two steps on
    # a speed slower than the steps still moves one step a frame
    assert next_play_time(FAULT, 5.0, "1") == 6.0
    assert next_play_time(np.array([1.0, 100.0]), 1.0, "1") == 100.0
    with pytest.raises(ValueError, match="playback speed '7'"):
        next_play_time(times, 0.1, "7")


def test_a_link_names_a_run_and_a_time() -> None:
    search = link_search("whatif/ieee13_none-001", 15.1)
    assert search == "?run=whatif%2Fieee13_none-001&t=15.1"
    assert read_link(search) == ("whatif/ieee13_none-001", 15.1)
    assert read_link("?run=ieee13_ofo") == ("ieee13_ofo", None)
    assert read_link("") is None
    assert read_link("?t=3") is None
    for bad in ("soon", "nan", "inf"):
        with pytest.raises(ValueError, match=f"the link's time t='{bad}' is not a number of seconds"):
            read_link(f"?run=a&t={bad}")

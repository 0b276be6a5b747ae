"""``n_tap_changes`` in ``summary.json``: tap operations counted per phase and unit step."""

from __future__ import annotations

from types import MappingProxyType

from openg2g.record.metrics import RunMetrics
from openg2g.scenario.loader import load_scenario
from openg2g.scenario.run import run_scenario


def test_each_unit_step_of_each_phase_counts_once():
    metrics = RunMetrics(0.95, 1.05)
    start = {"reg1": (14, 6, 15), "reg2": (0, 0, 0)}
    metrics.add_taps([start, start])
    assert metrics.n_tap_changes == 0  # the taps in force at the start are no operation
    metrics.add_taps([MappingProxyType({"reg1": (16, 6, 17), "reg2": (0, -1, 0)})])
    assert metrics.n_tap_changes == 2 + 2 + 1
    metrics.add_taps([{"reg1": (10, 6, 10), "reg2": (0, -1, 0)}, {"reg1": (10, 6, 10), "reg2": (0, -1, 0)}])
    assert metrics.n_tap_changes == 5 + 6 + 7


def test_a_run_counts_the_tap_events_it_applies():
    # ieee13 starts at taps 14/6/15; +2/0/+2 at 2 s, then down to 10/6/10 (6 + 0 + 7 steps) at 3 s
    events = (
        "events=[{t_s: 2, command: set_taps, bank: reg1, taps: [16, 6, 17]},"
        " {t_s: 3, command: set_taps, bank: reg1, taps: [10, 6, 10]}]"
    )
    loaded = load_scenario("ieee13_none", ["duration_s=4", events])
    assert run_scenario(loaded, None).summary["n_tap_changes"] == 4 + 13
    fixed = load_scenario("ieee13_fixedtap_none", ["duration_s=4"])
    assert run_scenario(fixed, None).summary["n_tap_changes"] == 0

"""Disturbances in a scenario file: their expansion into timed commands and refined windows."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from pydantic import ValidationError

from openg2g.core.commands import ApplyFault, ClearFault, SetLineInService, SetSourceVoltage
from openg2g.scenario.disturbances import DisturbanceSpec, fault_command, plan

GRID_S = F(1, 10)


def _spec(*events: dict, **window: object) -> DisturbanceSpec:
    return DisturbanceSpec(events=list(events), window=window or {})


def _timed(spec: DisturbanceSpec, duration_s: F = F(600)) -> list[tuple[F, object]]:
    return [(t, c) for t, c, _ in plan(spec, GRID_S, duration_s).commands]


FAULT = {"kind": "fault", "name": "f", "bus": "671", "type": "slg", "start_s": 10, "clearing_s": "1/10"}


def test_fault_types_are_opendss_fault_elements() -> None:
    assert fault_command("f", "671", "slg", "c", 0.5) == ApplyFault(name="f", bus1="671.3", phases=1, r_ohm=0.5)
    assert fault_command("f", "671", "ll", "bc", 0.5) == ApplyFault(
        name="f", bus1="671.2", bus2="671.3", phases=1, r_ohm=0.5
    )
    assert fault_command("f", "671", "llg", "ab", 0.5) == ApplyFault(name="f", bus1="671.1.2", phases=2, r_ohm=0.5)
    assert fault_command("f", "671", "3ph", "abc", 0.5) == ApplyFault(name="f", bus1="671.1.2.3", phases=3, r_ohm=0.5)


def test_a_fault_without_reclosing_is_cleared_once() -> None:
    apply = ApplyFault(name="f", bus1="671.1", phases=1, r_ohm=0.0001)
    assert _timed(_spec(FAULT)) == [(F(10), apply), (F(101, 10), ClearFault(name="f"))]
    record = plan(_spec(FAULT), GRID_S, F(600)).records[0]
    assert (record.start_s, record.end_s, record.outcome) == (F(10), F(101, 10), "cleared")


def test_a_permanent_fault_recloses_onto_itself_and_locks_out() -> None:
    fault = {**FAULT, "reclosing": {"line": "670671", "dead_times_s": [1, 5]}}
    apply, clear = ApplyFault(name="f", bus1="671.1", phases=1, r_ohm=0.0001), ClearFault(name="f")
    opened, closed = SetLineInService(line="670671", in_service=False), SetLineInService(line="670671", in_service=True)
    # fault 10-10.1; open 10.1-11.1; reclose onto it 11.1-11.2; open 11.2-16.2; reclose 16.2-16.3; lockout
    assert _timed(_spec(fault)) == [
        (F(10), apply),
        (F(101, 10), clear),
        (F(101, 10), opened),
        (F(111, 10), closed),
        (F(111, 10), apply),
        (F(112, 10), clear),
        (F(112, 10), opened),
        (F(162, 10), closed),
        (F(162, 10), apply),
        (F(163, 10), clear),
        (F(163, 10), opened),
    ]
    record = plan(_spec(fault), GRID_S, F(600)).records[0]
    assert (record.end_s, record.outcome) == (F(163, 10), "lockout")


def test_a_temporary_fault_gone_by_a_reclose_ends_the_sequence() -> None:
    # the arc is out 3 s after inception: the first reclose (11.1 s) finds it, the second (16.2 s) does not
    fault = {**FAULT, "persists_s": 3, "reclosing": {"line": "670671", "dead_times_s": [1, 5, 15]}}
    timed = _timed(_spec(fault))
    assert timed[-1] == (F(162, 10), SetLineInService(line="670671", in_service=True))
    assert sum(isinstance(c, ApplyFault) for _, c in timed) == 2
    assert plan(_spec(fault), GRID_S, F(600)).records[0].outcome == "reclosed"


def test_line_trip_and_source_sag_commands() -> None:
    trip = {"kind": "line_trip", "line": "632670", "start_s": 5, "reclose_after_s": 2}
    sag = {
        "kind": "source_sag",
        "start_s": 20,
        "profile": [{"after_s": 0, "v_pu": [0.5, 1.0, 1.0]}, {"after_s": "1/10", "v_pu": [1.0]}],
    }
    assert _timed(_spec(trip, sag)) == [
        (F(5), SetLineInService(line="632670", in_service=False)),
        (F(7), SetLineInService(line="632670", in_service=True)),
        (F(20), SetSourceVoltage(v_pu=(0.5, 1.0, 1.0))),
        (F(201, 10), SetSourceVoltage(v_pu=(1.0,))),
    ]
    names = [r.name for r in plan(_spec(trip, sag), GRID_S, F(600)).records]
    assert names == ["line_trip0", "source_sag1"]


def test_windows_start_before_each_instant_merge_and_end_on_grid_periods() -> None:
    # instants 10, 10.1 (fault) and 10.15 s away from the grid period's grid: one window from the
    # grid step before 10 s to 10.1 + 0.25 rounded up to 10.4 s
    fault = {**FAULT, "clearing_s": "1/10"}
    late = {"kind": "line_trip", "line": "x", "start_s": "203/20"}  # 10.15 s
    windows = plan(_spec(fault, late, after_s="1/4"), GRID_S, F(600)).windows
    assert windows == ((F(99, 10), F(104, 10)),)
    # before_s widens a window to the grid step at or before t - before_s; the end is cut at the run's end
    windows = plan(_spec({**FAULT, "start_s": 599}, before_s="3/20"), GRID_S, F(600)).windows
    assert windows == ((F(5988, 10), F(600)),)


@pytest.mark.parametrize(
    ("event", "words"),
    [
        ({**FAULT, "type": "ll", "phases": "a"}, "a ll fault needs 2 distinct phase(s)"),
        ({**FAULT, "phases": "d"}, "needs 1 distinct phase(s) of a, b, c"),
        ({**FAULT, "persists_s": 1}, "it needs reclosing"),
        ({**FAULT, "clearing_s": 0}, "must be > 0 s"),
        ({**FAULT, "r_ohm": 0}, "greater than 0"),
        ({**FAULT, "reclosing": {"line": "l", "dead_times_s": []}}, "at least 1 item"),
        ({**FAULT, "reclosing": {"line": "l", "dead_times_s": [-1]}}, "must be > 0 s"),
        ({**FAULT, "start_s": -1}, "must be >= 0 s"),
        ({"kind": "line_trip", "line": "l", "start_s": 1, "reclose_after_s": 0}, "must be > 0 s"),
        (
            {
                "kind": "source_sag",
                "start_s": 1,
                "profile": [{"after_s": 0, "v_pu": [0.5]}, {"after_s": 0, "v_pu": [1]}],
            },
            "profile.1.after_s (0) must be later",
        ),
        (
            {
                "kind": "source_sag",
                "start_s": 1,
                "profile": [{"after_s": 1, "v_pu": [0.5]}, {"after_s": 2, "v_pu": [1]}],
            },
            "profile.0.after_s must be 0",
        ),
        (
            {
                "kind": "source_sag",
                "start_s": 1,
                "profile": [{"after_s": 0, "v_pu": [0.5, 1]}, {"after_s": 1, "v_pu": [1]}],
            },
            "one voltage for every phase or three",
        ),
        ({"kind": "sag", "start_s": 1}, "kind must be one of fault, line_trip, source_sag"),
        ({**FAULT, "bogus": 1}, "Extra inputs are not permitted"),
    ],
)
def test_bad_disturbances_are_refused_saying_why(event: dict, words: str) -> None:
    with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        _spec(event)


def test_repeated_names_and_a_step_that_does_not_divide_the_grid_period_are_refused() -> None:
    with pytest.raises(ValidationError, match="unique, repeated: \\['f'\\]"):
        _spec(FAULT, {**FAULT, "start_s": 20})
    with pytest.raises(ValueError, match="must divide periods.grid_s"):
        plan(_spec(FAULT, step_s="3/100"), GRID_S, F(600))

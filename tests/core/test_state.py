"""States built a batch at a time hold what states built one by one hold, and nothing a caller can
still write."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import numpy as np
import pytest

from openg2g.core.state import BranchSet, DatacenterState, GridState

# two branches: a line with phases a, b and a single-phase transformer winding pair
BRANCHES = BranchSet(
    names=("line.l1", "transformer.t1"),
    branch=np.array([0, 0, 1, 1]),
    terminal=np.array([1, 1, 1, 2]),
    phase=("a", "b", "a", "a"),
    rating_a=np.array([100.0, 100.0, 50.0, 500.0]),
    emergency_a=np.array([150.0, 150.0, 75.0, 750.0]),
    default_rating=np.zeros(4, bool),
    default_emergency=np.zeros(4, bool),
)
BUS_PHASES = ("671.a", "671.b", "675.c")


def _fields(state: object) -> dict[str, object]:
    return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}  # type: ignore[arg-type]


def _assert_same(a: object, b: object) -> None:
    fa, fb = _fields(a), _fields(b)
    assert fa.keys() == fb.keys()
    for name, value in fa.items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, fb[name], equal_nan=True) and value.dtype == fb[name].dtype, name
            assert not value.flags.writeable, name
        else:
            assert value == fb[name], name


def test_datacenter_states_of_rows_equal_states_built_one_by_one_and_copy_a_writable_input() -> None:
    p_w = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    q_var = 0.5 * p_w
    states = DatacenterState.of_rows("s1", [0.1, 0.2], p_w, q_var, {})
    by_one = [DatacenterState("s1", t, p, q, {}) for t, p, q in zip([0.1, 0.2], p_w, q_var)]
    for state, one in zip(states, by_one, strict=True):
        _assert_same(state, one)
        assert type(state.models) is MappingProxyType
    p_w[1, 2] = -1.0  # the caller's arrays stay the caller's: the states hold copies
    q_var[0, 0] = -1.0
    assert states[1].p_w.tolist() == [4.0, 5.0, 6.0] and by_one[1].p_w.tolist() == [4.0, 5.0, 6.0]
    assert states[0].q_var.tolist() == [0.5, 1.0, 1.5] and states[1].power_w == 15.0
    with pytest.raises(ValueError, match=r"need shape \(3, 3\), got \(2, 3\)"):
        DatacenterState.of_rows("s1", [0.1, 0.2, 0.3], p_w, q_var, {})


def _table() -> np.ndarray:
    # per row: 3 voltages, P a b c, Q a b c, 4 conductor currents, 2 branch loadings
    return np.array(
        [
            [1.01, 0.99, 1.02, 1e5, 2e5, 3e5, 1e4, 2e4, 3e4, 10.0, 20.0, 30.0, 40.0, 20.0, 60.0],
            [1.00, 0.98, 1.03, 4e5, 5e5, 6e5, 4e4, 5e4, 6e4, 11.0, 21.0, 31.0, 41.0, 21.0, 62.0],
        ]
    )


def test_grid_states_of_table_are_its_row_segments_and_equal_states_built_one_by_one() -> None:
    table = _table()
    energized = np.array([True, True, False])
    taps = {"reg1": (3, -2, 0)}
    states = GridState.of_table([0.1, 0.2], BUS_PHASES, table, [7.0, 8.0], taps, BRANCHES, energized=energized)
    for t, row, loss, state in zip([0.1, 0.2], _table(), [7.0, 8.0], states, strict=True):
        one = GridState(
            t, BUS_PHASES, row[:3], taps, row[3:6], row[6:9], loss, True, BRANCHES, row[9:13], row[13:],
            energized=energized,
        )  # fmt: skip
        _assert_same(state, one)
        assert state.bus_phases is BUS_PHASES and state.branches is BRANCHES
    table[:] = 0.0  # a writable table is copied once, so the states keep their values
    energized[0] = False
    assert states[1].v_pu.tolist() == [1.00, 0.98, 1.03] and states[1].branch_loading_pct.tolist() == [21.0, 62.0]
    assert states[0].p_sub_w.tolist() == [1e5, 2e5, 3e5] and states[0].energized.tolist() == [True, True, False]
    assert states[0].taps["reg1"] == (3, -2, 0) and states[0].voltage("675.c") == 1.02


def test_grid_states_of_table_name_a_table_or_mask_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"table of shape \(2, 15\) and 2 losses needed.*got shape \(2, 14\)"):
        GridState.of_table([0.1, 0.2], BUS_PHASES, _table()[:, 1:], [7.0, 8.0], {}, BRANCHES)
    with pytest.raises(ValueError, match=r"2 losses needed.*and 1 losses"):
        GridState.of_table([0.1, 0.2], BUS_PHASES, _table(), [7.0], {}, BRANCHES)
    with pytest.raises(ValueError, match=r"energized needs one value per bus-phase \(3\), got shape \(2,\)"):
        GridState.of_table([0.1, 0.2], BUS_PHASES, _table(), [7.0, 8.0], {}, BRANCHES, energized=np.ones(2, bool))

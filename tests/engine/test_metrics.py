"""Run metrics by hand: Vmin/Vmax and the bus-phases where they occur."""

from __future__ import annotations

import numpy as np
import pytest

from openg2g.core.state import DatacenterSeries, ModelSeries
from openg2g.record.metrics import RunMetrics


def test_extreme_voltages_name_their_bus_phase_earliest_first() -> None:
    m = RunMetrics(0.95, 1.05, bus_phases=("632.a", "675.c", "611.c"))
    m.add_grid_block(np.array([[1.00, 0.97, 1.06], [0.96, 1.02, 0.99]]), np.array([True, True]), 1.0)
    # a later block: a tie with Vmin (earliest kept), a NaN step (skipped), a new Vmax
    m.add_grid_block(
        np.array([[0.96, 1.00, 1.00], [np.nan] * 3, [1.00, 1.07, 1.00]]), np.array([True, False, True]), 1.0
    )
    s = m.summary()
    assert (s["v_min_pu"], s["v_min_bus_phase"]) == (0.96, "632.a")
    assert (s["v_max_pu"], s["v_max_bus_phase"]) == (1.07, "675.c")
    # violation by hand, 1 s steps: 0.01 (611.c at 1.06) + 0.02 (675.c at 1.07); 0.96-1.02 are inside
    assert s["violation_integral_pu_s"] == pytest.approx(0.03, abs=1e-15)


def test_without_names_the_bus_phases_are_none() -> None:
    m = RunMetrics(0.95, 1.05)
    m.add_grid_block(np.array([[0.9, 1.1]]), np.array([True]), 1.0)
    assert m.summary()["v_min_bus_phase"] is None and m.summary()["v_max_pu"] == 1.1


def test_a_metrics_start_counts_the_steps_from_it_by_hand() -> None:
    m = RunMetrics(0.95, 1.05, ("line.x",), bus_phases=("632.a", "675.c"), start_s=2.0)
    # steps at 1, 2, 3 s (1 s each): the step at 1 s (0.10 below, 0.05 above) is not counted
    m.add_grid_block(np.array([[0.85, 1.10], [0.94, 1.00]]), np.array([True, True]), 1.0, [1.0, 2.0])
    m.add_grid_block(np.array([[1.00, 1.07]]), np.array([True]), 1.0, [3.0])
    m.add_branch_block(np.array([[150.0], [100.0], [110.0]]), 1.0, [1.0, 2.0, 3.0])
    s = m.summary()
    assert s["undervoltage_integral_pu_s"] == pytest.approx(0.01, abs=1e-12)
    assert s["overvoltage_integral_pu_s"] == pytest.approx(0.02, abs=1e-12)
    assert s["violation_time_s"] == 2.0 and s["grid_steps"] == 3
    assert (s["v_min_pu"], s["v_min_bus_phase"]) == (0.94, "632.a")
    assert (s["v_max_pu"], s["v_max_bus_phase"]) == (1.07, "675.c")
    assert s["overload_integral_pct_s"] == pytest.approx(10.0) and s["max_loading_pct"] == 110.0
    assert s["metrics_start_s"] == 2.0


def _site_block(t_s: list[float], batches: dict[str, list[int]]) -> DatacenterSeries:
    """A site ``dc1`` over steps at ``t_s`` whose models hold the given batch sizes (nothing else counts)."""
    k = len(t_s)
    zeros = np.zeros(k)
    models = {
        name: ModelSeries(name, zeros + 1, np.array(b), zeros, zeros, zeros, zeros, zeros + np.nan)
        for name, b in batches.items()
    }
    flat = np.zeros((k, 3))
    return DatacenterSeries("dc1", np.array(t_s), flat, flat, models, zeros, np.ones(k, bool), np.ones(k, bool))


def test_batch_changes_and_reversals_per_model_by_hand() -> None:
    m = RunMetrics(0.95, 1.05)
    # a: 128 -> 64 -> 128 (a reversal at 2 s) -> 256 (same way) -> 64 (reversal at 70 s), split over
    # two blocks so the change at the boundary (70 s) is counted once; b never changes
    m.add_datacenter_block([_site_block([0.0, 1.0, 2.0, 3.0], {"a": [128, 64, 128, 256], "b": [8] * 4})], 1.0)
    m.add_datacenter_block([_site_block([70.0, 71.0, 72.0], {"a": [64, 32, 64], "b": [8] * 3})], 1.0)
    s = m.summary()
    # changes 1, 2, 3, 70 (64), 71 (32), 72 (64): 6; reversals at 2, 70 and 72 s
    assert s["n_batch_changes"] == 6
    assert s["batch_changes_by_model"] == {"dc1": {"a": 6, "b": 0}}
    assert s["batch_reversals_by_model"] == {"dc1": {"a": 3, "b": 0}}
    # 2 s is more than 60 s before 70 s: at most 2 reversals (70, 72 s) within one minute
    assert s["max_batch_reversals_per_min"] == 2 and s["n_batch_reversals"] == 3
    # changes at 1, 2, 3 s, then at 70, 71, 72 s: 3 in any minute (1 s and 70 s are 69 s apart)
    assert s["max_batch_changes_per_min"] == 3
    assert s["max_batch_changes_per_min_by_model"] == {"dc1": {"a": 3, "b": 0}}


def test_changes_per_minute_window_is_half_open() -> None:
    m = RunMetrics(0.95, 1.05)
    # changes at 1, 2 and 61 s: 61 - 1 = 60 s drops the first (window [t - 60, t) excluded), so 2
    m.add_datacenter_block([_site_block([0.0, 1.0, 2.0, 60.0, 61.0], {"a": [8, 16, 32, 32, 64]})], 1.0)
    s = m.summary()
    assert s["max_batch_changes_per_min"] == 2 and s["n_batch_reversals"] == 0
    # steps of 0.1 s: 1281 x 0.1 - 681 x 0.1 falls short of 60 by float rounding, still 60 s apart
    m = RunMetrics(0.95, 1.05)
    times = [k * 0.1 for k in (680, 681, 1280, 1281)]
    m.add_datacenter_block([_site_block(times, {"a": [8, 16, 16, 32]})], 0.1)
    assert m.summary()["max_batch_changes_per_min"] == 1

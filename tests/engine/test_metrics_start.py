"""``outputs.metrics_start_s`` on a real run, checked against the run's own voltage table: the
integral counted from t equals the whole run's minus the part before t.

ieee13_none for 10 s with the regulator at [8, 6, 8] (the site's 7,200 GPUs pull the far buses
below 0.95 pu) until 4 s, when the scenario's own taps [14, 6, 15] come back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.core.errors import ScenarioError
from openg2g.scenario.loader import load_scenario
from openg2g.scenario.run import run_scenario

OVERRIDES = (
    "duration_s=10",
    "outputs.plots=false",
    "grid.regulators.reg1.taps=[8, 6, 8]",
    "events=[{t_s: 4, command: set_taps, bank: reg1, taps: [14, 6, 15]}]",
)


def _violation_by_step(out: Path) -> pd.Series:
    """Per grid time, the summed distance of the monitored bus-phases outside 0.95-1.05 pu."""
    v = pd.read_parquet(out / "grid_voltages")
    outside = np.maximum(0.95 - v["v_pu"], 0.0) + np.maximum(v["v_pu"] - 1.05, 0.0)
    return outside.groupby(v["t_s"]).sum()


def test_violations_before_the_start_are_not_counted(tmp_path: Path) -> None:
    whole = run_scenario("ieee13_none", tmp_path / "whole", OVERRIDES).summary
    settled = run_scenario("ieee13_none", tmp_path / "settled", (*OVERRIDES, "outputs.metrics_start_s=4")).summary
    by_step = _violation_by_step(tmp_path / "whole") * 0.1  # 0.1 s grid steps
    before = float(by_step[by_step.index < 4].sum())
    assert before > 0.5  # the early under-voltage the window is there to leave out
    assert whole["violation_integral_pu_s"] == pytest.approx(float(by_step.sum()), rel=1e-9)
    assert settled["violation_integral_pu_s"] == pytest.approx(whole["violation_integral_pu_s"] - before, abs=1e-9)
    assert settled["metrics_start_s"] == 4.0 and "metrics_start_s" not in whole
    # the run itself is the same: same tables, same energy, only the counted window differs
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "whole" / "grid_voltages"), pd.read_parquet(tmp_path / "settled" / "grid_voltages")
    )
    assert settled["energy_mwh"] == whole["energy_mwh"] and settled["grid_steps"] == whole["grid_steps"]
    assert json.loads((tmp_path / "settled" / "summary.json").read_text())["metrics_start_s"] == 4.0


def test_a_start_at_or_after_the_end_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"outputs.metrics_start_s \(10\) must be before the end"):
        load_scenario("ieee13_none", ("duration_s=10", "outputs.metrics_start_s=10"))

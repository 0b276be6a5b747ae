"""Per-bus-phase extremes streamed from ``grid_voltages`` parts give the answer of the whole table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.plot import extremes
from openg2g.plot.extremes import bus_phase_extremes, extremes_of, voltages_at
from openg2g.record.writer import TableWriter

NAMES = ["650.a", "650.b", "671.a", "671.b", "671.c"]


def _write_run(out_dir: Path, v_pu: np.ndarray, steps_per_part: int) -> None:
    """A ``grid_voltages`` table as a run writes it: one chunk per 0.1 s step, a part every
    ``steps_per_part`` steps."""
    writer = TableWriter(out_dir / "grid_voltages", categories={"bus_phase": NAMES})
    codes = np.arange(len(NAMES), dtype=np.int32)
    for k, row in enumerate(v_pu):
        writer.append({"t_s": np.full(len(NAMES), round(0.1 * (k + 1), 1)), "bus_phase": codes, "v_pu": row})
        if (k + 1) % steps_per_part == 0:
            writer.flush()
    writer.flush()


def test_streamed_extremes_match_the_whole_table_with_the_first_time_of_a_tie(tmp_path: Path, monkeypatch) -> None:
    rng = np.random.default_rng(3)
    v = np.round(rng.uniform(0.93, 1.06, size=(50, len(NAMES))), 3)  # rounded: ties across parts
    v[7, 2] = np.nan  # a step that did not converge at one bus-phase
    v[:, 4] = np.nan  # a bus-phase never solved
    _write_run(tmp_path, v, steps_per_part=7)
    monkeypatch.setattr(extremes, "BATCH_ROWS", 11)  # batches that split steps
    got = bus_phase_extremes(tmp_path).set_index("bus_phase")
    t = np.round(0.1 * np.arange(1, 51), 1)
    for j, name in enumerate(NAMES[:4]):
        col = v[:, j]
        assert got.at[name, "v_min_pu"] == np.nanmin(col)
        assert got.at[name, "t_min_s"] == t[np.nanargmin(col)]  # nanargmin: the first on a tie
        assert got.at[name, "v_max_pu"] == np.nanmax(col)
        assert got.at[name, "t_max_s"] == t[np.nanargmax(col)]
    assert got.loc["671.c"].isna().all()
    whole = pd.read_parquet(tmp_path / "grid_voltages")
    pd.testing.assert_frame_equal(extremes_of(whole).set_index("bus_phase"), got)


def test_a_time_range_and_one_step(tmp_path: Path) -> None:
    v = np.tile(np.linspace(0.96, 1.0, len(NAMES)), (20, 1)) + np.arange(20)[:, None] * 1e-3
    _write_run(tmp_path, v, steps_per_part=6)
    window = bus_phase_extremes(tmp_path, (0.5, 1.0)).set_index("bus_phase")
    assert window.at["650.a", "v_min_pu"] == pytest.approx(0.96 + 4e-3) and window.at["650.a", "t_min_s"] == 0.5
    assert window.at["650.a", "v_max_pu"] == pytest.approx(0.96 + 9e-3) and window.at["650.a", "t_max_s"] == 1.0
    step = voltages_at(tmp_path, 1.3)
    assert list(step["bus_phase"].astype(str)) == NAMES and (step["t_s"] == 1.3).all()
    np.testing.assert_array_equal(step["v_pu"].to_numpy(), v[12])
    assert voltages_at(tmp_path, 99.0).empty
    assert bus_phase_extremes(tmp_path / "elsewhere").empty

"""Output files under faults: hidden temporary parts, reruns into the same folder, a full disk."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from openg2g.core.errors import OutputError
from openg2g.engine import recorder
from openg2g.engine.simulation import Simulation
from tests.engine.toys import KilowattSite, TwoBusGrid, make_loaded

TABLES = ("datacenter", "models", "grid")


def _sim(out: Path, duration_s: float = 5, flush_every_s: float = 1) -> Simulation:
    loaded = make_loaded(duration_s=duration_s, outputs={"plots": False, "flush_every_s": flush_every_s})
    return Simulation(loaded, out, components=([KilowattSite("dc", [])], TwoBusGrid([]), []))


def test_a_left_over_temporary_part_does_not_break_reading(tmp_path: Path) -> None:
    _sim(tmp_path).run()
    (tmp_path / "grid" / ".part-00099.parquet.tmp").write_bytes(b"half a parquet file")  # a kill mid-write
    grid = pd.read_parquet(tmp_path / "grid")
    assert len(grid) == 50 and grid["t_s"].iloc[-1] == 5.0


def test_a_rerun_into_the_same_folder_replaces_the_earlier_tables(tmp_path: Path) -> None:
    _sim(tmp_path, duration_s=5).run()
    summary = _sim(tmp_path, duration_s=2).run()
    for table in TABLES:
        assert pd.read_parquet(tmp_path / table)["t_s"].max() == summary["sim_time_s"] == 2.0
    assert len(pd.read_parquet(tmp_path / "grid")) == 20


def test_a_full_disk_fails_the_run_with_all_tables_ending_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write = pq.write_table

    def disk_fills_after_two_seconds(table, where, *args, **kwargs):  # type: ignore[no-untyped-def]
        if Path(where).parent.name == "grid" and table["t_s"].to_pylist()[0] > 2.0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(table, where, *args, **kwargs)

    monkeypatch.setattr(recorder.pq, "write_table", disk_fills_after_two_seconds)
    with pytest.raises(OutputError, match="No space left on device"):
        _sim(tmp_path).run()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed" and "No space left on device" in summary["error"]
    ends = {table: pd.read_parquet(tmp_path / table)["t_s"].max() for table in TABLES}
    assert set(ends.values()) == {2.0}  # the flush at 3 s made no table longer than the others
    assert not list(tmp_path.rglob("*.tmp"))

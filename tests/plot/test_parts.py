"""Each table part's time range, from its footer or from the footers kept beside the parts
(``PARTS_CACHE``): the same parts either way, a part changed since read again, a kept file that
is not one of ours ignored."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from openg2g.core.errors import G2GError
from openg2g.plot import parts as parts_module
from openg2g.plot.parts import PARTS_CACHE, table_parts


def _part(table: Path, k: int, times: list[float]) -> None:
    table.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"t_s": times, "v_pu": [1.0] * len(times)}).to_parquet(table / f"part-{k:05d}.parquet")


def _ranges(out: Path, t_range: tuple[float, float] | None = None) -> list[tuple[str, float, float, int]]:
    return [(p.path.name, p.t_min_s, p.t_max_s, p.rows) for p in table_parts(out, "grid_voltages", t_range)]


def test_a_new_reader_takes_the_kept_ranges_and_reads_only_a_changed_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "grid_voltages"
    for k in range(3):
        _part(table, k, [k * 1.0, k * 1.0 + 0.5])
    _part(table, 3, [])  # a part without rows is kept as such and never listed
    parts_module._parts.cache_clear()
    first = _ranges(tmp_path)
    assert first == [(f"part-{k:05d}.parquet", k * 1.0, k * 1.0 + 0.5, 2) for k in range(3)]
    kept = json.loads((table / PARTS_CACHE).read_text())
    assert sorted(kept) == [f"part-{k:05d}.parquet" for k in range(4)] and kept["part-00003.parquet"][2:] == [
        None,
        None,
        0,
    ]
    parts_module._parts.cache_clear()  # a new reader: nothing in memory
    read: list[Path] = []
    footer = parts_module._footer

    def counted(path: Path) -> tuple[float | None, float | None, int]:
        read.append(path)
        return footer(path)

    monkeypatch.setattr(parts_module, "_footer", counted)
    assert _ranges(tmp_path) == first and read == []  # every range from the kept file
    _part(table, 1, [1.0, 1.25, 1.75])  # part 1 rewritten longer (a running run's last part)
    os.utime(table / "part-00001.parquet", ns=(1, 1))  # a new modification time whatever the clock
    assert _ranges(tmp_path, (1.6, 1.8)) == [("part-00001.parquet", 1.0, 1.75, 3)]
    assert read == [table / "part-00001.parquet"]


@pytest.mark.parametrize(
    "kept",
    [
        "not json",
        "[1, 2]",
        json.dumps({"part-00000.parquet": "0.0"}),
        json.dumps({"part-00000.parquet": [0, 0, 0.0, 9.0, 2]}),  # another modification time and size
    ],
)
def test_a_kept_file_that_does_not_match_the_parts_is_read_past(tmp_path: Path, kept: str) -> None:
    table = tmp_path / "grid_voltages"
    _part(table, 0, [0.0, 0.5])
    (table / PARTS_CACHE).write_text(kept)
    parts_module._parts.cache_clear()
    assert _ranges(tmp_path) == [("part-00000.parquet", 0.0, 0.5, 2)]
    stat = (table / "part-00000.parquet").stat()
    assert json.loads((table / PARTS_CACHE).read_text()) == {
        "part-00000.parquet": [stat.st_mtime_ns, stat.st_size, 0.0, 0.5, 2]
    }


def test_a_forged_entry_with_the_parts_stamp_is_checked_for_its_form(tmp_path: Path) -> None:
    table = tmp_path / "grid_voltages"
    _part(table, 0, [0.0, 0.5])
    stat = (table / "part-00000.parquet").stat()
    for entry in ([stat.st_mtime_ns, stat.st_size, 0.5, 0.0, 2], [stat.st_mtime_ns, stat.st_size, "a", 1.0, 2],
                  [stat.st_mtime_ns, stat.st_size, 0.0, 0.5, True], [stat.st_mtime_ns, stat.st_size, 0.0, None, 2]):  # fmt: skip
        (table / PARTS_CACHE).write_text(json.dumps({"part-00000.parquet": entry}))
        parts_module._parts.cache_clear()
        assert _ranges(tmp_path) == [("part-00000.parquet", 0.0, 0.5, 2)], entry


def test_a_folder_that_cannot_keep_the_file_still_answers(tmp_path: Path) -> None:
    table = tmp_path / "grid_voltages"
    _part(table, 0, [0.0, 0.5])
    (table / PARTS_CACHE).mkdir()  # the kept file's name taken by a folder: it cannot be written
    parts_module._parts.cache_clear()
    assert _ranges(tmp_path) == [("part-00000.parquet", 0.0, 0.5, 2)]
    assert _ranges(tmp_path, (0.6, 0.7)) == []


def test_a_part_without_time_statistics_is_named(tmp_path: Path) -> None:
    table = tmp_path / "grid_voltages"
    table.mkdir()
    pq.write_table(pq.read_table(_frame_file(tmp_path)), table / "part-00000.parquet", write_statistics=False)
    parts_module._parts.cache_clear()
    with pytest.raises(G2GError, match=r"part-00000.parquet: row group 0 has no t_s statistics"):
        table_parts(tmp_path, "grid_voltages")
    assert not (table / PARTS_CACHE).exists()


def _frame_file(folder: Path) -> Path:
    path = folder / "frame.parquet"
    pd.DataFrame({"t_s": [0.2], "v_pu": [1.0]}).to_parquet(path)
    return path

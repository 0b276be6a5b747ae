"""The study views' data: a hosting-capacity study and a benchmark (``studies_dir``), a siting study
(``siting_dir``) and a load-loss study (``load_loss_dir``) made by their own commands, read back
as the app shows them."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from openg2g.app import views
from openg2g.app.data import AppError, RunStore
from openg2g.app.studies import (
    FAILED,
    HOSTED,
    INFEASIBLE,
    NOT_CONVERGED,
    StudyEntry,
    hosting_map,
    hosting_rows,
    list_studies,
    read_leaderboard,
    read_load_loss,
    resolve_study,
    siting_map,
    sort_rows,
    study_run,
)


def _hosting(root: Path, controller: str | None = None):
    store = RunStore(root)
    run = store.get(study_run(root, "hosting"))
    positions = store.positions(run)
    assert positions is not None
    return hosting_map(root, "hosting", controller, run, positions)


@pytest.mark.slow
def test_studies_are_found_by_their_files(studies_dir: Path) -> None:
    assert list_studies(studies_dir) == [StudyEntry("bench", "benchmark"), StudyEntry("hosting", "hosting_capacity")]
    assert list_studies(studies_dir / "bench") == [StudyEntry(".", "benchmark")]
    with pytest.raises(AppError, match="no benchmark study 'hosting'"):
        resolve_study(studies_dir, "hosting", "benchmark")
    with pytest.raises(AppError, match="not inside the runs folder"):
        resolve_study(studies_dir / "hosting", "../bench", "benchmark")


@pytest.mark.slow
def test_map_mw_per_bus_is_the_study_table(studies_dir: Path) -> None:
    table = pd.read_parquet(studies_dir / "hosting" / "hosting_capacity.parquet")
    hmap = _hosting(studies_dir)
    assert hmap.controller == "none" and hmap.controllers == ("none",)
    # 675 and 692 host a range of sizes; at 634 the over-voltage floor lies above the
    # under-voltage cap (empty_range), so it hosts none and is drawn as infeasible, not as 0 MW
    hosted = table[table["capacity_blocks"] > 0]
    assert sorted(hosted["bus"]) == ["675", "692"]
    assert hmap.capacity_mw() == dict(zip(hosted["bus"], hosted["capacity_peak_mw"]))
    assert hmap.unhosted() == {"634": INFEASIBLE}
    assert bool(table.set_index("bus").at["634", "empty_range"])
    figure = views.hosting_figure(hmap)
    coloured = next(t for t in figure.data if t.name == "hosted MW (peak)")
    assert dict(zip(coloured.text, coloured.marker.color)) == hmap.capacity_mw()
    infeasible = next(t for t in figure.data if t.name == INFEASIBLE)
    assert list(infeasible.text) == ["634"]
    # the limiting constraint per bus, as the study table names it
    rows = hmap.rows.set_index("bus")
    for bus in ("675", "692"):
        source = table.set_index("bus").loc[bus]
        assert rows.at[bus, "limit"] == (
            f"{source['binding_limit']} at {source['binding_element']}; "
            f"{source['lower_limit']} at {source['lower_element']} sets the smallest size"
        )
    assert math.isnan(rows.at["634", "capacity_mw"])
    _, cells = views.hosting_table(hmap)
    assert [c["capacity_mw"] for c in cells if c["bus"] == "634"] == [None]


@pytest.mark.slow
def test_a_siting_study_is_shown_on_the_feeder_map_with_its_best_placement(siting_dir: Path) -> None:
    assert list_studies(siting_dir) == [StudyEntry("siting", "siting")]
    table = pd.read_parquet(siting_dir / "siting" / "siting.parquet")
    store = RunStore(siting_dir)
    run = store.get(study_run(siting_dir, "siting", "siting"))
    positions = store.positions(run)
    assert positions is not None
    smap = siting_map(siting_dir, "siting", None, run, positions)
    assert smap.controller == "none" and smap.controllers == ("none",)
    # the map: each candidate's violation integral with the whole site on it, as the study table has it
    singles = table[table["kind"] == "single"]
    assert smap.figure_by_bus() == dict(zip(singles["bus_a"], singles["violation_integral_pu_s"]))
    assert sorted(smap.figure_by_bus()) == ["634", "675", "692"] and smap.unplaced() == {}
    figure = views.siting_figure(smap)
    coloured = next(t for t in figure.data if t.name == "violation integral, site on the bus")
    assert dict(zip(coloured.text, coloured.marker.color)) == smap.figure_by_bus()
    assert {b: tuple(xy) for b, xy in zip(coloured.text, zip(coloured.x, coloured.y))} == {
        b: positions[b] for b in coloured.text
    }
    # the best placement (the study's rank 1, a bus or a pair) ringed
    first = table.sort_values("rank").iloc[0]
    best = tuple(b for b in (first["bus_a"], first["bus_b"]) if isinstance(b, str))
    assert smap.best() == best
    ring = next(t for t in figure.data if str(t.name).startswith("best placement"))
    assert list(zip(ring.x, ring.y)) == [positions[b] for b in best] and ring.name.endswith(", ".join(best))
    # the table: every placement in rank order, figures to four digits
    columns, rows = views.siting_table(smap)
    assert [r["placement"] for r in rows] == list(table.sort_values("rank")["placement"])
    assert len(rows) == 6 and [r["rank"] for r in rows] == [1, 2, 3, 4, 5, 6]
    by_placement = table.set_index("placement")
    for r in rows:
        assert r["violation_integral_pu_s"] == float(
            f"{by_placement.at[r['placement'], 'violation_integral_pu_s']:.4g}"
        )
        assert r["run_id"] == by_placement.at[r["placement"], "run_id"]
    assert [c["id"] for c in columns][:2] == ["rank", "placement"]
    with pytest.raises(AppError, match="no controller 'ofo'; it has none"):
        siting_map(siting_dir, "siting", "ofo", run, positions)


def test_hosting_states_of_buses_that_host_nothing() -> None:
    base = {
        "controller": "none",
        "capacity_blocks": 0,
        "capacity_gpus": 0,
        "capacity_peak_mw": 0.0,
        "min_peak_mw": math.nan,
        "empty_range": False,
        "capped": False,
        "binding_limit": None,
        "binding_element": None,
        "lower_limit": None,
        "lower_element": None,
        "baseline_limits": None,
        "baseline_element": None,
        "first_failing_blocks": 1,
        "n_runs": 3,
        "error": None,
    }
    table = pd.DataFrame(
        [
            {**base, "bus": "a", "binding_limit": "failed"},
            {**base, "bus": "b", "error": "limits not monotone in the site's size"},
            {
                **base,
                "bus": "c",
                "baseline_limits": "undervoltage",
                "baseline_element": "611.c",
                "first_failing_blocks": 0,
            },
            {**base, "bus": "d", "capacity_blocks": 4, "capacity_gpus": 640, "capacity_peak_mw": 1.5, "capped": True},
        ]
    )
    rows = hosting_rows(table).set_index("bus")
    assert list(rows["state"]) == [NOT_CONVERGED, FAILED, INFEASIBLE, HOSTED]
    assert rows["capacity_mw"].isna().tolist() == [True, True, True, False]
    assert rows.at["c", "limit"] == "the feeder breaks undervoltage at 611.c without the site"
    assert rows.at["b", "limit"] == "limits not monotone in the site's size"
    assert rows.at["d", "capacity_mw"] == 1.5


@pytest.mark.slow
def test_leaderboard_order_is_the_ranking_file(studies_dir: Path) -> None:
    folder = studies_dir / "bench"
    board = read_leaderboard(studies_dir, "bench")
    assert list(board.board["controller"]) == list(pd.read_csv(folder / "leaderboard.csv")["controller"])
    markdown = [line.split("|")[1:3] for line in (folder / "leaderboard.md").read_text().splitlines()[2:]]
    assert list(board.board["rank_text"]) == [rank.strip() for rank, _ in markdown]
    # rule_632 never acts (bus 632 stays inside the band): it ties with no control, shown =3
    assert dict(zip(board.board["controller"], board.board["rank_text"])) == {
        "rule_based": "1",
        "pid": "2",
        "none": "=3",
        "rule_632": "=3",
    }
    assert board.n_shared == 2
    assert board.scores == (
        "violation_integral_pu_s",
        "violation_time_s",
        "throughput_loss_pct",
        "itl_deadline_miss_pct",
        "n_tap_changes",
    )
    columns, rows, _ = views.leaderboard_table(board)
    assert [r["rank"] for r in rows] == ["1", "2", "=3", "=3"]
    assert columns[3]["name"] == "violation (pu.s), 2 shared cases"
    # the per-case rows link each run folder, which the runs view lists by that id
    assert sorted(board.cases["run"]) == sorted(
        f"bench/runs/{case}-{ctrl}"
        for case in ("t13-ref", "t13-v0")
        for ctrl in ("none", "rule_based", "pid", "rule_632")
    )
    for run_id in board.cases["run"]:
        assert (studies_dir / run_id / "summary.json").is_file()


def test_sort_rows_uses_the_rank_position_and_puts_empty_cells_last() -> None:
    rows = [
        {"rank": "1", "_rank": 0, "score": 0.5},
        {"rank": "=2", "_rank": 1, "score": None},
        {"rank": "=2", "_rank": 2, "score": 0.1},
        {"rank": "10", "_rank": 3, "score": 0.3},
    ]
    by_rank = sort_rows(rows, [{"column_id": "rank", "direction": "desc"}])
    assert [r["_rank"] for r in by_rank] == [3, 2, 1, 0]
    by_score = sort_rows(rows, [{"column_id": "score", "direction": "asc"}])
    assert [r["_rank"] for r in by_score] == [2, 3, 0, 1]
    assert [r["_rank"] for r in sort_rows(rows, [{"column_id": "score", "direction": "desc"}])] == [0, 3, 2, 1]
    assert sort_rows(rows, []) == rows


@pytest.mark.slow
def test_a_load_loss_study_is_shown_as_its_tables(load_loss_dir: Path) -> None:
    assert list_studies(load_loss_dir) == [StudyEntry("ll", "load_loss")]
    folder = load_loss_dir / "ll"
    table = pd.read_parquet(folder / "load_loss.parquet")
    study = read_load_loss(load_loss_dir, "ll")
    assert list(study.settings["setting"]) == ["whole", "half", "stays"] and study.searched
    assert study.limits == {"f_max_hz": 60.25} and study.voltages_from_s == 1.1
    for column in ("mw_before", "load_lost_mw", "holdable_mw", "frequency_zenith_hz", "v_min_pu"):
        assert study.settings[column].tolist() == table[column].tolist(), column
    assert list(study.settings["run"]) == [f"ll/runs/{s}-base" for s in ("whole", "half", "stays")]
    for run_id in study.settings["run"]:
        assert (load_loss_dir / run_id / "summary.json").is_file()
    evaluations = pd.read_parquet(folder / "evaluations.parquet")
    assert len(study.points) == len(evaluations) and study.points["within_limits"].tolist() == list(
        evaluations["within_limits"]
    )
    # the bars: each site's MW lost stacked per setting, the loss at once, the largest within the limits
    bars = views.load_loss_bars_figure(study)
    sites = pd.read_parquet(folder / "load_loss_sites.parquet")
    site_bar = next(t for t in bars.data if t.name == "dc")
    assert list(site_bar.x) == ["whole", "half", "stays"] and list(site_bar.y) == sites["mw_lost"].tolist()
    at_once = next(t for t in bars.data if t.name == "lost at once")
    assert list(at_once.y) == table["load_lost_mw"].tolist()
    held = next(t for t in bars.data if t.name == "largest loss within the limits")
    assert list(held.y) == table["holdable_mw"].tolist()
    assert held.text[2].startswith("\u2265") and not held.text[0].startswith("\u2265")  # stays is capped
    # the frequency: one series per setting, every complete run, the limit drawn
    frequency = views.load_loss_frequency_figure(study)
    assert [t.name for t in frequency.data] == ["whole", "half", "stays"]
    assert sum(len(t.x) for t in frequency.data) == len(evaluations)
    assert [s.y0 for s in frequency.layout.shapes] == [60.25]
    # the table: a row per setting linking its run, the capped search marked and sorted by its number
    columns, rows, note = views.load_loss_table(study)
    assert [r["setting"] for r in rows] == ["whole", "half", "stays"]
    assert rows[0]["run"] == "[ll/runs/whole-base](#runs)" and rows[0]["id"] == "ll/runs/whole-base"
    assert rows[2]["holdable_mw"].startswith("\u2265") and isinstance(rows[2]["_holdable_mw"], float)
    assert "f max 60.25 Hz" in note and "from 1.1 s" in note
    assert [c["id"] for c in columns][:4] == ["setting", "status", "mw_before", "load_lost_mw"]
    by_size = sort_rows(rows, [{"column_id": "holdable_mw", "direction": "asc"}])
    assert [r["_holdable_mw"] for r in by_size] == sorted(r["_holdable_mw"] for r in rows)

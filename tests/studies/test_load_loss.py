"""``openg2g study load-loss``: the study file's refusals, the run overrides, the limits, and real
studies: the largest loss within a frequency limit against Anderson and Mirheydar's closed form
(the stiff case of :mod:`tests.studies.load_loss_cases`), resuming, and the tables of a short
``ieee13_fault_ups``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from openg2g.cli.main import main
from openg2g.grid.frequency import SystemFrequencySpec, reheat_step_response
from openg2g.studies import load_study, run_load_loss
from openg2g.studies.common import read_base
from openg2g.studies.load_loss import (
    broken_limits,
    ride_through_settings,
    scale_settings,
    search_multipliers,
)
from openg2g.studies.spec import HoldableSearch, LoadLossLimits, LoadLossSpec
from openg2g.sweep.engines import LocalEngine
from openg2g.sweep.spec import SweepError
from tests.studies.load_loss_cases import (
    BASE_MW,
    F_MAX_HZ,
    STIFF_HOLDABLE,
    stiff_base,
    write_ieee13_study,
    write_stiff_study,
)

# ------------------------------------------------------------------------------------ the study file


def _problems(path: Path) -> list[tuple[str, str]]:
    with pytest.raises(SweepError) as info:
        load_study(path)
    return info.value.problems


BAD_FIELDS = [
    ({"colour": "red"}, "colour", "Extra inputs"),
    ({"settings": {}}, "settings", "at least 1"),
    ({"settings": {"a/b": {}}}, "settings", "letters, digits"),
    ({"settings": {"x": {"sites": ["dc"]}}}, "settings.x", "give the ride_through too"),
    (
        {
            "settings": {
                "x": {
                    "ride_through": {
                        "blocks": [
                            {"name": "b", "fraction": 1, "action": "trip", "under_voltage": [[0.5, 1], [0.7, 0.5]]}
                        ]
                    }
                }
            }
        },
        "settings.x.ride_through.blocks.0.under_voltage",
        "not monotone",
    ),
    ({"limits": {}}, "limits", "give at least one"),
    ({"limits": {"f_min_hz": 60.5, "f_max_hz": 60.2}}, "limits", "must be below f_max_hz"),
    ({"limits": {"v_min_pu": 1.2}}, "limits.v_min_pu", "less than 1"),
    ({"limits": {"f_max_hz": float("nan")}}, "limits.f_max_hz", "finite"),
    ({"limits": {"f_max_hz": 60.2, "voltage_after_s": -1}}, "limits.voltage_after_s", ">= 0"),
    ({"holdable": {"multiplier_min": 2, "multiplier_max": 1}}, "holdable", "must be below multiplier_max"),
    ({"holdable": {"tolerance": 1e-4}}, "holdable.tolerance", "greater than or equal to 0.001"),
    ({"holdable": {"multiplier_min": 1, "multiplier_max": 1.1, "tolerance": 0.5}}, "holdable", "wider than the range"),
]


@pytest.mark.parametrize(("fields", "where", "message"), BAD_FIELDS, ids=[w for _, w, _ in BAD_FIELDS])
def test_a_bad_study_file_is_refused_naming_the_field(tmp_path, fields, where, message):
    path = write_stiff_study(tmp_path, **fields)
    problems = _problems(path)
    assert any(loc == f"{path}: {where}" and message in msg for loc, msg in problems), problems


def _with_base(tmp_path: Path, change, **fields: Any) -> Path:
    path = write_stiff_study(tmp_path, **fields)
    base = stiff_base()
    change(base)
    (tmp_path / "stiff_trip.yaml").write_text(yaml.safe_dump(base))
    return path


BAD_BASES = [
    (lambda b: b.pop("disturbances"), {}, "base", "has no disturbances"),
    (lambda b: b.pop("datacenters"), {}, "base", "has no datacenter site"),
    (lambda b: b["grid"].pop("frequency"), {}, "limits.f_max_hz", "has no grid.frequency"),
    (lambda b: None, {"limits": {"f_max_hz": 59.9}}, "limits.f_max_hz", "not above the nominal 60 Hz"),
    (lambda b: None, {"limits": {"f_min_hz": 60.1}}, "limits.f_min_hz", "not below the nominal 60 Hz"),
    (lambda b: None, {"limits": {"f_max_hz": 60.2, "voltage_after_s": 7}}, "limits.voltage_after_s", "runs end at 8 s"),
    (
        lambda b: None,
        {"settings": {"x": {"ride_through": None, "sites": ["elsewhere"]}}},
        "settings.x.sites.0",
        "no site 'elsewhere'",
    ),
    (
        lambda b: None,
        {"holdable": {"multiplier_min": 1e-4, "multiplier_max": 1, "tolerance": 0.5}},
        "holdable.multiplier_min",
        "leaves the model 'Llama-3.1-8B' of site 'dc' (4000) with none",
    ),
]


@pytest.mark.parametrize(
    ("change", "fields", "where", "message"), BAD_BASES, ids=[b[2] + ":" + b[3] for b in BAD_BASES]
)
def test_a_study_its_base_scenario_cannot_carry_is_refused(tmp_path, change, fields, where, message):
    path = _with_base(tmp_path, change, **fields)
    problems = _problems(path)
    assert any(loc == f"{path}: {where}" and message in msg for loc, msg in problems), problems


def test_the_cli_refuses_a_bad_study_file_with_exit_2(tmp_path, capsys):
    path = write_stiff_study(tmp_path, limits={})
    assert main(["study", "load-loss", str(path), "--out", str(tmp_path / "out")]) == 2
    assert f"error: {path}: limits: " in capsys.readouterr().err


def test_the_help_documents_the_study_file(capsys):
    with pytest.raises(SystemExit) as info:
        main(["study", "load-loss", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for key in ("study: load_loss", "settings:", "ride_through: null", "sites:", "limits:", "f_max_hz", "v_min_pu"):
        assert key in text, key
    for key in ("voltage_after_s", "holdable:", "multiplier_min", "tolerance", "load_loss.parquet", "evaluations"):
        assert key in text, key


# ------------------------------------------------------------------------------------ the overrides


def test_scaling_multiplies_replicas_training_base_load_and_capacity(tmp_path):
    site = {
        "name": "s",
        "bus": "671",
        "base_load_kw_per_phase": 500.0,
        "gpu_capacity": 1000,
        "pool_replicas": {"a": 30},
        "training": {"gpus": 200, "start_s": 0, "end_s": 10},
        "models": [
            {"model": "a", "gpus_per_replica": 1, "replicas": 25},
            {"model": "b", "gpus_per_replica": 8, "replicas": 3},
        ],
    }
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "datacenters": [site]}))
    base = read_base(path)
    assert scale_settings(base, 1.0) == {}
    # 25 * 1.1 = 27.5 rounds up to 28, 3 * 1.1 = 3.3 to 3; 200 * 1.1 = 220 GPUs of training;
    # the capacity 1000 * 1.1 = 1100 is above the 28 + 24 + 220 GPUs in use
    assert scale_settings(base, 1.1) == {
        "datacenters.0.models.0.replicas": 28,
        "datacenters.0.models.1.replicas": 3,
        "datacenters.0.base_load_kw_per_phase": pytest.approx(550.0),
        "datacenters.0.training.gpus": 220,
        "datacenters.0.gpu_capacity": 1100,
        "datacenters.0.pool_replicas": {"a": 33},
    }
    # the capacity is at least the GPUs in use: with 249 installed (exactly those in use), at 1.18
    # 29.5 -> 30 replicas of a, 3.54 -> 4 of b (32 GPUs) and 236 of training use 298, above 293.82
    site["gpu_capacity"] = 249
    path.write_text(yaml.safe_dump({"name": "x", "datacenters": [site]}))
    assert scale_settings(read_base(path), 1.18)["datacenters.0.gpu_capacity"] == 298


def test_a_setting_gives_its_ride_through_to_every_site_or_the_listed_ones(tmp_path):
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "datacenters": [{"name": "a"}, {"name": "b"}]}))
    base = read_base(path)
    spec = LoadLossSpec.model_validate(
        {
            "study": "load_loss",
            "name": "x",
            "base": "base.yaml",
            "settings": {
                "own": {},
                "none": {"ride_through": None},
                "b_trips": {
                    "ride_through": {"blocks": [{"name": "all", "fraction": 1, "action": "trip"}]},
                    "sites": ["b"],
                },
            },
            "limits": {"v_min_pu": 0.9},
        }
    )
    assert ride_through_settings(base, spec.settings["own"]) == {}
    assert ride_through_settings(base, spec.settings["none"]) == {
        "datacenters.0.ride_through": None,
        "datacenters.1.ride_through": None,
    }
    only_b = ride_through_settings(base, spec.settings["b_trips"])
    assert list(only_b) == ["datacenters.1.ride_through"]
    assert only_b["datacenters.1.ride_through"]["blocks"][0]["action"] == "trip"


def test_the_search_steps_are_equal_and_no_wider_than_the_tolerance():
    steps = search_multipliers(HoldableSearch(multiplier_min=0.5, multiplier_max=4.0, tolerance=0.1))
    assert len(steps) == 36 and steps[0] == 0.5 and steps[-1] == 4.0 and steps[5] == 1.0
    assert search_multipliers(HoldableSearch(multiplier_min=0.25, multiplier_max=1.0, tolerance=0.3)) == (
        0.25,
        0.5,
        0.75,
        1.0,
    )


def _record(status: str = "complete", **summary: Any) -> dict[str, Any]:
    figures = {"frequency_nadir_hz": 59.9, "frequency_zenith_hz": 60.1, "v_min_pu": 0.95, "v_max_pu": 1.04}
    return {"status": status, "summary": {**figures, **summary}}


def test_broken_limits_name_each_limit_a_run_breaks():
    limits = LoadLossLimits(f_min_hz=59.8, f_max_hz=60.2, v_min_pu=0.9, v_max_pu=1.05)
    assert broken_limits(_record(), limits) == []
    assert broken_limits(_record(frequency_zenith_hz=60.3, v_min_pu=0.85), limits) == ["f_max", "v_min"]
    assert broken_limits(_record(frequency_nadir_hz=59.7, v_max_pu=1.06), limits) == ["f_min", "v_max"]
    assert broken_limits(_record("failed"), limits) == ["failed"]
    assert broken_limits(_record(nonconverged_steps=2), limits) == ["failed"]
    assert broken_limits(_record(v_min_pu=None), limits) == ["failed"]
    assert broken_limits(_record(v_min_pu=None), LoadLossLimits(f_max_hz=60.2)) == []  # a limit not judged
    # a site that left at 0.5 s, before the disturbance at 10 s, measures no loss at it
    early = _record(
        disturbances=[{"name": "f", "start_s": 10.0}],
        ride_through={"a": {"events": []}, "b": {"events": [{"start_s": 0.5}]}},
    )
    assert broken_limits(early, limits) == ["before_disturbance"]
    early["summary"]["ride_through"]["b"]["events"][0]["start_s"] = 10.0  # at it: counted
    assert broken_limits(early, limits) == []


# ------------------------------------------------------------------ the stiff case, against the closed form


@pytest.fixture(scope="module")
def stiff(tmp_path_factory):
    directory = tmp_path_factory.mktemp("stiff")
    loaded = load_study(write_stiff_study(directory))
    out = directory / "out"
    return loaded, out, run_load_loss(loaded.base, loaded.spec, out, LocalEngine(2))


def _zenith_hz(lost_mw: float) -> float:
    """The closed-form zenith of a step loss of ``lost_mw`` on the stiff case's bulk system (Hz)."""
    return reheat_step_response(SystemFrequencySpec(base_mw=BASE_MW), -lost_mw * 1e6).nadir_hz


@pytest.mark.slow
def test_the_zenith_of_every_run_is_the_closed_form_step_of_its_loss(stiff):
    _, _, result = stiff
    runs = result.evaluations
    assert (runs["status"] == "complete").all() and len(runs) >= 10
    for row in runs.itertuples():
        if row.setting == "stays":  # nothing leaves: the zenith is the site's own wander, below a mHz
            assert 60.0 <= row.frequency_zenith_hz < 60.001, row.run_id
        else:
            # the site (or half of it) trips at the sag's first solve: a step of the MW lost, but for
            # the draw's own wander by a fraction of a percent (measured: within 0.38 mHz of 0.09-0.35 Hz)
            assert row.frequency_zenith_hz == pytest.approx(_zenith_hz(row.load_lost_mw), abs=5e-4), row.run_id
        assert row.within_limits == (row.frequency_zenith_hz <= F_MAX_HZ)


@pytest.mark.slow
def test_the_largest_loss_within_f_max_is_the_closed_forms_within_the_tolerance(stiff):
    _, _, result = stiff
    # the closed form is linear in the step: the loss whose zenith is f_max, by hand
    per_mw = _zenith_hz(1.0) - 60.0
    answer_mw = (F_MAX_HZ - 60.0) / per_mw
    assert _zenith_hz(answer_mw) == pytest.approx(F_MAX_HZ, abs=1e-9)
    table = result.table.set_index("setting")
    site_mw = table.at["whole", "mw_before"]  # the site at 1x, which trips whole
    for setting, share in (("whole", 1.0), ("half", 0.5)):
        row = table.loc[setting]
        assert row["status"] == "complete" and not row["holdable_capped"] and row["holdable_error"] is None
        assert row["beyond_multiplier"] - row["holdable_multiplier"] == pytest.approx(STIFF_HOLDABLE["tolerance"])
        assert row["holdable_mw"] <= answer_mw * 1.005 and row["beyond_mw"] >= answer_mw * 0.995
        # one step of the search is the tolerance's share of the site's loss: the answer is within it
        step_mw = STIFF_HOLDABLE["tolerance"] * share * site_mw
        assert answer_mw - row["holdable_mw"] <= step_mw * 1.05
        assert row["holdable_mw_multiplier"] == row["holdable_multiplier"] and row["loss_monotone"]
        assert row["beyond_limits"] == "f_max" and row["holdable_frequency_zenith_hz"] <= F_MAX_HZ
    # the system holds the same MW whatever the setting: half the site reaches it at twice the size
    assert table.at["half", "holdable_multiplier"] == pytest.approx(
        2 * table.at["whole", "holdable_multiplier"], abs=0.1
    )
    stays = table.loc["stays"]
    assert stays["holdable_capped"] and stays["holdable_multiplier"] == STIFF_HOLDABLE["multiplier_max"]
    assert stays["holdable_mw"] < 0.01 * stays["holdable_mw_before"] and math.isnan(stays["beyond_multiplier"])


@pytest.mark.slow
def test_the_table_reports_each_settings_run_at_the_base_size(stiff):
    _, out, result = stiff
    table = result.table.set_index("setting")
    for setting in ("whole", "half", "stays"):
        summary = json.loads((out / "runs" / f"{setting}-base" / "summary.json").read_text())
        row = table.loc[setting]
        assert row["run_id"] == f"{setting}-base" and row["load_lost_mw"] == summary["load_lost_mw"]
        assert row["mw_before"] == summary["disturbances"][0]["load_before_mw"]
        assert row["disturbance.sag.lost_mw"] == summary["disturbances"][0]["load_lost_mw"]
        assert row["frequency_zenith_hz"] == summary["frequency_zenith_hz"]
        assert row["voltages_from_s"] == 1.1 == summary["metrics_start_s"]  # the sag's last point
    # the whole site trips at the sag: its loss is its draw before; half of it trips: half
    assert table.at["whole", "load_lost_mw"] == table.at["whole", "mw_before"]
    assert table.at["half", "load_lost_mw"] == pytest.approx(table.at["half", "mw_before"] / 2, rel=0.01)
    assert table.at["whole", "blocks_tripped"] == 1 and table.at["stays", "blocks_tripped"] == 0
    assert math.isnan(table.at["whole", "time_to_full_return_s"])  # tripped for good: not back in 8 s
    assert table.at["stays", "time_to_full_return_s"] == 0.0  # never left
    sites = result.sites.set_index("setting")
    assert sites.at["whole", "mw_lost"] == pytest.approx(table.at["whole", "load_lost_mw"], rel=0.01)
    assert sites.at["whole", "tripped"] == "trip100" and sites.at["whole", "first_left_at_s"] == 1.0
    assert pd.isna(sites.at["stays", "tripped"]) and math.isnan(sites.at["stays", "first_left_at_s"])
    # the base-size run is the search's first step (1x is a step of 0.5 to 4 by 0.1)
    runs = result.evaluations.set_index("run_id")
    assert runs.loc[["whole-base", "half-base", "stays-base"], "searched"].all()
    assert (out / "load_loss.png").is_file() and (out / "load_loss_frequency.png").is_file()


@pytest.mark.slow
def test_a_rerun_reuses_every_run_and_writes_the_same_tables(stiff):
    loaded, out, first = stiff
    again = run_load_loss(loaded.base, loaded.spec, out, LocalEngine(2))
    assert again.evaluations["reused"].all()
    volatile = ["reused", "wall_time_s"]
    pd.testing.assert_frame_equal(
        first.evaluations.drop(columns=volatile), again.evaluations.drop(columns=volatile), check_exact=True
    )
    pd.testing.assert_frame_equal(first.table, again.table, check_exact=True)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "load_loss.parquet"), again.table, check_exact=True)


# ------------------------------------------------------------------------- a short ieee13_fault_ups


@pytest.mark.slow
def test_the_command_tables_a_short_ieee13_fault(tmp_path, capsys):
    path = write_ieee13_study(tmp_path)
    out = tmp_path / "out"
    assert main(["study", "load-loss", str(path), "--out", str(out), "--workers", "2", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "limits: f min 59.5 Hz, f max 60.1 Hz, v min 0.95 pu, v max 1.05 pu" in printed
    table = pd.read_parquet(out / "load_loss.parquet").set_index("setting")
    assert list(table.index) == ["own", "trip", "none"] and (table["status"] == "complete").all()
    expected = [
        "mw_before",
        "load_lost_mw",
        "disturbance.f675.mw_before",
        "disturbance.f675.lost_mw",
        "blocks_transferred",
        "blocks_tripped",
        "ups_energy_kwh",
        "time_to_full_return_s",
        "tokens_not_served",
        "frequency_zenith_hz",
        "frequency_nadir_hz",
        "frequency_rocof_hz_s",
        "v_min_pu",
        "v_max_pu",
        "within_limits",
        "broken_limits",
        "limit_f_max_hz",
    ]
    expected += ["site.dc1.mw_lost", "site.dc1.blocks_transferred", "site.dc1.blocks_tripped"]
    assert set(expected) <= set(table.columns) and "holdable_mw" not in table.columns
    for setting in table.index:
        summary = json.loads((out / "runs" / f"{setting}-base" / "summary.json").read_text())
        row = table.loc[setting]
        assert row["load_lost_mw"] == summary["load_lost_mw"]
        assert row["v_min_pu"] == summary["v_min_pu"] and row["frequency_nadir_hz"] == summary["frequency_nadir_hz"]
        assert summary["metrics_start_s"] == 2.1  # cleared at 1.1 s, the reclose at 2.1 s finds it gone
        broken = [
            name
            for name, bad in (
                ("f_min", row["frequency_nadir_hz"] < 59.5),
                ("f_max", row["frequency_zenith_hz"] > 60.1),
                ("v_min", row["v_min_pu"] < 0.95),
                ("v_max", row["v_max_pu"] > 1.05),
            )
            if bad
        ]
        assert row["broken_limits"] == ("+".join(broken) or None) and row["within_limits"] == (not broken)
    # the four halls go to their UPS; the whole site trips; without a ride-through nothing leaves
    assert (table.at["own", "blocks_transferred"], table.at["own", "blocks_tripped"]) == (4, 0)
    assert table.at["own", "ups_energy_kwh"] > 0 and table.at["own", "tokens_not_served"] == 0
    assert (table.at["trip", "blocks_transferred"], table.at["trip", "blocks_tripped"]) == (0, 1)
    assert table.at["trip", "tokens_not_served"] > 0
    assert table.at["own", "load_lost_mw"] == pytest.approx(table.at["own", "mw_before"], rel=0.02)
    assert math.isnan(table.at["none", "ups_energy_kwh"])  # no ride-through: no figure
    sites = pd.read_parquet(out / "load_loss_sites.parquet")
    assert list(sites["site"]) == ["dc1"] * 3 and list(sites["ride_through"]) == [True, True, False]
    assert sites.set_index("setting").at["own", "transferred"] == "hall1+hall2+hall3+hall4"
    for key in ("mw_lost", "blocks_transferred", "blocks_tripped"):  # the same figures in both tables
        pd.testing.assert_series_equal(
            table[f"site.dc1.{key}"].reset_index(drop=True), sites[key], check_names=False, check_exact=True
        )
    assert (out / "load_loss.png").is_file() and (out / "load_loss_frequency.png").is_file()


def _commanded(base: dict[str, Any]) -> None:
    """The stiff base with its site's blocks waiting to be released by the return coordinator."""
    base["datacenters"][0]["ride_through"]["return_to_service"] = {"mode": "commanded"}
    base["controllers"] = [{"kind": "return_coordinator", "params": {"sites": ["dc"]}}]


@pytest.mark.slow
def test_validate_refuses_a_setting_the_scenario_cannot_run_naming_it(tmp_path, capsys):
    # "half" (the first setting of its own) returns by itself, which the return coordinator refuses to pace
    path = _with_base(tmp_path, _commanded)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: settings.half: " in err and "return_coordinator" in err and "commanded" in err


@pytest.mark.slow
def test_validate_accepts_the_bundled_study(capsys):
    assert main(["validate", "study_virginia_load_loss"]) == 0
    assert "study load_loss virginia_load_loss, base virginia_load_loss.yaml" in capsys.readouterr().out

"""``openg2g study`` on real one-second runs of the bundled ieee13 scenario."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from openg2g.cli.main import main


@pytest.mark.slow
def test_siting_command_ranks_candidates(tmp_path, capsys):
    study = {
        "study": "siting",
        "name": "mini_siting",
        "base": "ieee13_none",
        "set": ["outputs.voltages=envelope"],
        "duration_s": 1,
        "candidates": ["671", "680"],
        "controllers": ["none"],
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    out = tmp_path / "out"
    assert main(["study", "siting", str(path), "--out", str(out), "--workers", "2", "--no-progress"]) == 0
    table = pd.read_parquet(out / "siting.parquet")
    assert list(table["rank"]) == [1, 2] and set(table["placement"]) == {"671", "680"}
    assert (table["status"] == "complete").all()
    first, second = table.iloc[0], table.iloc[1]
    assert (first["violation_integral_pu_s"], -first["mean_throughput_tok_s"]) <= (
        second["violation_integral_pu_s"],
        -second["mean_throughput_tok_s"],
    )
    assert (out / "siting_single.png").exists() and (out / "siting_ranking.png").exists()
    assert "mini_siting" not in capsys.readouterr().err


@pytest.mark.slow
def test_hosting_capacity_command_on_one_bus(tmp_path, capsys):
    out = tmp_path / "hc"
    args = ["study", "hosting-capacity", "ieee13", "--buses", "671", "--controller", "none", "--duration-s", "1"]
    args += ["--max-mw", "3", "--set", "grid.regulators.reg1.taps=[8, 6, 8]", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    table = pd.read_parquet(out / "hosting_capacity.parquet")
    row = table.iloc[0]
    assert row["bus"] == "671" and row["controller"] == "none" and row["error"] is None
    assert 0 < row["capacity_peak_mw"] < row["first_failing_peak_mw"]
    assert row["first_failing_blocks"] == row["capacity_blocks"] + 1
    evaluations = pd.read_parquet(out / "evaluations.parquet")
    passed = evaluations[(evaluations["violation_integral_pu_s"] <= 0) & (evaluations["overload_integral_pct_s"] <= 0)]
    assert passed["blocks"].max() == row["capacity_blocks"]
    # the trunk line 650-632 (400 A) limits this site before the voltages do (taps 8/6/8)
    assert row["binding_limit"] == "thermal" and row["binding_element"] == "line.650632"
    assert "model mix per block: 24x Llama-3.1-8B" in capsys.readouterr().out
    assert (out / "hosting_capacity.png").exists()


def test_bad_study_file_exits_2_naming_file_and_field(tmp_path, capsys):
    path = tmp_path / "study.yaml"
    path.write_text(
        yaml.safe_dump({"study": "siting", "name": "x", "base": "ieee13_none", "candidates": [], "oops": 1})
    )
    assert main(["study", "siting", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: candidates" in err and f"error: {path}: oops" in err


def test_unknown_feeder_prefix_is_a_clear_error(tmp_path, capsys):
    assert main(["study", "hosting-capacity", "nowhere13", "--out", str(tmp_path)]) == 2
    assert "no bundled scenario nowhere13_none" in capsys.readouterr().err

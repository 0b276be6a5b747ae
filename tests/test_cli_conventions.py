"""Conventions users rely on: validate catches what run would refuse, commands are typed, user
controller failures are reported (not tracebacks), output folders are checked first and stay under
runs/, sweeps and studies take --set, compare keeps runs apart, sweep input is bounded."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from openg2g.cli.main import main
from openg2g.core.commands import SetBatchSize, SetPowerCap, SetReplicas, SetSiteOnline, SetStoragePower, SetTaps
from openg2g.core.errors import CommandError, ScenarioError
from openg2g.scenario.loader import load_scenario
from openg2g.scenario.preflight import check_start
from openg2g.sweep.spec import MAX_RUNS, SweepError, load_sweep
from tests.scenario.test_validation import BASE

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios"


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _scenario(tmp_path: Path, **changes: Any) -> Path:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return _write(tmp_path / "scenario.yaml", data)


def _problems(path: Path) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as info:
        check_start(load_scenario(path))
    return info.value.problems


# ------------------------------------------------------------------ 1. validate = what run accepts


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ({"command": "set_taps", "bank": "reg1", "taps": [40, 8, 11]}, "outside [-16, 16]"),
        ({"command": "set_taps", "bank": "reg9", "taps": [1, 1, 1]}, "unknown regulator bank 'reg9'"),
        ({"command": "set_batch_size", "site": "dc1", "model": "GPT-5", "batch_size": 8}, "does not serve model"),
        ({"command": "set_replicas", "site": "dc1", "model": "Llama-3.1-8B", "replicas": 10**6}, "capacity"),
    ],
    ids=["tap-40", "bank-reg9", "unknown-model", "over-capacity"],
)
def test_events_that_would_fail_when_fired_are_refused(tmp_path, event, reason):
    path = _scenario(tmp_path, events=[{"t_s": 1, **event}])
    load_scenario(path)  # the schema and static checks pass ...
    problems = _problems(path)  # ... the start check does not
    assert any(loc == f"{path}: events.0" and "t=1 s" in msg and reason in msg for loc, msg in problems), problems


@pytest.mark.parametrize(
    ("controller", "reason"),
    [
        ({"kind": "ofo", "params": {"buses": ["nowhere"]}}, "valid buses"),
        ({"kind": "ofo", "params": {"sites": ["dc9"]}}, "unknown sites ['dc9']"),
        ({"kind": "tap_schedule", "params": {"schedule": [{"t_s": 1, "bank": "reg9", "taps": [1, 1, 1]}]}}, "reg9"),
        ({"kind": "ofo", "params": {"thermal": True, "thermal_branches": ["line.nowhere"]}}, "valid branches"),
    ],
    ids=["bus", "site", "bank", "thermal-branch"],
)
def test_controller_parameters_are_checked_against_feeder_and_sites(tmp_path, controller, reason):
    path = _scenario(tmp_path, controllers=[controller], events=[])
    problems = _problems(path)
    assert any(loc == f"{path}: controllers.0" and reason in msg for loc, msg in problems), problems


@pytest.mark.parametrize("limit", [0, -10, ".nan"])
def test_a_thermal_limit_that_is_not_positive_is_refused_by_validate(tmp_path, capsys, limit):
    path = tmp_path / "scenario.yaml"
    controller = f"[{{kind: ofo, params: {{thermal: true, max_loading_pct: {limit}}}}}]"
    _scenario(tmp_path, events=[])
    assert main(["validate", str(path), "--set", f"controllers={controller}"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: controllers.0.params.max_loading_pct" in err and "Traceback" not in err


def test_imported_trace_without_latency_data_is_refused_for_ofo(tmp_path, capsys):
    from openg2g.datacenter.build import import_trace

    header = "timestamp\trelative_time_s\tpower_total_W\tmax_num_seqs\tnum_gpus\tfolder_name\n"
    for batch in (8, 16):
        rows = "\n".join(f"1763561240\t{0.06 + 0.1 * i}\t{300.0 + batch + i % 7}\t{batch}\t1\trun" for i in range(100))
        (tmp_path / f"b{batch}.tsv").write_text(header + rows + "\n")
        import_trace(tmp_path / f"b{batch}.tsv", tmp_path / "lib", "M", 1, batch)
    site = {
        "name": "dc1",
        "bus": "671",
        "traces": "lib",
        "models": [{"model": "M", "gpus_per_replica": 1, "replicas": 10, "batch_size": 8}],
    }
    path = _scenario(tmp_path, datacenters=[site], controllers=[{"kind": "ofo"}], events=[])
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "controllers.0" in err and "dc1/M" in err and "latency" in err and "Traceback" not in err


def test_bundled_sweep_and_study_files_validate(capsys):
    files = [
        SCENARIOS / "sweep_ieee13_taps.yaml",
        SCENARIOS / "study_ieee13_siting.yaml",
        SCENARIOS / "ieee13_none.yaml",
    ]
    assert main(["validate", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert "sweep ieee13_taps: 36 runs" in out and "study siting" in out and "ieee13_none, sha256" in out


def test_validate_refuses_a_bad_sweep_point(tmp_path, capsys):
    sweep = {
        "name": "s",
        "base": str(_scenario(tmp_path)),
        "parameters": [{"product": {"datacenters.0.bus": ["nowhere"]}}],
    }
    assert main(["validate", str(_write(tmp_path / "sweep.yaml", sweep))]) == 2
    assert "datacenters.0.bus" in capsys.readouterr().err


# ------------------------------------------------------------------ 2. commands are typed


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: SetTaps("reg1", (1.5, 6, 15)), "SetTaps.taps"),
        (lambda: SetTaps("reg1", "161"), "SetTaps.taps"),
        (lambda: SetReplicas(site="dc1", model="m", replicas=2.5), "SetReplicas.replicas"),
        (lambda: SetReplicas(site="dc1", model="m", replicas=True), "SetReplicas.replicas"),
        (lambda: SetSiteOnline("dc1", "no"), "SetSiteOnline.online"),
        (lambda: SetSiteOnline("dc1", 0), "SetSiteOnline.online"),
        (lambda: SetStoragePower("b1", True), "SetStoragePower.p_w"),
        (lambda: SetStoragePower("b1", float("nan")), "SetStoragePower.p_w"),
        (lambda: SetPowerCap("dc1", "400"), "SetPowerCap.cap_w_per_gpu"),
        (lambda: SetBatchSize(site=7, model="m", batch_size=8), "SetBatchSize.site"),
    ],
)
def test_command_with_a_wrong_type_is_refused_naming_the_field(make, field):
    with pytest.raises(CommandError, match=rf"^{field}: expected"):
        make()


def test_command_normalizes_numeric_types():
    assert SetTaps("reg1", [np.int64(3), 4, 5.0]).taps == (3, 4, 5)
    assert type(SetBatchSize("dc1", "m", np.int64(64)).batch_size) is int
    assert SetStoragePower("b1", 100).p_w == 100.0 and SetPowerCap("dc1", None).cap_w_per_gpu is None


# ------------------------------------------------------------------ 3. user controller code failing


USER_CONTROLLERS = """
from pydantic import BaseModel, model_validator
from openg2g.core.interfaces import Controller

class InitFails(Controller):
    def __init__(self, gain=1.0):
        raise RuntimeError("boom in init")
    def step(self, observation):
        return []

class ConfigFails(Controller):
    class Config(BaseModel):
        gain: float = 1.0
        @model_validator(mode="after")
        def _check(self):
            raise KeyError("boom in config")
    def __init__(self, config):
        self.config = config
    def step(self, observation):
        return []

class ResetFails(Controller):
    def reset(self, context, seed):
        raise ZeroDivisionError("boom in reset")
    def step(self, observation):
        return []
"""


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        ("InitFails", "__init__ raised RuntimeError: boom in init"),
        ("ConfigFails", "Config(**params) raised KeyError: 'boom in config'"),
        ("ResetFails", "reset() raised ZeroDivisionError: boom in reset"),
    ],
)
def test_user_controller_failure_names_controller_file_and_exception(tmp_path, capsys, cls, expected):
    (tmp_path / "mine.py").write_text(USER_CONTROLLERS)
    path = _scenario(tmp_path, controllers=[{"kind": f"mine.py:{cls}", "name": "my_ctrl"}], events=[])
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "controller 'my_ctrl'" in err and str(tmp_path / "mine.py") in err and expected in err, err
    assert "Traceback" not in err


# ------------------------------------------------------------------ 4. output folders


@pytest.mark.parametrize(
    ("target", "reason"), [("afile", "is a file"), ("afile/sub", "which is a file"), ("/proc/openg2g", "cannot write")]
)
def test_unusable_out_is_refused_before_anything_runs(tmp_path, capsys, target, reason):
    (tmp_path / "afile").write_text("keep me")
    out = target if target.startswith("/") else str(tmp_path / target)
    study = SCENARIOS / "study_ieee13_siting.yaml"
    sweep = SCENARIOS / "sweep_ieee13_taps.yaml"
    for argv in (["run", str(_scenario(tmp_path))], ["sweep", str(sweep)], ["study", "siting", str(study)]):
        assert main([*argv, "--out", out, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert f"--out {out}: " in err and reason in err and "Traceback" not in err
    assert (tmp_path / "afile").read_text() == "keep me"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_out_is_refused(tmp_path, capsys):
    (tmp_path / "ro").mkdir(mode=0o555)
    assert main(["run", str(_scenario(tmp_path)), "--out", str(tmp_path / "ro" / "x"), "--no-progress"]) == 2
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/absolute/escaped"])
def test_default_output_stays_under_runs(tmp_path, monkeypatch, capsys, name):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    path = _scenario(tmp_path, name=name, duration_s=1, events=[])
    assert main(["run", str(path), "--no-progress"]) == 0
    folders = [p.name for p in (work / "runs").iterdir()]
    assert len(folders) == 1 and folders[0].endswith("escaped") and "/" not in folders[0]
    assert not (tmp_path / "escaped").exists()
    assert f"writing to runs/{folders[0]}" in capsys.readouterr().err


def test_feeder_path_of_another_file_is_not_read(tmp_path):
    data = copy.deepcopy(BASE)
    data["grid"]["feeder"] = "/etc/passwd"
    with pytest.raises(ScenarioError) as info:
        load_scenario(_write(tmp_path / "s.yaml", data))
    assert "root:" not in str(info.value) and ".dss" in str(info.value)


# ------------------------------------------------------------------ 5. --set, compare, scenario.yaml


def test_run_keeps_the_scenario_it_ran_and_it_reruns_identically(tmp_path):
    path = _scenario(tmp_path, duration_s=2)
    assert main(["run", str(path), "--out", str(tmp_path / "first"), "--set", "seed=5", "--no-progress"]) == 0
    kept = tmp_path / "first" / "scenario.yaml"
    assert yaml.safe_load(kept.read_text())["seed"] == 5
    assert main(["run", str(kept), "--out", str(tmp_path / "second"), "--no-progress"]) == 0
    first, second = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("first", "second"))
    assert first["v_min_pu"] == second["v_min_pu"] and first["energy_mwh"] == second["energy_mwh"]


def test_compare_labels_runs_of_one_scenario_by_folder(tmp_path, capsys):
    for folder, seed in (("seed1", 1), ("seed2", 2)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "summary.json").write_text(
            json.dumps({"scenario": "same", "status": "complete", "seed": seed})
        )
    assert main(["compare", "--json", str(tmp_path / "seed1"), str(tmp_path / "seed2")]) == 0
    table = json.loads(capsys.readouterr().out)
    assert {label: s["seed"] for label, s in table.items()} == {str(tmp_path / "seed1"): 1, str(tmp_path / "seed2"): 2}


@pytest.mark.parametrize(
    ("content", "reason"), [(b"{not json", "not valid JSON"), (b"[1, 2]", "JSON list"), (b"\xff\xfe", "not UTF-8")]
)
def test_compare_on_a_malformed_summary_is_a_clear_error(tmp_path, capsys, content, reason):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_bytes(content)
    assert main(["compare", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and reason in err and "Traceback" not in err


def test_sweep_set_overrides_every_run(tmp_path):
    from openg2g.sweep.runner import plan_sweep

    sweep = _write(
        tmp_path / "sweep.yaml",
        {
            "name": "s",
            "base": str(_scenario(tmp_path)),
            "set": ["duration_s=2"],
            "parameters": [{"product": {"seed": [0, 1]}}],
        },
    )
    tasks = plan_sweep(load_sweep(sweep, ["grid.load_scale=0.5"]), tmp_path / "out")
    assert all(t.overrides[-3:-1] == ("duration_s=2", "grid.load_scale=0.5") for t in tasks)
    with pytest.raises(ScenarioError, match="not an index"):
        load_sweep(sweep, ["datacenters.7.bus=671"])


def test_study_set_overrides_the_base(tmp_path):
    from openg2g.studies.load import load_study

    loaded = load_study(SCENARIOS / "study_ieee13_siting.yaml", overrides=["grid.load_scale=0.5"])
    assert loaded.base.data["grid"]["load_scale"] == 0.5 and loaded.base.fixed[-1] == "grid.load_scale=0.5"


@pytest.mark.parametrize(("content", "reason"), [(b"name: caf\xe9\n", "not UTF-8"), (b"name: [1\n", "not valid YAML")])
def test_study_with_an_unreadable_base_scenario_is_a_clear_error(tmp_path, capsys, content, reason):
    (tmp_path / "base.yaml").write_bytes(content)
    study = {"study": "siting", "name": "s", "base": "base.yaml", "candidates": ["671"]}
    assert main(["study", "siting", str(_write(tmp_path / "study.yaml", study)), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'base.yaml'}" in err and reason in err and "Traceback" not in err


# ------------------------------------------------------------------ 6. sweep input


def _sweep_file(tmp_path: Path, parameters: list[dict[str, Any]]) -> Path:
    return _write(tmp_path / "sweep.yaml", {"name": "s", "base": str(_scenario(tmp_path)), "parameters": parameters})


def test_yaml_date_as_sweep_value_is_refused(tmp_path):
    path = _sweep_file(tmp_path, [{"product": {"name": ["x"]}}])
    path.write_text(path.read_text().replace("- x", "- 2024-01-01"))
    with pytest.raises(SweepError, match=r"name: datetime.date\(2024, 1, 1\) is a YAML date.*quote it"):
        load_sweep(path)


def test_huge_sweep_is_refused_before_expanding(tmp_path):
    values = list(range(20))
    path = _sweep_file(tmp_path, [{"product": {f"k{i}": values for i in range(8)}}])
    with pytest.raises(SweepError, match=rf"25,600,000,000 runs, more than the {MAX_RUNS:,}"):
        load_sweep(path)


def test_yaml_alias_bomb_in_params_is_refused(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    body = yaml.safe_dump({k: v for k, v in BASE.items() if k != "controllers"}, sort_keys=False)
    path = tmp_path / "bomb.yaml"
    path.write_text(body + "controllers:\n  - kind: noop\n    params:\n" + "".join(f"      {line}\n" for line in lines))
    with pytest.raises(ScenarioError, match="alias"):
        load_scenario(path)


def test_siting_with_only_unknown_buses_fails_with_a_message(tmp_path, capsys):
    study = yaml.safe_load((SCENARIOS / "study_ieee13_siting.yaml").read_text())
    study.update(base=str(SCENARIOS / "ieee13_none.yaml"), candidates=["nowhere", "9999"], pairs=False)
    path = _write(tmp_path / "study.yaml", study)
    for argv in (
        ["study", "siting", str(path), "--out", str(tmp_path / "out"), "--no-progress"],
        ["validate", str(path)],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "candidates" in err and "'nowhere'" in err and "'9999'" in err and "671" in err


# ------------------------------------------------------------------ 7. help says a scenario is code


@pytest.mark.parametrize("command", ["run", "validate", "powerflow", "evaluate"])
def test_help_says_a_scenario_can_run_code(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Files that can run code" in out and "controller file" in out
    assert "grid.trust_pickle: true" in out and "policy zip" in out

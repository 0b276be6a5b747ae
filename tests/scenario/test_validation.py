"""Bad scenarios are refused before a run starts, each problem naming file, field path and reason."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from openg2g.cli.main import main
from openg2g.core.errors import ScenarioError
from openg2g.scenario.loader import apply_override, load_scenario

BASE: dict[str, Any] = {
    "name": "validation-base",
    "seed": 1,
    "duration_s": 10,
    "periods": {"datacenter_s": "1/10", "grid_s": "1/10", "control_s": 1},
    "grid": {"feeder": "ieee13", "regulators": {"reg1": {"taps": [10, 8, 11]}}},
    "datacenters": [
        {
            "name": "dc1",
            "bus": "671",
            "base_load_kw_per_phase": 100,
            "models": [
                {
                    "model": "Llama-3.1-8B",
                    "gpus_per_replica": 1,
                    "replicas": 100,
                    "batch_size": 128,
                    "itl_deadline_s": 0.08,
                },
                {"model": "Llama-3.1-70B", "gpus_per_replica": 4, "replicas": 20, "batch_size": 64},
            ],
        }
    ],
    "controllers": [{"kind": "noop"}],
    "events": [{"t_s": 5, "command": "set_batch_size", "site": "dc1", "model": "Llama-3.1-8B", "batch_size": 64}],
    "outputs": {"plots": False},
}

# (override applied to BASE, field path expected in the message, words expected in the reason)
CASES: list[tuple[str, str, str]] = [
    ("colour=blue", "colour", "Extra inputs are not permitted"),
    ("grid.colour=blue", "grid.colour", "Extra inputs"),
    ("duration_s=-5", "duration_s", "> 0"),
    ("duration_s=ten", "duration_s", "not a number of seconds"),
    ("duration_s=10.05", "(top level)", "duration_s (201/20) must be a whole multiple of periods.grid_s"),
    ("periods.datacenter_s=0", "periods.datacenter_s", "> 0"),
    ("periods.grid_s=0.15", "periods", "whole multiple of datacenter_s"),
    ("periods.control_s=0.25", "periods", "whole multiple of grid_s"),
    ("seed=-1", "seed", "greater than or equal to 0"),
    ("grid.v_min_pu=1.06", "grid", "v_min_pu < v_max_pu"),
    ("grid.solver=opendss", "grid.solver", "exact"),
    ("grid.load_aggregation=median", "grid.load_aggregation", "mean"),
    ("grid.feeder=ieee9000", "grid.feeder", "ieee13"),
    ("datacenters.0.bus=9999", "datacenters.0.bus", "9999"),
    ("datacenters.0.bus=611", "datacenters.0.bus", "phase"),
    ("datacenters.0.power_factor=1.2", "datacenters.0.power_factor", "less than or equal to 1"),
    ("datacenters.0.pue=0.8", "datacenters.0.pue", "greater than or equal to 1"),
    ("datacenters.0.models.0.replicas=-3", "datacenters.0.models.0.replicas", "greater than or equal to 0"),
    ("datacenters.0.models.0.model=GPT-5", "datacenters.0.models.0.model", "Llama-3.1-8B"),
    ("datacenters.0.models.0.batch_size=100", "datacenters.0.models.0.batch_size", "128"),
    ("datacenters.0.models.0.batch_sizes=[8,100]", "datacenters.0.models.0.batch_sizes", "100"),
    ("datacenters.0.models.0.gpus_per_replica=3", "datacenters.0.models.0.gpus_per_replica", "1"),
    ("datacenters.0.models=[]", "datacenters.0.models", "at least 1"),
    ("datacenters.0.gpu_capacity=50", "datacenters.0", "capacity"),
    ("datacenters.0.traces=no/such/library", "datacenters.0.traces", "no/such/library"),
    ("datacenters.0.training={gpus: 10, start_s: 500, end_s: 100}", "datacenters.0.training", "end_s"),
    ("grid.regulators.reg9={taps: [1, 1, 1]}", "grid.regulators.reg9", "reg1"),
    ("grid.regulators.reg1.taps=[10, 8]", "grid.regulators.reg1.taps", "3"),
    ("grid.regulators.reg1.taps=[10, 8, 40]", "grid.regulators.reg1.taps", "40"),
    ("grid.regulators.reg1.mode=manual", "grid.regulators.reg1.mode", "fixed"),
    ("grid.pv=[{name: pv1, bus: nowhere, kw: 100}]", "grid.pv.0.bus", "nowhere"),
    ("grid.storage=[{name: b1, bus: 675, kw: 100, kwh: 50, soc0: 0.95}]", "grid.storage.0", "soc0"),
    ("controllers.0.kind=magic", "controllers.0.kind", "noop"),
    ("controllers.0.kind=missing_file.py:Ctrl", "controllers.0.kind", "not found"),
    ("controllers.0.delay_s=-1", "controllers.0.delay_s", ">= 0"),
    ("controllers.0.period_s=0.05", "controllers.0.period_s", "whole multiple"),
    ("events.0.command=explode", "events.0.command", "set_batch_size"),
    ("events.0.t_s=-1", "events.0.t_s", ">= 0"),
    ("events.0.site=dc9", "events.0.site", "dc1"),
    ("events.0.batch_size=large", "events.0.batch_size", "integer"),
    ("events.0.colour=red", "events.0.colour", "Extra inputs"),
    # hostile values that used to pass
    ("grid.v_max_pu=.inf", "grid.v_max_pu", "finite"),
    ("outputs.flush_every_s=.nan", "outputs.flush_every_s", "finite"),
    ("duration_s=.inf", "duration_s", "finite"),
    ("duration_s=1e12", "duration_s", "longer than a year"),
    ("grid.regulators.reg1={taps: [900, 8, 11], max_tap: 1000}", "grid.regulators.reg1.max_tap", "32"),
    ("grid.regulators.reg1={mode: auto, vreg_v: 1e9}", "grid.regulators.reg1.vreg_v", "150"),
    ("controllers.0.period_s=0", "controllers.0.period_s", "> 0"),
    ("controllers.0.period_s=-1", "controllers.0.period_s", "> 0"),
    ("datacenters.0.models.0.itl_deadline_s=1e-12", "datacenters.0.models.0.itl_deadline_s", "0.001"),
    ("datacenters.0.name=''", "datacenters.0.name", "at least 1"),
    ("datacenters.0.gpu_capacity=1000000000000", "datacenters.0.gpu_capacity", "10000000"),
    ("grid.monitored_buses=[]", "grid.monitored_buses", "at least 1"),
    ("grid.pv=[{name: x, bus: 675, kw: 10}, {name: x, bus: 680, kw: 10}]", "grid", "unique"),
    ("datacenters.0.load_model=zip", "datacenters.0.load_model", "opendss"),
    ("datacenters.0.vminpu=0.3", "datacenters.0.vminpu", "0.5"),
    (
        "datacenters.0.training={gpus: 8, start_s: 0, end_s: 5, peak_w_per_gpu: 5000}",
        "datacenters.0.training.peak_w_per_gpu",
        "1000",
    ),
    (
        "grid.extra_loads=[{name: l, bus: nowhere, kw_per_phase: 5, profile: p.csv}]",
        "grid.extra_loads.0.bus",
        "nowhere",
    ),
    ("grid.pv=[{name: p, bus: 675, kw: 5, profile: missing.csv}]", "grid.pv.0.profile", "missing.csv"),
    ("grid.source_pu=3", "grid.source_pu", "1.2"),
    (
        "grid.regulators.reg1={mode: auto, tap_delay_s: -1}",
        "grid.regulators.reg1.tap_delay_s",
        "greater than or equal to 0",
    ),
    ("grid.regulators.reg1={mode: auto, tap_delay_s: .nan}", "grid.regulators.reg1.tap_delay_s", "finite"),
    ("grid.regulators.reg1={mode: auto, tap_delay_s: .inf}", "grid.regulators.reg1.tap_delay_s", "finite"),
    ("grid.capacitor_control=sometimes", "grid.capacitor_control", "'fixed' or 'auto'"),
    ("grid.capacitor_control=auto", "grid.capacitor_control", "ieee13 has no CapControl"),
]


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("overrides", "field", "reason"),
    [
        (["duration_s=31000000", "periods={datacenter_s: 0.01, grid_s: 0.01, control_s: 1}"], "(top level)", "steps"),
        (
            ["datacenters.0.gpu_capacity=200", "datacenters.0.training={gpus: 500, start_s: 0, end_s: 5}"],
            "datacenters.0",
            "capacity",
        ),
    ],
)
def test_bad_combination_is_refused(tmp_path, overrides, field, reason):
    data = copy.deepcopy(BASE)
    for override in overrides:
        apply_override(data, override, "test")
    path = _write(tmp_path, data)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert any(loc.startswith(f"{path}: {field}") and reason in msg for loc, msg in info.value.problems), (
        info.value.problems
    )


def test_base_scenario_is_valid(tmp_path):
    loaded = load_scenario(_write(tmp_path, BASE))
    assert loaded.scenario.datacenters[0].bus == "671"
    assert len(loaded.sha256) == 64


@pytest.mark.parametrize(("override", "field", "reason"), CASES, ids=[c[0][:40] for c in CASES])
def test_bad_scenario_is_refused(tmp_path, override, field, reason):
    data = copy.deepcopy(BASE)
    apply_override(data, override, "test")
    path = _write(tmp_path, data)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    messages = [f"{loc}: {msg}" for loc, msg in info.value.problems]
    assert any(
        loc.startswith(f"{path}: {field}") and reason.lower() in f"{loc}: {msg}".lower()
        for loc, msg in info.value.problems
    ), messages


def test_yaml_syntax_error_names_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\ngrid: {feeder: ieee13\n")
    with pytest.raises(ScenarioError, match=r"broken.yaml:\d+:\d+: not valid YAML"):
        load_scenario(path)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"name: a\nname: b\n", "key 'name' appears twice"),
        (b"name: caf\xe9\n", "not UTF-8"),
        pytest.param(b"name: " + b"[" * 20000 + b"\n", "nested too deeply", marks=pytest.mark.slow),
        (b"name: !!python/object:os.system {}\n", "not valid YAML"),
    ],
    ids=["duplicate-key", "latin-1", "deep-nesting", "python-tag"],
)
def test_unreadable_yaml_is_refused(tmp_path, content, reason):
    path = tmp_path / "hostile.yaml"
    path.write_bytes(content)
    with pytest.raises(ScenarioError, match=reason):
        load_scenario(path)


def test_controller_param_type_error_names_controller(tmp_path):
    data = copy.deepcopy(BASE)
    data["controllers"] = [{"kind": "tap_schedule", "params": {"schedule": "at noon"}}]
    with pytest.raises(ScenarioError) as info:
        load_scenario(_write(tmp_path, data))
    assert any(
        loc.endswith("controllers.0.params.schedule") and "tap_schedule" in msg for loc, msg in info.value.problems
    )


def test_validate_cli_exit_codes(tmp_path, capsys):
    good = _write(tmp_path, BASE)
    assert main(["validate", str(good)]) == 0
    assert "ok" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    data = copy.deepcopy(BASE)
    data["datacenters"][0]["models"][0]["replicas"] = -1
    bad.write_text(yaml.safe_dump(data))
    assert main(["validate", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: datacenters.0.models.0.replicas" in err and "Traceback" not in err


def test_run_refuses_invalid_scenario_without_traceback(tmp_path, capsys):
    data = copy.deepcopy(BASE)
    data["grid"]["feeder"] = "atlantis"
    assert main(["run", str(_write(tmp_path, data)), "--out", str(tmp_path / "out")]) == 2
    assert "grid.feeder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "override",
    [
        "duration_s=[1",
        "name=*x",
        "name=!!python/name:os.system",
        pytest.param("x=" + "[" * 20000, marks=pytest.mark.slow),
    ],
)
def test_set_override_bad_yaml(tmp_path, override):
    with pytest.raises(ScenarioError, match="--set"):
        load_scenario(_write(tmp_path, BASE), [override])


def test_set_override_bad_path(tmp_path):
    with pytest.raises(ScenarioError, match="not an index"):
        load_scenario(_write(tmp_path, BASE), ["datacenters.5.bus=671"])


def test_committed_scenario_reference_is_current():
    from openg2g.scenario.reference import scenario_reference

    committed = (Path(__file__).resolve().parents[2] / "docs" / "scenario-reference.md").read_text()
    assert committed == scenario_reference(), "regenerate with: openg2g schema > docs/scenario-reference.md"


def test_two_controllers_writing_one_setting_are_refused_at_validate(tmp_path, capsys):
    data = copy.deepcopy(BASE)
    data["controllers"] = [
        {"kind": "pid", "name": "capper", "params": {"setpoint": 0.95, "kp": 1.0, "actuator": "power_cap"}},
        {"kind": "ofo", "name": "ofo_dc1"},
        {"kind": "rule_based", "name": "rules", "params": {"sites": ["dc1"]}},
    ]
    path = _write(tmp_path, data)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    # the power-capping PID owns other settings; the rule-based controller takes the OFO's batch sizes
    assert "controllers.0" not in err and "controllers.1:" not in err
    assert (
        f"{path}: controllers.2: controllers.2 ('rules') writes batch_size of site 'dc1', model 'Llama-3.1-8B', "
        "which controllers.1 ('ofo_dc1') already writes; a setting has one owner" in err
    )
    data["controllers"] = data["controllers"][:2]
    assert main(["validate", str(_write(tmp_path, data))]) == 0

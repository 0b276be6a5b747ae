"""What-if runs: the form's changes as overrides, validated as the CLI validates them, code refused."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from openg2g.app.whatif import (
    KEEP,
    NO_CONTROL,
    TAP_AUTO,
    TAP_FIXED,
    TAP_SCHEDULED,
    RunQueue,
    WhatIf,
    check,
    overrides,
    parse_params,
    scenario_form,
    tap_choices,
)
from openg2g.core.errors import ScenarioError


def test_a_what_if_becomes_the_set_lines_of_openg2g_run() -> None:
    whatif = WhatIf(
        "ieee13_ofo",
        bus="675",
        replicas={1: 100},
        batch_sizes={0: 64},
        controller="pid",
        params=parse_params("{setpoint: 0.96, kp: 2.0}"),
        duration_s=60.0,
    )
    assert overrides(whatif) == [
        'datacenters.0.bus="675"',
        "datacenters.0.models.1.replicas=100",
        "datacenters.0.models.0.batch_size=64",
        'controllers=[{"kind": "pid", "params": {"setpoint": 0.96, "kp": 2.0}}]',
        "duration_s=60.0",
        "outputs.plots=false",
    ]
    assert overrides(WhatIf("ieee13_ofo", controller=NO_CONTROL))[0] == "controllers=[]"
    assert overrides(WhatIf("ieee13_ofo", controller=KEEP)) == ["outputs.plots=false"]
    loaded = check(whatif, allow_code=False)
    assert loaded.scenario.datacenters[0].bus == "675"
    assert loaded.scenario.datacenters[0].models[1].replicas == 100
    assert [c.kind for c in loaded.scenario.controllers] == ["pid"]


def test_controller_parameters_are_a_mapping_checked_by_the_controller() -> None:
    with pytest.raises(ScenarioError, match="expected a mapping"):
        parse_params("[1, 2]")
    with pytest.raises(ScenarioError, match="controllers.0.params.kp"):
        check(WhatIf("ieee13_none", controller="pid", params={"setpoint": 0.96}), allow_code=False)


def test_the_form_starts_from_the_scenario() -> None:
    form = scenario_form("ieee13_ofo")
    assert form.bus == "671" and form.duration_s == 3600 and form.controllers == ["ofo"]
    assert form.models[0] == ("Llama-3.1-8B", 720, 128)
    with pytest.raises(ScenarioError, match="not a bundled scenario: 'nope'"):
        scenario_form("nope")


def test_the_training_job_is_changed_removed_or_added() -> None:
    assert scenario_form("ieee13_none").training == (2400, 1000.0, 2000.0)
    assert scenario_form("ieee13_thermal_ofo").training is None
    moved = WhatIf("ieee13_none", training=True, training_start_s=100.0, training_end_s=400.0)
    assert overrides(moved)[:2] == ["datacenters.0.training.start_s=100.0", "datacenters.0.training.end_s=400.0"]
    assert overrides(WhatIf("ieee13_none", training=False))[0] == "datacenters.0.training=null"
    added = WhatIf("ieee13_thermal_ofo", training=True, training_gpus=16, training_start_s=2.0, training_end_s=8.0)
    assert overrides(added)[0] == 'datacenters.0.training={"gpus": 16, "start_s": 2.0, "end_s": 8.0}'
    job = check(added, allow_code=False).scenario.datacenters[0].training
    assert job is not None and (job.gpus, job.start_s, job.end_s) == (16, 2.0, 8.0)
    with pytest.raises(ScenarioError) as info:
        overrides(WhatIf("ieee13_thermal_ofo", training=True, training_start_s=2.0))
    assert [loc for loc, _ in info.value.problems] == ["datacenters.0.training.gpus", "datacenters.0.training.end_s"]


def test_a_training_job_ending_before_it_starts_is_reported_with_its_field_path() -> None:
    with pytest.raises(ScenarioError) as info:
        check(WhatIf("ieee13_none", training=True, training_start_s=300.0, training_end_s=100.0), allow_code=False)
    ((loc, msg),) = info.value.problems
    assert loc.endswith("ieee13_none.yaml: datacenters.0.training")
    assert "end_s (100.0) must be after start_s (300.0)" in msg


def test_tap_modes_set_every_named_bank_and_keep_or_drop_the_tap_events() -> None:
    assert tap_choices(scenario_form("ieee13_none")) == [KEEP, TAP_FIXED, TAP_SCHEDULED, TAP_AUTO]
    assert tap_choices(scenario_form("ieee34_ref_none")) == [KEEP, TAP_FIXED, TAP_AUTO]  # no set_taps events
    assert tap_choices(scenario_form("cigre_mv_ofo")) == [KEEP]  # names no regulator
    ramp = '{"t_s": 2500, "command": "set_inference_scale", "site": "dc1", "fraction": 0.5, "ramp_s": 500}'
    assert overrides(WhatIf("ieee13_none", taps=TAP_FIXED))[:2] == [
        'grid.regulators.reg1.mode="fixed"',
        f"events=[{ramp}]",
    ]
    assert overrides(WhatIf("ieee13_none", taps=TAP_SCHEDULED))[:2] == [
        'grid.regulators.reg1.mode="fixed"',
        "outputs.plots=false",
    ]
    assert overrides(WhatIf("ieee34_none", taps=TAP_AUTO))[:3] == [
        'grid.regulators.reg1.mode="auto"',
        'grid.regulators.reg2.mode="auto"',
        "events=[]",
    ]
    scenario = check(WhatIf("ieee13_none", taps=TAP_AUTO), allow_code=False).scenario
    assert scenario.grid.regulators["reg1"].mode == "auto"
    assert scenario.grid.regulators["reg1"].taps == [14, 6, 15]  # the initial taps stay
    assert [e.command for e in scenario.events] == ["set_inference_scale"]
    with pytest.raises(ScenarioError, match="tap mode 'auto' is not offered for this scenario: it names no regulator"):
        overrides(WhatIf("cigre_mv_ofo", taps=TAP_AUTO))
    with pytest.raises(ScenarioError, match="tap mode 'scheduled' is not offered"):
        overrides(WhatIf("ieee34_ref_none", taps=TAP_SCHEDULED))


def test_a_bad_bus_is_reported_with_its_field_path() -> None:
    with pytest.raises(ScenarioError) as info:
        check(WhatIf("ieee13_none", bus="999"), allow_code=False)
    (loc, msg), *_ = info.value.problems
    assert loc.endswith("ieee13_none.yaml: datacenters.0.bus") and "999" in msg


def test_code_runs_only_when_the_app_allows_it(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    controller = tmp_path / "mine.py"
    controller.write_text(f"open({str(marker)!r}, 'w').close()\n")
    extra = (f"controllers=[{{kind: '{controller}:Mine'}}]",)
    with pytest.raises(ScenarioError, match="--allow-code"):
        check(WhatIf("ieee13_none", extra=extra), allow_code=False)
    with pytest.raises(ScenarioError, match="is not one of .* \\(others need --allow-code\\)"):
        check(WhatIf("ieee13_none", controller=f"{controller}:Mine"), allow_code=False)
    assert not marker.exists()  # refused before the loader could import the file
    with pytest.raises(ScenarioError, match="has no class 'Mine'"):
        check(WhatIf("ieee13_none", extra=extra), allow_code=True)
    assert marker.exists()


def test_a_policy_with_observation_terms_from_elsewhere_needs_allow_code(tmp_path: Path) -> None:
    """A stock rl_policy imports the observation terms its settings file names: a file term is code."""
    from openg2g.envs.config import EnvConfig
    from openg2g.envs.policy import PolicyMeta

    def whatif(term: str) -> WhatIf:
        env = EnvConfig(observation_terms=[{"term": term}])
        (tmp_path / "p.json").write_text(PolicyMeta(algo="ppo", scenario="s", env=env).model_dump_json())
        (tmp_path / "p.zip").write_bytes(b"")
        return WhatIf("ieee13_none", controller="rl_policy", params={"policy": str(tmp_path / "p.zip")})

    with pytest.raises(ScenarioError) as info:
        check(whatif("mine.py:Clock"), allow_code=False)
    ((loc, msg),) = info.value.problems
    assert loc.endswith("controllers.0.params.policy")
    assert msg == "the policy's observation term 'mine.py:Clock' is not openg2g's; start the app with --allow-code"
    check(whatif("mine.py:Clock"), allow_code=True)
    check(whatif("openg2g.envs.terms:TimeSinceTapChange"), allow_code=False)


def test_a_what_if_writes_its_tables_fifty_times_a_run(tmp_path: Path) -> None:
    """Each write updates summary.json, which the form's progress reads: 2 % steps of a minute
    (not 0 then 100 %), a grid step at the least, the scenario's 60 s at the most."""
    from openg2g.app.whatif import check, progress_flush_s
    from openg2g.scenario.run import run_scenario

    minute = check(WhatIf("ieee13_none", duration_s=60.0), allow_code=False)
    assert progress_flush_s(minute) == 1.2
    assert progress_flush_s(check(WhatIf("ieee13_none", duration_s=1.0), allow_code=False)) == 0.1  # a grid step
    day = check(WhatIf("ieee13_none", duration_s=86400.0), allow_code=False)
    assert progress_flush_s(day) == 60.0  # the scenario's own
    flush = f"outputs.flush_every_s={progress_flush_s(minute)!r}"
    run_scenario("ieee13_none", tmp_path / "r", overrides=[flush, *overrides(WhatIf("ieee13_none", duration_s=60.0))])
    assert len(list((tmp_path / "r" / "grid").glob("part-*.parquet"))) == 50


@pytest.mark.slow
def test_the_queue_runs_one_at_a_time_and_cancels(tmp_path: Path) -> None:
    queue = RunQueue(tmp_path, max_running=1, poll_s=0.1)
    try:
        long = queue.submit(WhatIf("ieee13_none", duration_s=3600.0), allow_code=False)
        short = queue.submit(WhatIf("ieee13_none", duration_s=1.0), allow_code=False)
        dropped = queue.submit(WhatIf("ieee13_none", duration_s=1.0), allow_code=False)
        assert [j.state for j in queue.jobs()] == ["queued", "queued", "running"]  # newest first
        queue.cancel(dropped.job_id)
        queue.cancel(long.job_id)
        running = []
        for _ in range(2400):  # at most 240 s
            jobs = queue.jobs()
            running.append(sum(j.state == "running" for j in jobs))
            if all(j.state in ("complete", "failed", "cancelled") for j in jobs):
                break
            time.sleep(0.1)
        assert max(running) == 1
        assert {j.run_id: j.state for j in queue.jobs()} == {
            "whatif/ieee13_none-001": "cancelled",
            "whatif/ieee13_none-002": "complete",
            "whatif/ieee13_none-003": "cancelled",
        }
        summary = json.loads((tmp_path / short.run_id / "summary.json").read_text())
        assert summary["status"] == "complete" and summary["sim_time_s"] == 1.0
        # asked to write its tables at every grid step of its second (50 writes would be 0.02 s apart)
        assert "outputs.flush_every_s=0.1" in short.args
        assert not (tmp_path / dropped.run_id).exists()
    finally:
        queue.close()


def test_a_datacenter_plug_in_from_elsewhere_needs_allow_code() -> None:
    """openg2g's own plug-in sites (replay, constant) run without --allow-code; a file's or another
    package's backend is code."""
    from openg2g.app.whatif import _runs_code

    site = {"name": "dc", "bus": "671"}
    assert _runs_code({"datacenters": [site, {**site, "kind": "constant"}]}) == []
    problems = _runs_code({"datacenters": [{**site, "kind": "mine.py:Mine"}, {**site, "kind": "pkg.mod:Site"}]})
    assert [loc for loc, _ in problems] == ["datacenters.0.kind", "datacenters.1.kind"]
    assert all("--allow-code" in msg for _, msg in problems)

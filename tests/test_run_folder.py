"""Run folders that are safe: no silent overwrite of an earlier run, one writer at a time (an OS
lock), whole-file writes that a failure cannot cut short, and a killed benchmark that keeps the
tables of its finished runs."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from openg2g.cli.main import main
from openg2g.cli.outdir import LOCK_FILE
from openg2g.core.atomic import replace_atomically
from openg2g.envs.policy import load_policy, resolve_policy, save_policy

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
"""Subprocesses import this checkout's openg2g, whatever the installed one is."""

RUN = ["run", "ieee13_fixedtap_none", "--set", "duration_s=5", "--set", "outputs.plots=false", "--no-progress"]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "openg2g.cli.main", *args]


def _temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if ".tmp" in p.name]


def test_a_failed_write_keeps_the_previous_file_and_no_temporary(tmp_path):
    path = tmp_path / "leaderboard.csv"
    path.write_text("rank,controller\n1,ofo\n")
    with pytest.raises(ValueError, match="serializer"), replace_atomically(path) as tmp:
        tmp.write_text("rank,contr")  # half a table, then the serializer fails
        raise ValueError("serializer failed")
    assert path.read_text() == "rank,controller\n1,ofo\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leaderboard.csv"]


def test_a_policy_written_to_a_full_disk_leaves_the_previous_one_intact(tmp_path):
    """A disk that is full after 50 kB: a file-size limit (the soft RLIMIT_FSIZE, with SIGXFSZ
    ignored so the write fails with EFBIG instead of the process being killed), set in this process
    and restored after, around the second save only; in this process because the policy's PyTorch
    import is already paid for here, where a fresh process took 6 s for it."""
    model, meta = load_policy(resolve_policy("ieee13_ppo"))
    save_policy(model, tmp_path / "policy", meta)
    good = (tmp_path / "policy.zip").read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    on_xfsz = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, hard))
    try:
        with pytest.raises(OSError) as failed:
            save_policy(model, tmp_path / "policy", meta)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, on_xfsz)
    assert failed.value.errno == errno.EFBIG
    assert (tmp_path / "policy.zip").read_bytes() == good
    assert _temporaries(tmp_path) == []


def test_a_rerun_into_a_finished_run_is_refused_naming_it_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*RUN, "--out", str(out)]) == 0
    before = (out / "summary.json").read_bytes()
    capsys.readouterr()
    assert main([*RUN, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {out}: holds a complete run of scenario ieee13_fixedtap_none (finished " in err
    assert "violation integral 0.0 pu.s); give --overwrite to replace it" in err
    assert (out / "summary.json").read_bytes() == before
    assert main([*RUN, "--out", str(out), "--overwrite"]) == 0
    assert "note: replacing a complete run of scenario ieee13_fixedtap_none" in capsys.readouterr().err
    assert json.loads((out / "summary.json").read_text())["status"] == "complete"


@pytest.mark.slow
def test_evaluate_refuses_a_run_folder_holding_a_run_unless_overwrite(tmp_path, capsys):
    """``evaluate`` checks every run folder it would write before any run starts (issue 29's gap)."""
    out = tmp_path / "eval"
    evaluate = ["evaluate", "ieee13_ppo", "--scenarios", "ieee13_none", "--set", "duration_s=3", "--no-progress"]
    assert main([*RUN, "--out", str(out / "ieee13_none_baseline")]) == 0
    before = (out / "ieee13_none_baseline" / "summary.json").read_bytes()
    capsys.readouterr()
    assert main([*evaluate, "--baseline", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"run folder of {out} {out / 'ieee13_none_baseline'}: holds a complete run of scenario" in err
    assert not (out / "ieee13_none").exists()  # refused before the policy's run started
    assert (out / "ieee13_none_baseline" / "summary.json").read_bytes() == before
    assert main([*evaluate, "--out", str(out)]) == 0  # a folder it does not write into is no obstacle
    capsys.readouterr()
    assert main([*evaluate, "--baseline", "--out", str(out), "--overwrite"]) == 0
    summary = json.loads((out / "ieee13_none_baseline" / "summary.json").read_text())
    assert (summary["scenario"], summary["duration_s"]) == ("ieee13_none", 3)


def test_a_training_folder_is_refused_without_resume_or_overwrite(tmp_path, capsys):
    out = tmp_path / "train"
    out.mkdir()
    record = {"scenario": "toy", "steps": 5000, "timesteps": 5000, "segments": [{"status": "finished"}]}
    (out / "train.json").write_text(json.dumps({**record, "evaluation": {"policy_mean_reward": -1.5}}))
    assert main(["train", "toy", "--steps", "64", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "holds a training run on toy (5000 of 5000 steps, last segment finished, held-out mean reward -1.5" in err
    assert "continue it with --resume, give --overwrite to replace it" in err


def _wait_for(condition, what: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _lock_record(folder: Path) -> dict:
    try:
        return json.loads((folder / LOCK_FILE).read_text())
    except (OSError, ValueError):
        return {}


def _lock_is_free(folder: Path) -> bool:
    fd = os.open(folder / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


@pytest.mark.slow
def test_a_second_run_into_a_folder_in_use_fails_at_once_naming_the_first(tmp_path, capsys):
    out = tmp_path / "busy"
    args = ["run", "ieee13_fixedtap_none", "--set", "outputs.plots=false", "--no-progress", "--out", str(out)]
    first = subprocess.Popen(_cli(*args), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: _lock_record(out).get("pid") == first.pid, "the first run to lock its folder")
        second = subprocess.run(
            _cli(*args, "--overwrite"), check=False, env=ENV, capture_output=True, text=True, timeout=300
        )
        assert second.returncode == 2
        assert f"in use by another openg2g command (PID {first.pid}: run ieee13_fixedtap_none" in second.stderr
        assert not _lock_is_free(out)
        _wait_for(lambda: (out / "summary.json").is_file(), "the first run's first summary")
    finally:
        first.kill()  # SIGKILL: no handler runs, the operating system releases the lock
        first.communicate(timeout=60)
    assert _lock_is_free(out)
    # what the killed run left is an incomplete run, and a rerun says so
    assert main([*RUN, "--out", str(out)]) == 2
    assert "holds an incomplete run of scenario ieee13_fixedtap_none (last written" in capsys.readouterr().err


def _toy_suite(directory: Path) -> Path:
    suite = {
        "suite": "killed",
        "controllers": [{"name": "rule_based", "kind": "rule_based", "params": {"hold_s": 2}}],
        "cases": [
            {
                "name": "t13",
                "scenario": "ieee13_fixedtap_none",
                "variations": [{"zip": {"datacenters.0.bus": ["675", "692"]}}],
            }
        ],
    }
    path = directory / "suite.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


def _complete_rows(out: Path) -> int:
    try:
        return int((pd.read_csv(out / "cases.csv")["status"] == "complete").sum())
    except (OSError, ValueError, KeyError):
        return 0


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_a_killed_benchmark_keeps_the_tables_of_its_finished_runs(tmp_path, sig):
    out = tmp_path / "bench"
    cmd = _cli(
        "benchmark", str(_toy_suite(tmp_path)), "--out", str(out), "--engine", "serial", "--no-progress", "--no-plot"
    )
    proc = subprocess.Popen([*cmd, "--set", "duration_s=5"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: _complete_rows(out) >= 1, "the first run to finish")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 130), err.decode()
    cases = pd.read_parquet(out / "cases.parquet")
    assert pd.read_csv(out / "cases.csv")["run_id"].tolist() == cases["run_id"].tolist()
    done = cases[cases["status"] == "complete"]
    assert len(done) >= 1 and len(done) < 6
    for run_id in done["run_id"]:
        summary = json.loads((out / "runs" / run_id / "summary.json").read_text())
        row = done[done["run_id"] == run_id].iloc[0]
        assert row["violation_integral_pu_s"] == summary["violation_integral_pu_s"]
    assert "none" in pd.read_csv(out / "leaderboard.csv")["controller"].tolist()
    assert _temporaries(out) == []

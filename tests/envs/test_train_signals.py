"""`openg2g train --n-envs 2` stopped by a signal to the parent process alone (``kill -INT PID``,
``kill PID``, a scheduler's stop): every time it exits, with a loadable checkpoint, its segment
marked interrupted and no env worker left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from openg2g.envs.policy import load_policy
from openg2g.envs.training_run import latest_checkpoint

ROOT = Path(__file__).resolve().parents[2]
TRIES = 5
EXIT_TIMEOUT_S = 180  # the failure criterion: a hung run never exits (before the fix: 3 of 6 tries)


def _train(out: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "openg2g", "train", "toy", "--set", "duration_s=31", "--n-envs", "2"]
    command += ["--steps", "10000000", "--out", str(out), "--no-progress", "--eval-episodes", "0"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _segments(out: Path) -> list[dict]:
    try:
        return json.loads((out / "train.json").read_text())["segments"]
    except (OSError, ValueError):  # not written yet
        return []


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    left = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p)
        except psutil.NoSuchProcess:
            pass
    return left


@pytest.mark.slow  # 2 x 5 training starts in subprocesses: several minutes on 2 cores
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_the_parent_alone_stops_training_cleanly(tmp_path, sig):
    for k in range(TRIES):
        out = tmp_path / f"try{k}"
        proc = _train(out)
        try:
            while not _segments(out) and proc.poll() is None:  # the segment starts once the workers run
                time.sleep(0.2)
            assert proc.poll() is None, proc.communicate()[1].decode()
            time.sleep(0.7 * k)  # later tries land in steps, updates and checkpoints further on
            family = psutil.Process(proc.pid).children(recursive=True)
            assert len(family) >= 2  # the two env workers (and multiprocessing's helpers)
            os.kill(proc.pid, sig)  # the parent only: the workers get nothing
            _, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 128 + sig, err.decode()
        assert "checkpoints kept in" in err.decode()
        _, left = psutil.wait_procs(_alive(family), timeout=60)
        assert not _alive(left), [p.cmdline() for p in _alive(left)]
        segment = _segments(out)[-1]
        assert segment["status"] == "interrupted" and segment["to_step"] is not None
        found = latest_checkpoint(out / "checkpoints")
        assert found is not None and found[1] == segment["to_step"]
        model, meta = load_policy(found[0])
        assert meta.timesteps == found[1] and model.observation_space.shape == (15,)

"""How ``openg2g run`` ends when it is stopped or cannot write: Ctrl-C while it starts, a burst of
Ctrl-C while it runs, a disk full from the start. Each ends with one message and no traceback, and
what the run folder keeps says what happened."""

from __future__ import annotations

import errno
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

from openg2g.cli.main import main
from openg2g.scenario import loaded as loaded_module

REPO = Path(__file__).resolve().parents[1]
CTRL_C = "interrupted by the user (Ctrl-C)\n"


def _openg2g(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    """``openg2g ARGS`` in a subprocess, as the installed command runs it (this checkout's code);
    it prints ``main`` on stdout once :func:`~openg2g.cli.main.main` has taken the stop signals and
    starts the command (a signal sent before that, in Python's start-up or the entry point's call,
    is outside openg2g's reach and would end in Python's own traceback)."""
    command = (
        "import sys\n"
        "import openg2g.cli.main as cli\n"
        "command = cli._stoppable\n"
        "def started(*args):\n"
        "    print('main', flush=True)\n"
        "    return command(*args)\n"
        "cli._stoppable = started\n"
        "sys.exit(cli.main())\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", command, *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,  # type: ignore[call-overload]
    )


@pytest.mark.slow  # a second or two of imports in the subprocess before it reads the scenario
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_ctrl_c_while_the_scenario_is_read_ends_with_one_line_and_status_130(tmp_path: Path) -> None:
    """The scenario is a pipe nobody writes: the command waits in reading it, and Ctrl-C lands there
    (it used to print a KeyboardInterrupt traceback)."""
    scenario = tmp_path / "waits.yaml"
    os.mkfifo(scenario)
    proc = _openg2g("run", str(scenario), "--out", str(tmp_path / "out"), "--no-progress")
    deadline = time.monotonic() + 60
    while True:  # a pipe opens for writing, without waiting, only once its reader has opened it
        try:
            writer = os.open(scenario, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            assert exc.errno == errno.ENXIO and time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(writer)
    assert (proc.returncode, err) == (130, CTRL_C)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("delay_s", [0.0, 0.1, pytest.param(0.4, marks=pytest.mark.slow)])
def test_ctrl_c_while_the_command_starts_ends_with_one_line_and_status_130(tmp_path: Path, delay_s: float) -> None:
    """Ctrl-C while the command's modules load and the scenario is checked (where it lands varies:
    any place must end the same way). Python's own start-up and the import of the entry point
    before it (tens of milliseconds) are outside openg2g's reach."""
    proc = _openg2g("run", "ieee13_none", "--out", str(tmp_path / "out"), "--no-progress")
    assert proc.stdout is not None and proc.stdout.readline() == "main\n"
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err in (CTRL_C, f"interrupted; partial outputs kept in {tmp_path / 'out'}\n"), err


@pytest.mark.slow
def test_a_burst_of_ctrl_c_during_a_run_leaves_the_summary_interrupted(tmp_path: Path) -> None:
    """Ctrl-C pressed several times at once (a signal every millisecond for half a second): the
    first stops the run; the others used to land in its closing (the summary left saying
    ``running`` behind complete tables) or in its exit (a traceback, the process killed by SIGINT)."""
    out = tmp_path / "out"
    proc = _openg2g("run", "ieee13_none", "--out", str(out), "--no-progress", "--set", "outputs.flush_every_s=1")
    deadline = time.monotonic() + 120
    while not list((out / "grid").glob("part-00001.parquet")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    for _ in range(500):
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGINT)
        time.sleep(0.001)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, f"interrupted; partial outputs kept in {out}\n")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["error"] == CTRL_C.strip()
    assert pd.read_parquet(out / "grid")["t_s"].iloc[-1] == pytest.approx(summary["sim_time_s"])


def _files_of_at_most(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.slow  # a whole start-up in a subprocess; the same in-process case is in the fast path (below)
def test_a_disk_full_from_the_start_says_so_and_why_no_traceback_is_kept(tmp_path: Path) -> None:
    """No file may pass 200 bytes (RLIMIT_FSIZE): the folder's lock note fits, the scenario copy does
    not, nor does the traceback. error.txt used to be left empty (or cut short), the error itself a
    traceback."""
    out = tmp_path / "out"
    proc = _openg2g("run", "ieee13_none", "--out", str(out), "--no-progress", preexec_fn=lambda: _files_of_at_most(200))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert err == (
        f"note: the traceback could not be kept in {out / 'error.txt'} (File too large)\n"
        f"error: cannot write {out / 'scenario.yaml'}: [Errno 27] File too large\n"
    )
    assert sorted(p.name for p in out.iterdir()) == [".openg2g.lock"]


def test_the_traceback_is_kept_whole_when_the_scenario_copy_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def disk_full(path: Path, text: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(loaded_module, "write_text_atomic", disk_full)
    out = tmp_path / "out"
    assert main(["run", "ieee13_none", "--out", str(out), "--no-progress"]) == 1
    assert capsys.readouterr().err == (
        f"traceback: {out / 'error.txt'}\n"
        f"error: cannot write {out / 'scenario.yaml'}: [Errno 28] No space left on device\n"
    )
    kept = (out / "error.txt").read_text()
    assert kept.startswith("Traceback (most recent call last):")
    assert kept.rstrip().endswith("No space left on device")


def test_a_command_run_from_python_leaves_the_signal_handlers_as_it_found_them(tmp_path: Path) -> None:
    """``run`` makes SIGTERM stop it and, once stopped, ignores the rest of a burst (its handlers are
    in place before it reads the scenario, here one that does not exist); a caller in Python (a
    test, a notebook) keeps its own handlers after it."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert main(["run", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "out")]) == 2
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def _load_hit_by_ctrl_c(name: str, overrides: object = ()) -> None:
    """Loading the scenario as Ctrl-C lands in code that turns exceptions into its own (pydantic-core
    building a model's validator as the scenario modules are imported reports a ``SchemaError``)."""
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt as exc:
        raise RuntimeError(f'Error building "model" validator:\n  KeyboardInterrupt: {exc}') from None


def test_a_ctrl_c_that_became_another_error_ends_as_a_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from openg2g.scenario import loader

    monkeypatch.setattr(loader, "load_scenario", _load_hit_by_ctrl_c)
    assert main(["run", "ieee13_none", "--out", str(tmp_path / "out"), "--no-progress"]) == 130
    assert capsys.readouterr().err == CTRL_C


def test_the_same_error_without_a_signal_is_not_taken_for_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from openg2g.scenario import loader

    def broken(name: str, overrides: object = ()) -> None:
        raise RuntimeError('Error building "model" validator')

    monkeypatch.setattr(loader, "load_scenario", broken)
    with pytest.raises(RuntimeError, match="validator"):
        main(["run", "ieee13_none", "--out", str(tmp_path / "out"), "--no-progress"])

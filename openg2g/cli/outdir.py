"""Output folders of the commands that write runs: checked, locked and kept under ``runs/``.

Every writing command (``run``, ``sweep``, ``benchmark``, ``study``, ``train``, ``evaluate``) takes its folder
through :func:`prepare_out_dir`, which

- proves the folder writable before anything runs;
- locks it for as long as the command runs: an OS lock (``flock``) on ``OUT/.openg2g.lock``, which
  the operating system releases when the process ends however it ends (a crash or ``kill -9``
  included), so a second command into the same folder at the same time fails at once, naming the
  first one's PID;
- refuses to write over what an earlier command left there (a finished or an interrupted run, a
  sweep, a suite, a study, a training run) unless the user gives ``--overwrite``; the message
  names what is there: the command, its scenario or name, its state, when it was written and its
  key figure. A command that resumes (a sweep, suite or study of the same name; ``train
  --resume``) continues what it finds.

The lock file keeps one line of JSON about the last command that held it (``pid``, ``command``,
``name``, ``started``); that is how a study's folder, which has no file of its own that names it,
is recognized.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import os
import re
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from openg2g.core.errors import ScenarioError
from openg2g.core.folder_lock import LOCK_FILE

__all__ = [
    "LOCK_FILE",
    "FolderContents",
    "add_overwrite_option",
    "default_out_dir",
    "folder_contents",
    "prepare_out_dir",
    "refuse_file_path",
    "stop_cleanly_on_signals",
]

_STUDY_TABLES = ("hosting_capacity.parquet", "siting.parquet", "plan.json")

_held: dict[Path, int] = {}
"""Lock file descriptors this process holds, by resolved folder (kept open until the process ends)."""


@dataclass(frozen=True)
class FolderContents:
    """What an earlier command left in an output folder.

    :param command: ``run``, ``sweep``, ``benchmark``, ``study`` or ``train``.
    :param name: its scenario (``run``, ``train``), sweep, suite or study name; ``""`` if unknown.
    :param description: one phrase for messages, e.g. ``a complete run of scenario ieee13_ofo
        (finished 2026-11-25 21:30; violation integral 1.234 pu.s)``.
    """

    command: str
    name: str
    description: str


def _when(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime).strftime("%Y-%m-%d %H:%M:%S")


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``, or ``None`` if it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _run_contents(path: Path) -> FolderContents | None:
    summary_path = path / "summary.json"
    summary = _read_json(summary_path)
    if summary is None:
        if not (path / "scenario.yaml").is_file():
            return None
        return FolderContents(
            "run",
            "",
            f"an incomplete run (scenario.yaml written {_when(path / 'scenario.yaml')}, no readable summary.json: "
            "it ended before its first output)",
        )
    name = str(summary.get("scenario", ""))
    status = summary.get("status")
    reached = f"at t = {summary.get('sim_time_s', '?')} of {summary.get('duration_s', '?')} s"
    if status == "complete":
        figure = summary.get("violation_integral_pu_s")
        state = f"a complete run of scenario {name} (finished {_when(summary_path)}; violation integral {figure} pu.s)"
    elif status == "running":
        state = f"an incomplete run of scenario {name} (last written {_when(summary_path)} {reached}; killed)"
    else:
        state = f"an {status} run of scenario {name} (stopped {_when(summary_path)} {reached})"
    return FolderContents("run", name, state)


def _statuses(path: Path) -> list[str] | None:
    """The ``status`` column of a parquet table, or ``None`` if it cannot be read."""
    import pyarrow.parquet as pq

    try:
        return [str(s) for s in pq.read_table(path, columns=["status"]).column("status").to_pylist()]
    except (OSError, KeyError, ValueError):
        return None


def _runs_phrase(table: Path, n_runs: object) -> str:
    statuses = _statuses(table) if table.is_file() else None
    if statuses is None:
        return f"no readable {table.name} ({n_runs} runs planned)"
    return f"{statuses.count('complete')} of {n_runs} runs complete, {table.name} written {_when(table)}"


def _sweep_contents(path: Path) -> FolderContents | None:
    sweep = _read_json(path / "sweep.json")
    if sweep is None:
        return None
    name = str((sweep.get("spec") or {}).get("name", ""))
    phrase = _runs_phrase(path / "results.parquet", sweep.get("n_runs", "?"))
    return FolderContents("sweep", name, f"sweep {name} ({phrase})")


def _benchmark_contents(path: Path) -> FolderContents | None:
    bench = _read_json(path / "benchmark.json")
    if bench is None:
        return None
    name = str((bench.get("spec") or {}).get("suite", ""))
    phrase = _runs_phrase(path / "cases.parquet", bench.get("n_runs", "?"))
    board = path / "leaderboard.csv"
    with contextlib.suppress(OSError, IndexError, ValueError):
        first = board.read_text(encoding="utf-8").splitlines()[:2]
        row = dict(zip(first[0].split(","), first[1].split(",")))
        phrase += f"; rank 1: {row['controller']}, {row['violation_integral_pu_s_shared']} pu.s on the shared cases"
    return FolderContents("benchmark", name, f"benchmark suite {name} ({phrase})")


def _train_contents(path: Path) -> FolderContents | None:
    record = _read_json(path / "train.json")
    if record is None:
        if not (path / "checkpoints").is_dir():
            return None
        return FolderContents("train", "", "a training run (checkpoints, no readable train.json)")
    name = str(record.get("scenario", ""))
    segments = record.get("segments") or [{}]
    status = segments[-1].get("status", "?") if isinstance(segments[-1], dict) else "?"
    phrase = f"{record.get('timesteps', '?')} of {record.get('steps', '?')} steps, last segment {status}"
    reward = (record.get("evaluation") or {}).get("policy_mean_reward")
    if reward is not None:
        phrase += f", held-out mean reward {reward}"
    return FolderContents(
        "train", name, f"a training run on {name} ({phrase}; train.json written {_when(path / 'train.json')})"
    )


def _study_contents(path: Path, name: str) -> FolderContents | None:
    tables = [path / t for t in _STUDY_TABLES if (path / t).is_file()]
    if tables:
        return FolderContents("study", name, f"study {name or '?'} ({tables[0].name} written {_when(tables[0])})")
    if (path / "runs").is_dir():
        return FolderContents("study", name, f"an incomplete study {name or '?'} (runs, no table yet)")
    return None


def folder_contents(path: Path, last_command: str | None = None, last_name: str = "") -> FolderContents | None:
    """What an earlier command left in ``path``, or ``None`` if nothing openg2g recognizes.

    :param last_command: the command that last held the folder's lock, if known; its files are
        read first (a run written over a sweep's folder is a run).
    :param last_name: that command's name (a study's name is known only from the lock file).
    """
    readers = {
        "run": _run_contents,
        "sweep": _sweep_contents,
        "benchmark": _benchmark_contents,
        "train": _train_contents,
        "study": lambda p: _study_contents(p, last_name),
    }
    order = sorted(readers, key=lambda c: c != last_command)
    for command in order:
        found = readers[command](path)
        if found is not None:
            return found
    return None


def _refuse(path: Path, option: str, problem: str) -> ScenarioError:
    return ScenarioError([(f"{option} {path}", problem)])


def _lock(path: Path, option: str) -> tuple[int, dict[str, Any]]:
    """Take the folder's lock; returns its descriptor and the record of the last holder.

    :raises ScenarioError: another process holds it (the message names its PID and command).
    """
    lock_path = path / LOCK_FILE
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise _refuse(path, option, f"cannot lock {lock_path} ({exc.strerror or exc})") from None
        holder = _read_json(lock_path) or {}
        raise _refuse(
            path,
            option,
            f"in use by another openg2g command (PID {holder.get('pid', 'unknown')}: "
            f"{holder.get('command', '?')} {holder.get('name', '')}, started {holder.get('started', '?')}); "
            "wait for it to end or choose another folder",
        ) from None
    with os.fdopen(os.dup(fd), "r", encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        record = json.loads(text)
    except ValueError:
        record = {}
    return fd, record if isinstance(record, dict) else {}


def refuse_file_path(path: Path, option: str) -> None:
    """Refuse a folder to write into that is a file, or lies below one (which ``mkdir`` would fail
    on with a bare ``FileExistsError`` or ``NotADirectoryError``).

    :param option: how the user gave the path, for the message (``--out``, ``DIR``).
    :raises ScenarioError: naming the path and the file.
    """
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                where = "is a file, not a folder" if p == path else f"is below {p}, which is a file"
                raise ScenarioError([(f"{option} {path}", where)])
            break


def prepare_out_dir(
    path: Path | str,
    option: str = "--out",
    *,
    command: str,
    name: str,
    overwrite: bool = False,
    resume: bool = False,
) -> Path:
    """Create ``path`` (a folder) if needed, prove it writable, lock it and check what it holds.

    The lock is held until the process ends. A process that already holds it (a second command
    in the same Python session) takes it again.

    :param option: how the user gave the path, for messages (``--out``).
    :param command: the command about to write (``run``, ``sweep``, ``benchmark``, ``study``, ``train``).
    :param name: what it runs: the scenario, sweep, suite or study name.
    :param overwrite: write over whatever an earlier command left in the folder.
    :param resume: continue what the same command with the same ``name`` left there.
    :raises ScenarioError: ``path`` or a folder above it is a file, or the folder cannot be created or
        written (no permission, read-only or full disk, a pseudo file system such as ``/proc``), or
        ``path`` is an empty string; another process holds the folder's lock; the folder holds an
        earlier command's outputs and neither ``overwrite`` nor a matching ``resume`` allows it.
    """
    if isinstance(path, str) and not path.strip():
        raise ScenarioError([(f"{option} {path!r}", "is empty: give a folder (omit the option for the default)")])
    path = Path(path)
    refuse_file_path(path, option)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path, prefix=".openg2g-write-check-") as probe:
            probe.write(b"x")
            probe.flush()
    except OSError as exc:
        raise ScenarioError([(f"{option} {path}", f"cannot write there ({exc.strerror or exc})")]) from None
    key = path.resolve()
    last: dict[str, Any] = {}
    if key in _held:
        fd = _held[key]
    else:
        fd, last = _lock(path, option)
    found = folder_contents(path, last.get("command"), str(last.get("name", "")))
    same = found is not None and found.command == command and found.name in ("", name)
    if found is not None and not overwrite and not (resume and same):
        if key not in _held:
            os.close(fd)  # released: the refused command leaves the folder as it was
        how = "continue it with --resume, " if command == "train" and same else ""
        raise _refuse(
            path, option, f"holds {found.description}; {how}give --overwrite to replace it, or another folder"
        )
    if found is not None and overwrite:
        print(f"note: replacing {found.description} in {path}", file=sys.stderr)
    _held[key] = fd
    record = {"pid": os.getpid(), "command": command, "name": name, "started": datetime.now().isoformat("T", "seconds")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
    return path


def add_overwrite_option(parser: argparse.ArgumentParser, resumes: str = "") -> None:
    """Add ``--overwrite`` to a writing command.

    :param resumes: what the command continues instead of refusing (for the help text), if anything.
    """
    also = f" ({resumes} continues without it)" if resumes else ""
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help=f"write over the outputs of an earlier command in the output folder{also}; without it such a "
        "folder is refused, naming what it holds",
    )


def stop_cleanly_on_signals(once: bool = False) -> None:
    """Make SIGTERM (``kill``) end a writing command as Ctrl-C does: what finished is written,
    the summary says interrupted. Also restore Ctrl-C for a command started in the background,
    which a shell starts with SIGINT ignored.

    :param once: only the first signal stops the command; those after it are ignored until the
        process exits. For a command that, once stopped, only closes its outputs and says so
        (``run``): the rest of a burst of Ctrl-C would otherwise land in that closing or in its
        message, however short they are.
    """
    handlers: dict[int, Callable[[int, Any], None]] = {
        signal.SIGTERM: _stop_on_sigterm,
        signal.SIGINT: signal.default_int_handler,
    }
    if once:
        stopped = False

        def first_only(signum: int, frame: Any) -> None:
            nonlocal stopped
            if not stopped:
                stopped = True
                handlers[signum](signum, frame)

        for s in handlers:
            signal.signal(s, first_only)
        return
    for s, handler in handlers.items():
        signal.signal(s, handler)


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt("terminated by SIGTERM")


def default_out_dir(name: str, kind: str = "scenario") -> Path:
    """``runs/<name>``, with ``name`` reduced to letters, digits, ``_``, ``.`` and ``-``.

    A name is text, not a path: ``../../x`` or ``/abs/x`` must not put the outputs outside
    ``runs/``. When the name changes, a note on stderr says so.

    :param kind: what the name belongs to, for the note (``scenario``, ``study``).
    """
    safe = re.sub(r"[^\w.-]+", "_", name).strip("._-") or "run"
    if safe != name:
        print(f"note: {kind} name {name!r} is not a plain folder name; writing to runs/{safe}", file=sys.stderr)
    return Path("runs") / safe

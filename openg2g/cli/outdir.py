"""Output folders of the commands that write runs: checked before anything runs, kept under ``runs/``."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from openg2g.core.errors import ScenarioError

__all__ = ["default_out_dir", "prepare_out_dir"]


def prepare_out_dir(path: Path | str, option: str = "--out") -> Path:
    """Create ``path`` (a folder) if needed and prove it writable, so a run never fails at its first write.

    :param option: how the user gave the path, for the message (``--out``).
    :raises ScenarioError: ``path`` or a folder above it is a file, or the folder cannot be created or
        written (no permission, read-only or full disk, a pseudo file system such as ``/proc``), or
        ``path`` is an empty string.
    """
    if isinstance(path, str) and not path.strip():
        raise ScenarioError([(f"{option} {path!r}", "is empty: give a folder (omit the option for the default)")])
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                where = "is a file, not a folder" if p == path else f"is below {p}, which is a file"
                raise ScenarioError([(f"{option} {path}", where)])
            break
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path, prefix=".openg2g-write-check-") as probe:
            probe.write(b"x")
            probe.flush()
    except OSError as exc:
        raise ScenarioError([(f"{option} {path}", f"cannot write there ({exc.strerror or exc})")]) from None
    return path


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

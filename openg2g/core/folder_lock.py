"""The lock of an output folder: which file it is, and whether a live process holds it.

A writing command (``openg2g run``, ``sweep``...) holds an OS lock (``flock``) on
``OUT/.openg2g.lock`` for as long as it runs (:func:`openg2g.cli.outdir.prepare_out_dir`); the
operating system releases it when the process ends, however it ends. So a folder whose summary
still says ``running`` but whose lock nobody holds belongs to a process that died without
writing its last summary (``kill -9``, out of memory, a power cut).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_FILE", "lock_held"]

LOCK_FILE = ".openg2g.lock"
"""The lock file of an output folder (hidden, so table readers skip it)."""


def lock_held(folder: Path) -> bool | None:
    """Whether a process holds ``folder``'s lock; ``None`` when the folder has no lock file (it was
    not written by a command: the Python API takes no lock).

    The test takes a shared lock without waiting and drops it at once: a command that starts in
    the same microsecond into the same folder would find the folder busy and say so, never write
    beside another.

    :raises OSError: the lock file exists but cannot be opened or locked (no permission).
    """
    try:
        fd = os.open(Path(folder) / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise
    finally:
        os.close(fd)  # closing the only descriptor of this open file drops the shared lock
    return False

"""Whole-file writes that a crash, a kill or a full disk cannot leave half done.

Every file openg2g writes in one piece (``summary.json``, ``scenario.yaml``, policies, the tables
of sweeps, benchmarks and studies, figures) is written to a temporary file in the same folder and
then renamed over its name with :func:`os.replace`, which is atomic on one file system: a reader
sees the previous file or the new one, never part of one. A write that fails removes its
temporary file and leaves the previous file as it was.

The temporary name starts with ``.`` and keeps the final suffix (``.summary.tmp-<pid>.json``), so
tools that pick files by suffix write the right format and readers of a folder (parquet datasets,
checkpoint lookups) skip it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from openg2g.core.jsontext import json_text

__all__ = ["replace_atomically", "write_json_atomic", "write_text_atomic"]


@contextmanager
def replace_atomically(path: Path | str) -> Iterator[Path]:
    """A temporary path to write ``path``'s new contents to; renamed over ``path`` when the block ends.

    If the block raises (a serializer error, a full disk, Ctrl-C), the temporary file is removed,
    ``path`` keeps its previous contents and the exception propagates.

    :param path: the file to replace (its folder must exist).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path | str, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) through :func:`replace_atomically`."""
    with replace_atomically(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: Path | str, data: Mapping[str, Any], indent: int = 2) -> None:
    """Replace ``path`` with ``data`` as standard JSON (:func:`~openg2g.core.jsontext.json_text`)
    through :func:`replace_atomically`."""
    write_text_atomic(path, json_text(data, str(path), indent=indent) + "\n")

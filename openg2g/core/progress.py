"""Progress bars: drawn on a terminal only, so logs, pipes and CI output get no carriage returns."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["progress_bar"]


def progress_bar(show: bool = True, **kwargs: Any) -> tqdm:
    """A tqdm bar on stderr, disabled unless ``show`` and stderr is a terminal.

    A disabled bar takes ``update`` and ``set_postfix`` and writes nothing, so callers need no
    branch of their own.

    :param show: the caller's wish (``--no-progress`` gives False).
    :param kwargs: passed to ``tqdm`` (``total``, ``desc``, ``unit``, ...).
    """
    from tqdm import tqdm  # imported on use: commands without a bar do not load it

    stream = sys.stderr
    return tqdm(file=stream, disable=not (show and stream.isatty()), dynamic_ncols=True, **kwargs)

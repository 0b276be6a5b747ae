"""Stop signals held back while a step that must not be cut in half runs.

Ctrl-C (SIGINT) and, in the CLI, SIGTERM end a run by raising ``KeyboardInterrupt`` wherever the
main thread is. Inside a flush of the outputs that would lose rows: the buffered rows are taken,
and the exception lands before they are written, while the summary already counts them.
:func:`stop_signals_deferred` notes a first signal inside its block and delivers it to the
handler it was meant for once the block has ended; a second signal is delivered at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["STOP_SIGNALS", "stop_signals_deferred"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals a user or a scheduler stops a command with."""


@contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """Run the block whole even if SIGINT or SIGTERM arrives, then deliver the signal.

    The first signal inside the block is noted and, once the block has ended without an error,
    handed to the handler that was in place (Ctrl-C's ``KeyboardInterrupt``, the CLI's SIGTERM
    handler, the default action). A second signal inside the block is handed over at once, for a
    user who will not wait. Python runs signal handlers in the main thread only: elsewhere the
    block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    pending: list[tuple[int, FrameType | None]] = []

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)

    def note(signum: int, frame: FrameType | None) -> None:
        if pending:
            restore()
            _deliver(previous[signum], signum, frame)
        pending.append((signum, frame))

    for s in STOP_SIGNALS:
        signal.signal(s, note)
    try:
        yield
    finally:
        restore()
    if pending:
        signum, frame = pending[0]
        _deliver(previous[signum], signum, frame)


def _deliver(handler: Any, signum: int, frame: FrameType | None) -> None:
    """What ``signum`` would have done under ``handler`` (already restored as the process's)."""
    if callable(handler):
        handler(signum, frame)
    elif handler in (signal.SIG_DFL, None):
        signal.raise_signal(signum)

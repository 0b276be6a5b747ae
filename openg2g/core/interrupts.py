"""Stop signals held back while a step that must not be cut in half runs.

Ctrl-C (SIGINT) and, in the CLI, SIGTERM end a run by raising ``KeyboardInterrupt`` wherever the
main thread is. Inside a flush of the outputs that would lose rows: the buffered rows are taken,
and the exception lands before they are written, while the summary already counts them.
:func:`stop_signals_deferred` notes a first signal inside its block and delivers it to the
handler it was meant for once the block has ended; a second signal is delivered at once.

A burst of Ctrl-C (several SIGINTs a few milliseconds apart) is one request to stop, but each
signal raises anew: the second would land in the closing that the first began (the run writing
its last rows and a summary saying ``interrupted``) and leave the summary saying ``running``.
:func:`one_stop_signal` delivers the first signal inside its block and ignores the rest until the
block ends; :func:`ignore_stop_signals` ignores every one from then on, for a command that is
ending anyway.

A signal's ``KeyboardInterrupt`` is raised wherever the main thread is, and Python drops an
exception raised in a finalizer or a weakref callback (``Exception ignored in ...`` on stderr):
importlib's module-lock callback runs after each import, so a Ctrl-C while the modules load was
lost about once in 150 tries, and the command ran to its end. :func:`dropped_stops_raised` raises
such an interrupt again in the code that was running. Code that turns exceptions into its own can
turn it into another error (pydantic-core building a model's validator as an import defines the
model reports a ``SchemaError``): :func:`stop_signals_watched` says whether a stop signal came, so
that the error can be reported as the stop it was.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = [
    "STOP_SIGNALS",
    "dropped_stops_raised",
    "ignore_stop_signals",
    "one_stop_signal",
    "stop_handlers_restored",
    "stop_signals_deferred",
    "stop_signals_watched",
]

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


@contextmanager
def one_stop_signal() -> Iterator[None]:
    """Deliver the first SIGINT or SIGTERM inside the block to the handler in place, and ignore
    those after it until the block ends.

    For a block that closes what it runs when a stop signal ends it (``Simulation.run``): the
    closing, inside the block, runs whole however many signals follow. Blocks of
    :func:`stop_signals_deferred` inside it defer a first signal as always; once one has been
    delivered, they ignore the rest too. Main thread only: elsewhere the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    delivered = False

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)

    def first_only(signum: int, frame: FrameType | None) -> None:
        nonlocal delivered
        if delivered:
            return
        delivered = True
        handler = previous[signum]
        if not callable(handler):
            restore()  # the default action (the process ends) or nothing at all, as without the block
        _deliver(handler, signum, frame)

    for s in STOP_SIGNALS:
        signal.signal(s, first_only)
    try:
        yield
    finally:
        restore()


@contextmanager
def stop_handlers_restored() -> Iterator[None]:
    """Put back the SIGINT and SIGTERM handlers in place before the block when it ends, however it
    ends: for a command run inside a longer-lived Python process (a test, a notebook), which must
    not leave its handlers behind. Main thread only: elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


@contextmanager
def dropped_stops_raised() -> Iterator[None]:
    """Inside the block, a ``KeyboardInterrupt`` that Python drops (raised in a finalizer or a
    weakref callback, where it cannot propagate) is raised again, the same exception, a
    millisecond later in the main thread: in the code that was running when the callback ran, so
    the stop reaches whatever handles it there; unless stop signals are ignored by then
    (:func:`ignore_stop_signals`: the command is ending anyway). Every other dropped exception is
    reported as before. Main thread only: elsewhere the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reported = sys.unraisablehook
    in_hook = False

    def raise_again(unraisable: Any) -> None:
        nonlocal in_hook
        exc = unraisable.exc_value
        if not isinstance(exc, KeyboardInterrupt) or threading.current_thread() is not threading.main_thread():
            reported(unraisable)
            return
        handler = signal.getsignal(signal.SIGINT)
        if handler == signal.SIG_IGN:
            return

        def deliver(signum: int, frame: FrameType | None) -> None:
            if in_hook:  # an exception raised in the hook is dropped too: once it has returned
                _signal_main_thread_soon()
                return
            signal.signal(signal.SIGINT, handler)
            raise exc

        in_hook = True
        try:
            signal.signal(signal.SIGINT, deliver)
            # a real signal from another thread, not one sent here: Python would run its handler
            # before this hook returns; and a real one also ends a blocking wait (a read, a sleep)
            _signal_main_thread_soon()
        finally:
            in_hook = False

    sys.unraisablehook = raise_again
    try:
        yield
    finally:
        sys.unraisablehook = reported


@contextmanager
def stop_signals_watched() -> Iterator[Callable[[], bool]]:
    """Watch for SIGINT and SIGTERM in the block, whatever their handlers and the code they land in
    make of them: the callable given says whether one has arrived so far.

    Python's signal handling writes each signal that has a Python handler to its wakeup file
    (:func:`signal.set_wakeup_fd`); the block sets one of its own. An asyncio event loop started in
    the block sets another, and the signals after it are then not seen. Main thread only:
    elsewhere the callable says ``False``.
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    arrived: set[int] = set()

    def stopped() -> bool:
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(read_fd, 512):
                arrived.update(chunk)
        return any(s in arrived for s in STOP_SIGNALS)

    previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    try:
        yield stopped
    finally:
        signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)


def _signal_main_thread_soon() -> None:
    """Send SIGINT to the main thread in a millisecond, from a helper thread."""
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(0.001, signal.pthread_kill, (main, signal.SIGINT))
    timer.daemon = True
    timer.start()


def ignore_stop_signals() -> None:
    """Ignore SIGINT and SIGTERM from now on (main thread only): for a command already stopping,
    whose last message and exit a burst of Ctrl-C must not cut with a traceback."""
    if threading.current_thread() is threading.main_thread():
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)


def _deliver(handler: Any, signum: int, frame: FrameType | None) -> None:
    """What ``signum`` would have done under ``handler`` (already restored as the process's)."""
    if callable(handler):
        handler(signum, frame)
    elif handler in (signal.SIG_DFL, None):
        signal.raise_signal(signum)

"""Stop signals inside :func:`stop_signals_deferred` reach their handlers after the block, whole;
one Python would drop (raised in a weakref callback) is raised again by :func:`dropped_stops_raised`."""

from __future__ import annotations

import signal
import sys
import time
import weakref

import pytest

from openg2g.core.interrupts import (
    dropped_stops_raised,
    ignore_stop_signals,
    one_stop_signal,
    stop_signals_deferred,
    stop_signals_watched,
)


class Stopped(Exception):
    """What the test's SIGTERM handler raises (the CLI's raises KeyboardInterrupt)."""


def _raise_stopped(signum: int, frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def test_a_ctrl_c_inside_the_block_is_raised_after_it() -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt), stop_signals_deferred():
        signal.raise_signal(signal.SIGINT)
        steps.append("the rest of the block")
    assert steps == ["the rest of the block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_sigterm_reaches_the_handler_that_was_in_place() -> None:
    before = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        with pytest.raises(Stopped, match="SIGTERM"), stop_signals_deferred():
            signal.raise_signal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is _raise_stopped
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_second_signal_is_delivered_at_once() -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt), stop_signals_deferred():
        signal.raise_signal(signal.SIGINT)
        steps.append("between the two")
        signal.raise_signal(signal.SIGINT)
        steps.append("not reached")
    assert steps == ["between the two"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_signal_nothing_changes() -> None:
    with stop_signals_deferred():
        result = 2 + 2
    assert result == 4 and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_one_stop_signal_delivers_the_first_and_ignores_the_rest_of_a_burst() -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt), one_stop_signal():
        try:
            signal.raise_signal(signal.SIGINT)
        finally:  # the closing a stop begins: the rest of the burst must not cut it short
            for _ in range(3):
                signal.raise_signal(signal.SIGINT)
            steps.append("closed")
    assert steps == ["closed"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_deferred_block_inside_one_stop_signal_is_stopped_once() -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt), one_stop_signal():
        try:
            with stop_signals_deferred():
                signal.raise_signal(signal.SIGINT)  # noted
                signal.raise_signal(signal.SIGINT)  # a user who will not wait: delivered at once
                steps.append("not reached")
        finally:
            with stop_signals_deferred():
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGINT)
                steps.append("flushed whole")
    assert steps == ["flushed whole"]


class _Lock:
    """Stands for importlib's module lock, whose weakref callback runs when an import lets it go."""


def _drop_a_lock_whose_callback_is_interrupted(steps: list[str], message: str) -> None:
    """What a Ctrl-C during an import can do: the signal's KeyboardInterrupt is raised in the
    module-lock callback, where Python cannot propagate it. Then half a second of work, in steps
    of 10 ms."""

    def callback(ref: object) -> None:
        raise KeyboardInterrupt(message)

    lock = _Lock()
    ref = weakref.ref(lock, callback)
    del lock  # the callback runs here, and its exception goes to sys.unraisablehook
    assert ref() is None
    for i in range(50):
        time.sleep(0.01)
        steps.append(f"step {i}")


def test_an_interrupt_python_drops_is_lost_without_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    dropped: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: dropped.append(u.exc_value))
    steps: list[str] = []
    _drop_a_lock_whose_callback_is_interrupted(steps, "")
    assert len(steps) == 50
    assert [type(e) for e in dropped] == [KeyboardInterrupt]


def test_an_interrupt_python_drops_is_raised_again_where_the_work_goes_on() -> None:
    steps: list[str] = []
    hook = sys.unraisablehook
    with pytest.raises(KeyboardInterrupt, match="terminated by SIGTERM"), dropped_stops_raised():
        _drop_a_lock_whose_callback_is_interrupted(steps, "terminated by SIGTERM")
    assert len(steps) < 5  # raised a millisecond after the callback, in the sleep that followed it
    assert sys.unraisablehook is hook
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_interrupt_dropped_once_stop_signals_are_ignored_stays_dropped() -> None:
    steps: list[str] = []
    before = signal.getsignal(signal.SIGINT)
    try:
        with dropped_stops_raised():
            ignore_stop_signals()
            _drop_a_lock_whose_callback_is_interrupted(steps, "")
    finally:
        signal.signal(signal.SIGINT, before)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert len(steps) == 50


def test_other_dropped_exceptions_are_reported_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    dropped: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: dropped.append(u.exc_value))

    def callback(ref: object) -> None:
        raise ValueError("a bug in a finalizer")

    with dropped_stops_raised():
        lock = _Lock()
        ref = weakref.ref(lock, callback)
        del lock
    assert ref() is None and [str(e) for e in dropped] == ["a bug in a finalizer"]


def test_a_stop_signal_is_seen_whatever_its_handler_made_of_it() -> None:
    """A Ctrl-C whose KeyboardInterrupt was caught on its way (as code that turns exceptions into its
    own does) is still seen; another signal, handled in Python too, is not a stop."""
    usr1 = signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    try:
        with stop_signals_watched() as stopped:
            assert not stopped()
            signal.raise_signal(signal.SIGUSR1)
            assert not stopped()
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)
            assert stopped() and stopped()
        assert signal.set_wakeup_fd(-1) == -1  # the block's wakeup file is gone with it
    finally:
        signal.signal(signal.SIGUSR1, usr1)

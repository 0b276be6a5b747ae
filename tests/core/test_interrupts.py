"""Stop signals inside :func:`stop_signals_deferred` reach their handlers after the block, whole."""

from __future__ import annotations

import signal

import pytest

from openg2g.core.interrupts import one_stop_signal, stop_signals_deferred


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

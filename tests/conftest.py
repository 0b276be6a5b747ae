"""Fixtures for the whole suite."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _stop_handlers_kept() -> Iterator[None]:
    """Each test starts with the SIGINT and SIGTERM handlers the one before it found: a library a
    test drives in-process may leave its own behind (``ray.init`` installs a SIGTERM handler that
    ``ray.shutdown`` leaves), and the tests of Ctrl-C and of stopping commands, run after it in the
    same pytest worker, need Python's own."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, handler in before.items():
        if signal.getsignal(s) is not handler:
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as a terminal gives it: a shell starts a background job (``.ci/run &`` from a script)
    with SIGINT ignored, which Python then leaves ignored, and the tests of stopping a run (in this
    process and in the commands it starts, which inherit an ignored signal) would see nothing."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

"""The ``openg2g`` command: one sub-command per module in this package."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import sys
import threading
import traceback
from collections.abc import Sequence

from openg2g import __version__
from openg2g.cli.helptext import plain_help
from openg2g.core.errors import G2GError, ScenarioError
from openg2g.core.interrupts import ignore_stop_signals, stop_handlers_restored

__all__ = ["build_parser", "main"]

# Each module has register(subparsers), in the order shown by --help.
_COMMAND_MODULES = (
    "run",
    "validate",
    "new",
    "compare",
    "plot",
    "schema",
    "powerflow",
    "feeders",
    "traces",
    "scenarios",
    "train",
    "evaluate",
    "policy",
    "sweep",
    "study",
    "benchmark",
    "live",
    "app",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command."""
    parser = argparse.ArgumentParser(prog="openg2g", description="Datacenter-grid co-simulation.")
    parser.add_argument("--version", action="version", version=f"openg2g {__version__}")
    parser.add_argument(
        "--traceback",
        action="store_true",
        help="on an error, print Python's full traceback before the message (give it before the command)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMAND_MODULES:
        importlib.import_module(f"openg2g.cli.{name}").register(subparsers)
    plain_help(parser)  # the descriptions are module docstrings, written in reST
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, dispatch, and turn platform errors into one clear message.

    Exit status 2 for an input that is wrong (a scenario, sweep or option), 1 for any other
    platform error and for memory running out; ``--traceback`` prints the traceback of each too. A stop signal that reaches
    no command's own handling (Ctrl-C while the modules load or the scenario is read) ends with one
    line and status 130.

    :param argv: the command line; ``None``: the process's own (``sys.argv[1:]``), as the
        ``openg2g`` command runs it. The process then ends with the command, so once the command
        stops on a signal further ones are ignored: the rest of a burst of Ctrl-C must not print a
        traceback from the exit, and the process ends without the interpreter's teardown
        (:func:`_end_process`). Given ``argv`` (a caller in Python), the signal handlers in place
        before are restored when the command ends, and ``main`` returns.
    """
    # the try is the first statement: a Ctrl-C that comes as the command starts lands inside it
    try:
        with contextlib.nullcontext() if argv is None else stop_handlers_restored():
            code = _stoppable(argv)
            if code > 128:  # 128 + a signal's number: the command stopped on SIGINT or SIGTERM
                ignore_stop_signals()
    except KeyboardInterrupt as exc:
        code = _interrupted(exc)
    if argv is None:
        _end_process(code)
    return code


def _end_process(code: int) -> None:
    """End the process now with status ``code``, skipping the interpreter's teardown; or return,
    for Python's own exit, where that would do more than free memory.

    Every command has closed its outputs and released its folders' locks when it returns; what
    Python's exit does then is free every object and module one by one: 0.25 s after a 60 s
    ieee13 run, most of it numba's and numpy's. The exit functions (``atexit``: multiprocessing's
    and pebble's pools, Ray's shutdown, logging's flush, ``weakref.finalize`` such as temporary
    folders) still run, and stdout and stderr are flushed. Python's exit is left to do it when a
    thread that it would wait for still runs, or when a flush fails (it reports that, status 120).
    """
    if any(not t.daemon and t is not threading.main_thread() and t.is_alive() for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or failing stream
        return
    os._exit(code)


def _stoppable(argv: Sequence[str] | None) -> int:
    """:func:`_dispatch`, a stop signal that reaches here said in one line (status 130)."""
    try:
        return _dispatch(argv)
    except KeyboardInterrupt as exc:
        return _interrupted(exc)


def _interrupted(exc: KeyboardInterrupt) -> int:
    """Say a stop signal in one line; status 130."""
    ignore_stop_signals()  # the rest of a burst must not cut this message
    print(str(exc) or "interrupted by the user (Ctrl-C)", file=sys.stderr)
    return 130


def _dispatch(argv: Sequence[str] | None) -> int:
    """Parse and run the command; a platform error is one message and status 2 or 1."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except G2GError as exc:
        if args.traceback:
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        if isinstance(exc, ScenarioError):
            for loc, msg in exc.problems:
                print(f"error: {loc}: {msg}", file=sys.stderr)
            return 2
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except MemoryError as exc:
        if args.traceback:
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        print(
            f"error: openg2g {args.command} ran out of memory (a large feeder's per-bus tables: "
            "--set outputs.voltages=envelope keeps only their per-step envelope)",
            file=sys.stderr,
        )
        return 1
    except BrokenPipeError:
        # the reader went away (`openg2g ... | head`): not an error of ours, and nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())

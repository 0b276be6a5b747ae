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
from collections.abc import Callable, Sequence
from typing import Any

from openg2g import __version__
from openg2g.cli.helptext import plain_help
from openg2g.core.errors import G2GError, ScenarioError
from openg2g.core.interrupts import (
    dropped_stops_raised,
    ignore_stop_signals,
    stop_handlers_restored,
    stop_signals_watched,
)

__all__ = ["build_parser", "main"]

_COMMANDS = {
    "run": "run a scenario file",
    "validate": "validate scenario, sweep, study and benchmark suite files",
    "new": "start a scenario or a controller of your own",
    "compare": "compare run summaries side by side",
    "plot": "draw a finished run's plots from its tables",
    "schema": "print the scenario file reference",
    "powerflow": "one power flow on a feeder, with an optional datacenter load",
    "feeders": "list bundled feeders, rebuild them from OpenDSS sources, or check an OpenDSS file against OpenDSS",
    "traces": "list, build and import power-trace libraries",
    "scenarios": "list the bundled scenario, sweep, study and suite files",
    "train": "train an RL policy on a scenario",
    "evaluate": "run scenarios with a trained RL policy as controller",
    "policy": "prepare an SB3 model trained elsewhere for rl_policy (policy wrap)",
    "sweep": "run a parameter sweep over a scenario",
    "study": "hosting capacity, siting, PV placement and load-loss studies",
    "benchmark": "compare controllers over a suite of cases",
    "live": "hardware in the loop: run against real inference servers (live demo, live check URL)",
    "app": "local web app: runs over time, the feeder map, comparisons, hosting capacity, siting, leaderboard, what-if runs",
}
"""Each command, in the order ``--help`` lists them, with the line it shows there: ``openg2g.cli.<name>``
has ``register(subparsers)``, which adds the command's parser (its options, description, function)."""


class _Commands(argparse._SubParsersAction):
    """The sub-commands' action: a command's parser gets its ``--help`` line from :data:`_COMMANDS`."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        kwargs.setdefault("help", _COMMANDS[name])
        return super().add_parser(name, **kwargs)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every sub-command; given ``command``, with only that one's options
    (the others by name and help line), so that a command imports only its own module (and
    ``openg2g --help``, with ``command`` ``""``, none: no pydantic, numpy or gymnasium, some 0.5 s)."""
    parser = argparse.ArgumentParser(prog="openg2g", description="Datacenter-grid co-simulation.")
    parser.add_argument("--version", action="version", version=f"openg2g {__version__}")
    parser.add_argument(
        "--traceback",
        action="store_true",
        help="on an error, print Python's full traceback before the message (give it before the command)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, action=_Commands)
    for name in _COMMANDS:
        if command is None or name == command:
            importlib.import_module(f"openg2g.cli.{name}").register(subparsers)
        else:
            subparsers.add_parser(name)
    plain_help(parser)  # the descriptions are module docstrings, written in reST
    return parser


def _command_of(argv: Sequence[str]) -> str:
    """The command an ``openg2g`` command line names: its first word that is not an option (the
    top-level options take no value); ``""`` when there is none."""
    return next((word for word in argv if not word.startswith("-")), "")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, dispatch, and turn platform errors into one clear message.

    Exit status 2 for an input that is wrong (a scenario, sweep or option), 1 for any other
    platform error and for memory running out; ``--traceback`` prints the traceback of each too. A stop signal that reaches
    no command's own handling (Ctrl-C while the modules load or the scenario is read) ends with one
    line and status 130, also one that Python would drop, raised in a finalizer or a weakref
    callback (:func:`~openg2g.core.interrupts.dropped_stops_raised`), or one that became another
    error on its way (:func:`~openg2g.core.interrupts.stop_signals_watched`).

    :param argv: the command line; ``None``: the process's own (``sys.argv[1:]``), as the
        ``openg2g`` command runs it. The process then ends with the command, so once the command
        stops on a signal further ones are ignored: the rest of a burst of Ctrl-C must not print a
        traceback from the exit, and the process ends without the interpreter's teardown
        (:func:`_end_process`). Given ``argv`` (a caller in Python), the signal handlers in place
        before are restored when the command ends, and ``main`` returns.
    """
    # the try is the first statement: a Ctrl-C that comes as the command starts lands inside it
    try:
        with (
            dropped_stops_raised(),
            stop_signals_watched() as stopped,
            contextlib.nullcontext() if argv is None else stop_handlers_restored(),
        ):
            code = _stoppable(argv, stopped)
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


def _stoppable(argv: Sequence[str] | None, stopped: Callable[[], bool]) -> int:
    """:func:`_dispatch`, a stop signal that reaches here said in one line (status 130); also an
    unexpected error once ``stopped()`` says a stop signal came: the error the signal's
    ``KeyboardInterrupt`` became in code that turns exceptions into its own."""
    try:
        return _dispatch(argv)
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except Exception:
        if not stopped():
            raise
        return _interrupted(KeyboardInterrupt())


def _interrupted(exc: KeyboardInterrupt) -> int:
    """Say a stop signal in one line; status 130."""
    ignore_stop_signals()  # the rest of a burst must not cut this message
    print(str(exc) or "interrupted by the user (Ctrl-C)", file=sys.stderr)
    return 130


def _dispatch(argv: Sequence[str] | None) -> int:
    """Parse and run the command; a platform error is one message and status 2 or 1."""
    args = build_parser(_command_of(sys.argv[1:] if argv is None else argv)).parse_args(argv)
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

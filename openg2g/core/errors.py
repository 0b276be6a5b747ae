"""The error hierarchy. Every error the platform raises on purpose derives from :class:`G2GError`.

The CLI prints a :class:`G2GError` as one clear message (no traceback) and exits non-zero.
"""

from __future__ import annotations

import os
import sysconfig
import traceback

__all__ = [
    "CommandError",
    "ControllerError",
    "FeederError",
    "G2GError",
    "OutputError",
    "PowerFlowError",
    "ScenarioError",
    "SimulationError",
    "TraceError",
    "UnknownNameError",
    "raised_in_user_code",
]


class G2GError(Exception):
    """Root of all openg2g errors."""


class ScenarioError(G2GError):
    """A scenario file is malformed or inconsistent.

    :param problems: one ``(location, message)`` per problem, ``location`` being
        ``"<file>: <dotted.field.path>"``.
    """

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = list(problems)
        super().__init__("\n".join(f"{loc}: {msg}" for loc, msg in self.problems))


class TraceError(G2GError):
    """A power trace or trace library is missing, corrupt or implausible."""


class FeederError(G2GError):
    """A feeder is unknown, or a feeder file uses something the reader does not support."""


class CommandError(G2GError):
    """A command is malformed or outside the receiving component's limits."""


class UnknownNameError(G2GError, KeyError):
    """A name (a site, a bus, an element) the receiving component does not know; the message lists
    the names it knows. A ``KeyError`` too, for callers that look names up."""

    def __str__(self) -> str:
        # KeyError quotes its argument; this message is a sentence
        return str(self.args[0]) if self.args else ""


class ControllerError(G2GError):
    """A controller cannot be found, built, or returned something that is not a command."""


class SimulationError(G2GError):
    """A simulation cannot continue; the message names the time and the component."""


class PowerFlowError(SimulationError):
    """A grid power flow did not converge."""


class OutputError(SimulationError):
    """Run outputs could not be written (full or read-only disk, ...)."""


_OWN_CODE = tuple(
    os.path.join(os.path.abspath(folder), "")
    for folder in (
        os.path.dirname(os.path.dirname(__file__)),  # the openg2g package, stock controllers included
        *(sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")),
    )
)


def raised_in_user_code(exc: BaseException) -> str:
    """Where ``exc`` was raised in code of the user's own (a controller file), as ``" (at FILE:LINE)"``.

    The innermost frame of ``exc``'s traceback that is neither openg2g's nor the standard
    library's nor an installed package's: the line of the user's code that raised, or called the
    library that raised. ``""`` when there is none (the error is openg2g's own).
    """
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        name = frame.filename
        if not name.startswith("<") and not os.path.abspath(name).startswith(_OWN_CODE):
            return f" (at {name}:{frame.lineno})"
    return ""

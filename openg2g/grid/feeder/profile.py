"""Time profiles of PV output and extra loads: a CSV of ``t_s, scale`` read by linear interpolation."""

from __future__ import annotations

import csv
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from openg2g.core.errors import ScenarioError

__all__ = ["Profile"]


@dataclass
class Profile:
    """A piecewise-linear scale profile (held constant outside its range)."""

    t_s: np.ndarray
    scale: np.ndarray

    @classmethod
    def read(cls, path: Path, where: str) -> Profile:
        """Read ``path``; ``where`` is the scenario field it came from, for the error.

        :raises ScenarioError: unreadable file, missing columns, times not finite and ascending,
            or a negative or non-finite scale.
        """
        try:
            with path.open(newline="") as fh:
                header = next(csv.reader(fh), [])
                columns = [header.index("t_s"), header.index("scale")]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # an empty file is reported below
                    values = np.loadtxt(fh, delimiter=",", usecols=columns, ndmin=2, dtype=np.float64)
            # contiguous copies: np.interp would copy a column view of the table at every call
            t, s = np.ascontiguousarray(values[:, 0]), np.ascontiguousarray(values[:, 1])
        except (OSError, ValueError, IndexError) as exc:
            raise ScenarioError([(where, f"cannot read profile {path} (need CSV columns t_s, scale): {exc}")]) from None
        if t.size == 0 or np.any(np.diff(t) < 0) or not np.isfinite(t).all():
            raise ScenarioError([(where, f"profile {path} is empty or its t_s is not finite and ascending")])
        bad = np.flatnonzero(~(np.isfinite(s) & (s >= 0)))
        if bad.size:
            row = int(bad[0]) + 2  # 1-based, after the header
            raise ScenarioError([(where, f"profile {path}: scale must be finite and >= 0, row {row} has {s[bad[0]]}")])
        return cls(t, s)

    def at(self, t_s: np.ndarray) -> np.ndarray:
        """The scale at each time of ``t_s`` (s)."""
        return np.interp(t_s, self.t_s, self.scale)

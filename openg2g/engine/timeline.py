"""Where the engine's datacenter samples and grid solves fall: their periods, refined inside windows.

A run steps its datacenters every ``periods.datacenter_s`` and its grid every ``periods.grid_s``;
inside a disturbance window (:mod:`openg2g.scenario.disturbances`) both step every window step
(one cycle) instead. Windows start and end on whole grid periods, so the regular instants resume
on their own grid after each one. A step belongs to the regime in which it *starts*: the steps
starting in ``[start, end)`` of a window are the window's.

Everything is in integer ticks of the run's clock (:mod:`openg2g.engine.clock`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Timeline"]


@dataclass(frozen=True)
class Timeline:
    """The step lengths of a run, in ticks.

    :param dc_ticks: the datacenter period outside windows.
    :param grid_ticks: the grid period outside windows (a whole multiple of ``dc_ticks``).
    :param windows: ``(start, end)`` of each window, sorted, disjoint, on multiples of ``grid_ticks``.
    :param fine_ticks: the step inside windows (divides ``grid_ticks`` and ``dc_ticks``).
    """

    dc_ticks: int
    grid_ticks: int
    windows: Sequence[tuple[int, int]] = ()
    fine_ticks: int = 0
    _starts: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_starts", [s for s, _ in self.windows])

    def _window(self, after: int) -> tuple[int, int] | None:
        """The window a step starting at tick ``after`` belongs to, or ``None``."""
        i = bisect.bisect_right(self._starts, after) - 1
        if i >= 0 and after < self.windows[i][1]:
            return self.windows[i]
        return None

    def regime(self, after: int, regular: int) -> tuple[int, int | None]:
        """The step length (ticks) of a step starting at ``after`` whose regular length is
        ``regular``, and the tick at which that regime ends (``None``: never)."""
        if not self.windows:
            return regular, None
        window = self._window(after)
        if window is not None:
            return self.fine_ticks, window[1]
        i = bisect.bisect_right(self._starts, after)
        return regular, (self.windows[i][0] if i < len(self.windows) else None)

    def dc_step(self, after: int) -> tuple[int, int | None]:
        """:meth:`regime` of the datacenter step starting at ``after``."""
        return self.regime(after, self.dc_ticks)

    def grid_step(self, after: int) -> tuple[int, int | None]:
        """:meth:`regime` of the grid step starting at ``after``."""
        return self.regime(after, self.grid_ticks)

    def count(self, end: int, regular: int) -> int:
        """Steps of regular length ``regular`` from tick 0 to ``end`` (a whole run's solves or samples)."""
        fine = sum(max(0, min(e, end) - s) for s, e in self.windows)
        return (end - fine) // regular + (fine // self.fine_ticks if self.fine_ticks else 0)

    def boundaries(self) -> list[int]:
        """Every tick at which a regime starts or ends (window starts and ends)."""
        return sorted({t for w in self.windows for t in w})

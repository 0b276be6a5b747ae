"""The load the datacenter sites stop drawing during each disturbance: the figure grid operators ask for.

For each disturbance (:mod:`openg2g.scenario.disturbances`) the sites' total grid draw just before
it, ``P_before`` (W: the last datacenter step ending before its start; the step ending at the start
already follows a line it opened), and the lowest total draw from its start until the next
disturbance starts (or the run ends), ``P_low``, at time ``t_low``. The load lost is ``P_before - P_low`` (MW), 0 when the draw never
fell below ``P_before``. Over the whole run, the **load lost** is the largest drop below the draw
before the *first* disturbance, at any later step: the loss of a sequence of disturbances taken
together (the six reclosings of one fault, a campus transferring at the first and another at the
fourth). Whatever makes the draw fall counts: blocks transferring to UPS or tripping, a site cut
off by an open line, and the site's own fluctuation (a fraction of a percent of a replayed
trace's power over a few seconds), which is why the figures are a drop from just before.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from openg2g.core.state import DatacenterSeries

__all__ = ["LoadLoss", "LossFigures"]


@dataclass
class LossFigures:
    """What one disturbance (or the run) took off the sites' draw.

    :param before_w: the sites' total draw just before (W).
    :param low_w: the lowest total draw after (W).
    :param low_at_s: when it was lowest (s).
    """

    before_w: float | None = None
    low_w: float = float("inf")
    low_at_s: float | None = None

    def lost_mw(self) -> float:
        """``before - low`` in MW, 0 when the draw never fell."""
        if self.before_w is None or self.low_at_s is None:
            return 0.0
        return max(0.0, self.before_w - self.low_w) / 1e6

    def add(self, t_s: np.ndarray, draw_w: np.ndarray) -> None:
        """The steps ending at ``t_s`` (s) drew ``draw_w`` (W) in all."""
        if not len(t_s):
            return
        i = int(np.argmin(draw_w))
        if draw_w[i] < self.low_w:
            self.low_w, self.low_at_s = float(draw_w[i]), float(t_s[i])


class LoadLoss:
    """Accumulates :class:`LossFigures` per disturbance and for the run from the datacenter blocks.

    :param starts_s: each disturbance's start (s), in the order of the summary's list.
    """

    def __init__(self, starts_s: Sequence[float]) -> None:
        self.starts_s = [float(t) for t in starts_s]
        order = sorted(range(len(self.starts_s)), key=lambda i: self.starts_s[i])
        self._ends_s = [float("inf")] * len(self.starts_s)
        for a, b in itertools.pairwise(order):
            self._ends_s[a] = self.starts_s[b]
        self.events = [LossFigures() for _ in self.starts_s]
        self.run = LossFigures()
        self._first_s = min(self.starts_s, default=float("inf"))

    def add_block(self, block: Sequence[DatacenterSeries]) -> None:
        """Consecutive datacenter steps of every site (one series per site, same times)."""
        if not block:
            return
        t_s = block[0].t_s
        draw_w = block[0].power_w.copy()
        for series in block[1:]:
            draw_w += series.power_w
        for start, end, figures in zip(self.starts_s, self._ends_s, self.events):
            self._account(figures, t_s, draw_w, start, end)
        self._account(self.run, t_s, draw_w, self._first_s, float("inf"))

    @staticmethod
    def _account(figures: LossFigures, t_s: np.ndarray, draw_w: np.ndarray, start: float, end: float) -> None:
        before = np.flatnonzero(t_s < start)
        if len(before):
            figures.before_w = float(draw_w[before[-1]])
        after = (t_s >= start) & (t_s < end)
        if figures.before_w is not None and after.any():
            figures.add(t_s[after], draw_w[after])

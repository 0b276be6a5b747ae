"""A progress bar over a run's simulated time, drawn on stderr."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from openg2g.core.progress import progress_bar
from openg2g.core.state import GridState
from openg2g.engine.recording import Recorder

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["ProgressBar"]


class ProgressBar(Recorder):
    """Shows how much of the run's time (simulated seconds) has been solved."""

    def __init__(self) -> None:
        super().__init__()
        self._bar: tqdm | None = None

    def _on_start(self) -> None:
        assert self.sim is not None
        self._on_close("restarted")
        self._bar = progress_bar(total=float(self.sim.duration_s), unit="sim s", desc=self.sim.name, leave=False)

    def _on_grid_block(self, states: Sequence[GridState], v_pu: np.ndarray, dt_s: float) -> None:
        if self._bar is not None:
            self._bar.update(states[-1].t_s - self._bar.n)

    def _on_close(self, status: str) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

"""The PNG plots of a complete run, drawn from its tables when it ends."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openg2g.engine.recording import Recorder
from openg2g.record.tables import write_summary

__all__ = ["PlotRecorder"]


class PlotRecorder(Recorder):
    """Draws the run's plots (:func:`openg2g.plot.run.plot_run`) in ``out_dir`` once the run is
    complete, and lists them in its summary (``plots``); attach it after the
    :class:`~openg2g.record.tables.TableRecorder` writing the same folder.

    :param out_dir: the run's output folder, with its tables.
    :param scenario: the scenario as run (a dict, as ``scenario.yaml`` holds it): the feeder map
        reads its grid.
    """

    def __init__(self, out_dir: Path | str, scenario: Mapping[str, Any]):
        super().__init__()
        self.out_dir = Path(out_dir)
        self.scenario = scenario

    def _on_end(self, summary: dict[str, Any]) -> None:
        from openg2g.plot.run import PlotsInterrupted, plot_run  # matplotlib: only a run that draws loads it

        assert self.sim is not None
        try:
            report = plot_run(self.out_dir, self.sim.v_min_pu, self.sim.v_max_pu, self.scenario)
        except PlotsInterrupted as exc:
            # the run is complete; the summary says so, and which plots are there
            summary["plots"] = exc.report.as_summary()
            write_summary(self.out_dir, summary)
            raise
        summary["plots"] = report.as_summary()
        write_summary(self.out_dir, summary)

"""Recorders of a run (:mod:`openg2g.engine.recording`): its metrics, its tables and the app's
overview, its plots, a progress bar."""

from openg2g.record.metrics import MetricsRecorder, RunMetrics
from openg2g.record.plots import PlotRecorder
from openg2g.record.progress import ProgressBar
from openg2g.record.tables import TableRecorder

__all__ = ["MetricsRecorder", "PlotRecorder", "ProgressBar", "RunMetrics", "TableRecorder"]

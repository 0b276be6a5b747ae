"""Plots drawn from output tables (tables in, matplotlib figures out; never simulator objects).

- :mod:`~openg2g.plot.run`: the figures of one run (``openg2g run`` and ``openg2g plot`` write them
  as PNG, each when the run has its data);
- :mod:`~openg2g.plot.taps`, :mod:`~openg2g.plot.branches`, :mod:`~openg2g.plot.substation`,
  :mod:`~openg2g.plot.commands`, :mod:`~openg2g.plot.profile`: regulator taps, branch loading,
  substation P/Q, the command timeline, the voltage profile along the feeder;
- :mod:`~openg2g.plot.voltages`: per-bus-phase voltage heatmap;
- :mod:`~openg2g.plot.feeder`: feeder map coloured by voltage; :mod:`~openg2g.plot.extremes`: each
  bus-phase's lowest and highest voltage, streamed from a run of any size;
- :mod:`~openg2g.plot.models`: datacenter power per served model;
- :mod:`~openg2g.plot.compare`: run summaries side by side, as a table and as bars, and the change
  against a baseline; :mod:`~openg2g.plot.compare_runs`: runs side by side over time;
- :mod:`~openg2g.plot.timeline`: thinning long lines for drawing, events and training windows;
- :mod:`~openg2g.plot.overview`: a run's whole-run time panels for ``openg2g app``, built by
  ``openg2g run`` as it writes its tables and kept beside the run;
  :mod:`~openg2g.plot.overview_tables`: the same computed from a finished run's tables, and a
  zoom's panels; :mod:`~openg2g.plot.parts`: a run's tables read one part at a time;
- :mod:`~openg2g.plot.style`: the shared look.

The names below are loaded from their modules on first use (PEP 562): ``openg2g run`` imports
the light modules it needs while writing its tables (:mod:`~openg2g.plot.timeline`,
:mod:`~openg2g.plot.overview`) without pandas and matplotlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openg2g.core.lazy import lazy_exports

if TYPE_CHECKING:
    from openg2g.plot.branches import plot_branch_loading, worst_branches
    from openg2g.plot.commands import command_series, plot_command_timeline
    from openg2g.plot.compare import (
        DEFAULT_METRICS,
        METRICS,
        Metric,
        baseline_deltas,
        plot_comparison,
        read_summaries,
        summary_frame,
    )
    from openg2g.plot.compare_runs import plot_run_comparison, run_series
    from openg2g.plot.extremes import bus_phase_extremes, extremes_of, voltages_at
    from openg2g.plot.feeder import (
        bus_voltages,
        feeder_tables,
        plot_feeder_map,
        plot_worst_voltage_map,
        worst_bus_voltages,
    )
    from openg2g.plot.models import plot_model_power
    from openg2g.plot.profile import plot_voltage_profile, voltage_profile, worst_instant
    from openg2g.plot.run import (
        RUN_PLOTS,
        PlotReport,
        plot_batch_sizes,
        plot_dc_power,
        plot_latency,
        plot_run,
        plot_voltage_envelope,
        read_table,
    )
    from openg2g.plot.style import PHASE_COLORS, STYLE, show, styled
    from openg2g.plot.substation import plot_substation_power
    from openg2g.plot.taps import plot_taps
    from openg2g.plot.timeline import envelope, run_marks
    from openg2g.plot.voltages import plot_voltage_heatmap, voltage_matrix

_MODULES = {
    "branches": (
        "plot_branch_loading",
        "worst_branches",
    ),
    "commands": (
        "command_series",
        "plot_command_timeline",
    ),
    "compare": (
        "DEFAULT_METRICS",
        "METRICS",
        "Metric",
        "baseline_deltas",
        "plot_comparison",
        "read_summaries",
        "summary_frame",
    ),
    "compare_runs": (
        "plot_run_comparison",
        "run_series",
    ),
    "extremes": (
        "bus_phase_extremes",
        "extremes_of",
        "voltages_at",
    ),
    "feeder": (
        "bus_voltages",
        "feeder_tables",
        "plot_feeder_map",
        "plot_worst_voltage_map",
        "worst_bus_voltages",
    ),
    "models": ("plot_model_power",),
    "profile": (
        "plot_voltage_profile",
        "voltage_profile",
        "worst_instant",
    ),
    "run": (
        "RUN_PLOTS",
        "PlotReport",
        "plot_batch_sizes",
        "plot_dc_power",
        "plot_latency",
        "plot_run",
        "plot_voltage_envelope",
        "read_table",
    ),
    "style": (
        "PHASE_COLORS",
        "STYLE",
        "show",
        "styled",
    ),
    "substation": ("plot_substation_power",),
    "taps": ("plot_taps",),
    "timeline": (
        "envelope",
        "run_marks",
    ),
    "voltages": (
        "plot_voltage_heatmap",
        "voltage_matrix",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, _MODULES)

__all__ = [
    "DEFAULT_METRICS",
    "METRICS",
    "PHASE_COLORS",
    "RUN_PLOTS",
    "STYLE",
    "Metric",
    "PlotReport",
    "baseline_deltas",
    "bus_phase_extremes",
    "bus_voltages",
    "command_series",
    "envelope",
    "extremes_of",
    "feeder_tables",
    "plot_batch_sizes",
    "plot_branch_loading",
    "plot_command_timeline",
    "plot_comparison",
    "plot_dc_power",
    "plot_feeder_map",
    "plot_latency",
    "plot_model_power",
    "plot_run",
    "plot_run_comparison",
    "plot_substation_power",
    "plot_taps",
    "plot_voltage_envelope",
    "plot_voltage_heatmap",
    "plot_voltage_profile",
    "plot_worst_voltage_map",
    "read_summaries",
    "read_table",
    "run_marks",
    "run_series",
    "show",
    "styled",
    "summary_frame",
    "voltage_matrix",
    "voltage_profile",
    "voltages_at",
    "worst_branches",
    "worst_bus_voltages",
    "worst_instant",
]

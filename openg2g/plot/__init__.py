"""Plots drawn from output tables (tables in, matplotlib figures out; never simulator objects).

- :mod:`~openg2g.plot.run`: the standard figures of one run (``openg2g run`` writes them as PNG);
- :mod:`~openg2g.plot.voltages`: per-bus-phase voltage heatmap;
- :mod:`~openg2g.plot.feeder`: feeder map coloured by voltage;
- :mod:`~openg2g.plot.models`: datacenter power per served model;
- :mod:`~openg2g.plot.compare`: run summaries side by side, as a table and as bars;
- :mod:`~openg2g.plot.style`: the shared look.
"""

from openg2g.plot.compare import DEFAULT_METRICS, METRICS, Metric, plot_comparison, read_summaries, summary_frame
from openg2g.plot.feeder import bus_voltages, feeder_tables, plot_feeder_map
from openg2g.plot.models import plot_model_power
from openg2g.plot.run import plot_batch_sizes, plot_dc_power, plot_latency, plot_run, plot_voltage_envelope, read_table
from openg2g.plot.style import PHASE_COLORS, STYLE, show, styled
from openg2g.plot.voltages import plot_voltage_heatmap, voltage_matrix

__all__ = [
    "DEFAULT_METRICS",
    "METRICS",
    "PHASE_COLORS",
    "STYLE",
    "Metric",
    "bus_voltages",
    "feeder_tables",
    "plot_batch_sizes",
    "plot_comparison",
    "plot_dc_power",
    "plot_feeder_map",
    "plot_latency",
    "plot_model_power",
    "plot_run",
    "plot_voltage_envelope",
    "plot_voltage_heatmap",
    "read_summaries",
    "read_table",
    "show",
    "styled",
    "summary_frame",
    "voltage_matrix",
]

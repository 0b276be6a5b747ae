"""Plots drawn from output tables."""

from openg2g.plot.run import plot_batch_sizes, plot_dc_power, plot_latency, plot_run, plot_voltage_envelope, read_table

__all__ = ["plot_batch_sizes", "plot_dc_power", "plot_latency", "plot_run", "plot_voltage_envelope", "read_table"]

"""openg2g: datacenter-grid co-simulation on simpy and pandapower."""

__version__ = "0.1.0"
"""The package version; the single source of it (``pyproject.toml`` reads it from here), so that
importing openg2g does not pay for ``importlib.metadata`` (80 ms)."""

__all__ = ["__version__"]

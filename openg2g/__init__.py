"""openg2g: datacenter-grid co-simulation on simpy and pandapower."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("openg2g")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+local"

__all__ = ["__version__"]

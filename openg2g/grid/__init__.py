"""The grid: bundled distribution feeders, an OpenDSS reader, the phase-frame power flow and the
``FeederGrid`` backend.

- :mod:`openg2g.grid.feeders`: ``list_feeders``, ``load_feeder``, ``Feeder``;
- :mod:`openg2g.grid.backend`: ``FeederGrid`` (the :class:`~openg2g.core.interfaces.GridBackend`),
  composed of :mod:`~openg2g.grid.regulators` (banks, tap steps, band control),
  :mod:`~openg2g.grid.storage` (batteries) and :mod:`~openg2g.grid.injections` (sites, PV, extra
  loads, scales, profiles); :mod:`openg2g.grid.solver`: the phase-frame power flow and its exact
  dV/dP;
- :mod:`openg2g.grid.balanced`: ``PandapowerGrid``, the backend on any pandapower net
  (``grid.pandapower``; :mod:`~openg2g.grid.ppnets` reads the net and names its buses,
  :mod:`~openg2g.grid.ppcase` solves it balanced; a finished run's net with results:
  :func:`openg2g.engine.net_results.to_pandapower_results`);
- :func:`validate_grid`: scenario grid checks as ``(field path, message)`` problems.
"""

from openg2g.grid.backend import FeederGrid
from openg2g.grid.balanced import PandapowerGrid
from openg2g.grid.feeders import Feeder, list_feeders, load_feeder
from openg2g.grid.validate import validate_grid

__all__ = [
    "Feeder",
    "FeederGrid",
    "PandapowerGrid",
    "list_feeders",
    "load_feeder",
    "validate_grid",
]

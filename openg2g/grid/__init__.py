"""The grid: distribution feeders and pandapower nets, solved, as the engine's grid backend.

Two wings, one per backend, and one module that tells the kinds of grid apart:

- :mod:`openg2g.grid.feeder`: feeders (bundled, or any OpenDSS file) and ``FeederGrid``, the exact
  phase-frame power flow;
- :mod:`openg2g.grid.nets`: any pandapower net, ``PandapowerGrid`` (balanced) or converted to the
  phase frame (asymmetric);
- :mod:`openg2g.grid.kinds`: which kind a scenario's grid is, building its backend
  (:func:`build_grid`) and checking a spec against it (:func:`validate_grid`, problems as
  ``(field path, message)``);
- :mod:`openg2g.grid.config`: the scenario's ``grid`` section, shared by both.
"""

from openg2g.core.lazy import lazy_exports

__all__ = [
    "Feeder",
    "FeederGrid",
    "GridSpec",
    "SiteConnection",
    "build_grid",
    "list_feeders",
    "load_feeder",
    "validate_grid",
]

# Lazy, so that a process that needs one module (the OpenDSS reader's worker) does not load them all.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "feeder": ("Feeder", "FeederGrid", "list_feeders", "load_feeder"),
        "kinds": ("build_grid", "validate_grid"),
        "config": ("GridSpec", "SiteConnection"),
    },
)

"""The phase-frame wing of the grid: distribution feeders, their exact unbalanced power flow and
the ``FeederGrid`` backend.

- :mod:`~openg2g.grid.feeder.model`: the feeder model (every element with its phase data);
- :mod:`~openg2g.grid.feeder.opendss`: reading any OpenDSS file into it with OpenDSS's engine (the
  files scanned first by :mod:`~openg2g.grid.feeder.dss_includes`); :mod:`~openg2g.grid.feeder.library`:
  bundled feeders by name (``load_feeder``), built by :mod:`~openg2g.grid.feeder.build`;
- :mod:`~openg2g.grid.feeder.network`: nodes, admittance stamps, load ports;
  :mod:`~openg2g.grid.feeder.ports`: the loads' currents; :mod:`~openg2g.grid.feeder.powerflow`:
  the power flow and its exact dV/dP, formulated dense (:mod:`~openg2g.grid.feeder.solver`) or
  sparse (:mod:`~openg2g.grid.feeder.sparse`), with the reactive power of the generators that hold
  their voltage solved around it (:mod:`~openg2g.grid.feeder.regulated`);
- :mod:`~openg2g.grid.feeder.backend`: ``FeederGrid``, composed of
  :mod:`~openg2g.grid.feeder.regulators` and :mod:`~openg2g.grid.feeder.capacitors` (the OpenDSS
  controls), :mod:`~openg2g.grid.feeder.storage`,
  :mod:`~openg2g.grid.feeder.injections` (with :mod:`~openg2g.grid.feeder.profile`) and
  :mod:`~openg2g.grid.feeder.branches`; its scenario checks in :mod:`~openg2g.grid.feeder.checks`;
- :mod:`~openg2g.grid.feeder.to_pandapower`: a feeder as a pandapower net (for inspection), and
  :mod:`~openg2g.grid.feeder.pandapower_mode`: pandapower's ``runpp_3ph`` on it (a reference mode).
"""

from openg2g.core.lazy import lazy_exports

__all__ = ["Feeder", "FeederGrid", "list_feeders", "load_feeder"]

# Lazy, so that a process that needs one module (the OpenDSS reader's worker) does not load them all.
__getattr__, __dir__ = lazy_exports(
    __name__, {"backend": ("FeederGrid",), "library": ("Feeder", "list_feeders", "load_feeder")}
)

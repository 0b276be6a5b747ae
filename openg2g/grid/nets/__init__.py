"""The pandapower wing of the grid: any pandapower net as a scenario's grid.

- :mod:`~openg2g.grid.nets.source`: finding and reading the net ``grid.pandapower`` names, and
  naming its buses;
- :mod:`~openg2g.grid.nets.balanced`: ``PandapowerGrid``, the backend on a balanced net, solved by
  :mod:`~openg2g.grid.nets.case` (a batched Newton on pandapower's own admittance matrix), with its
  disturbances: line and transformer outages (:mod:`~openg2g.grid.nets.switching`), three-phase
  faults and source sags (:mod:`~openg2g.grid.nets.disturbances`), and the low-voltage model of the
  injections that lets a faulted net solve (:mod:`~openg2g.grid.nets.lowvoltage`);
- :mod:`~openg2g.grid.nets.asymmetric`: an asymmetric net converted to a phase-frame feeder
  (solved by :class:`~openg2g.grid.feeder.backend.FeederGrid`), and
  :mod:`~openg2g.grid.nets.asymmetric_results`: its ``runpp_3ph`` result tables.

pandapower is slow to import: nothing here is imported until a scenario names a net.
"""

__all__: list[str] = []

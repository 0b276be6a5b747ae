"""A finished run on a pandapower net, back as a pandapower net with results for one grid step.

Reads the run's ``scenario.yaml`` and ``datacenter`` table (:mod:`openg2g.record.tables`), so it
sits above the grid and the scenario: :meth:`openg2g.grid.nets.balanced.PandapowerGrid.results_net`
and :func:`openg2g.grid.nets.asymmetric_results.results_net_3ph` do the solving.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openg2g.core.errors import ScenarioError
from openg2g.core.state import PHASES, DatacenterState
from openg2g.grid.kinds import open_net, viewed_grid
from openg2g.grid.nets.asymmetric import asymmetric_grid
from openg2g.grid.nets.asymmetric_results import results_net_3ph
from openg2g.grid.nets.balanced import PandapowerGrid
from openg2g.scenario.loaded import RESOLVED_SCENARIO
from openg2g.scenario.loader import read_scenario

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

__all__ = ["to_pandapower_results"]


def to_pandapower_results(run_dir: Path, t_s: float, trust_pickle: bool = False) -> pandapowerNet:
    """The net of a finished run on a pandapower net, at its grid step ``t_s`` (s), with
    ``res_bus``, ``res_line`` and ``res_trafo`` filled (:meth:`PandapowerGrid.results_net`), or
    for an asymmetric net ``res_bus_3ph``, ``res_line_3ph`` and ``res_trafo_3ph``
    (:func:`openg2g.grid.nets.asymmetric_results.results_net_3ph`).

    The sites draw what the grid drew at that step: the mean (or, with ``grid.load_aggregation:
    last``, the last) of the run's datacenter samples over ``(t_s - periods.grid_s, t_s]``, read
    from ``run_dir/datacenter``; the load scale is the scenario's (a ``set_load_scale`` event is
    not replayed).

    A run folder may come from anyone, so it is read as data: its ``scenario.yaml`` against the
    schema only (:func:`openg2g.scenario.loader.read_scenario`: no controller file or plug-in
    site it names is imported), and its pickle net only with ``trust_pickle``, the caller's word,
    whatever the folder's own ``grid.trust_pickle`` says (:func:`openg2g.grid.kinds.viewed_grid`).

    :param run_dir: the run's output folder (with ``scenario.yaml`` and the ``datacenter`` table).
    :param t_s: a grid step of the run (s).
    :param trust_pickle: read the net when it is a pickle (a pickle runs any code it carries).
    :raises ScenarioError: the run is not on a pandapower net, or ``t_s`` is not one of its grid steps.
    :raises FeederError: the net cannot be read, or it is a pickle and ``trust_pickle`` is false
        (the message names the file and ``grid.pandapower``).
    """
    import pandas as pd

    run_dir = Path(run_dir)
    sc = read_scenario(run_dir / RESOLVED_SCENARIO)
    base_dir = run_dir.resolve()
    if sc.grid.pandapower is None:
        raise ScenarioError([(str(run_dir), "the run is on a feeder, not a pandapower net")])
    grid_s = float(sc.periods.grid_s)
    k = round(t_s / grid_s)
    if k < 1 or abs(k * grid_s - t_s) > 1e-9 * max(1.0, abs(t_s)) or t_s > float(sc.duration_s) + 1e-9:
        raise ScenarioError([(str(run_dir), f"t_s={t_s} is not a grid step of the run (every {grid_s:g} s)")])
    dc = pd.read_parquet(run_dir / "datacenter")
    window = dc[(dc["t_s"] > (k - 1) * grid_s + 1e-9) & (dc["t_s"] <= k * grid_s + 1e-9)]
    loads: dict[str, DatacenterState] = {}
    for site, rows in window.groupby("site", sort=False, observed=True):
        pick = rows if sc.grid.load_aggregation == "mean" else rows.iloc[-1:]
        p_w = pick[[f"p_{ph}_w" for ph in PHASES]].to_numpy(float).mean(axis=0)
        q_var = pick[[f"q_{ph}_var" for ph in PHASES]].to_numpy(float).mean(axis=0)
        loads[str(site)] = DatacenterState(str(site), t_s, p_w, q_var, {})
    grid = viewed_grid(sc.grid, base_dir, trust_pickle)
    kind, net = open_net(grid, base_dir)
    if kind == "asymmetric_net":
        feeder_grid = asymmetric_grid(net, grid, sc.datacenters, base_dir)
        return results_net_3ph(net, sc.grid.pandapower, feeder_grid, sc.datacenters, loads, t_s)
    return PandapowerGrid(net, sc.grid.pandapower, grid, sc.datacenters).results_net(loads, t_s)

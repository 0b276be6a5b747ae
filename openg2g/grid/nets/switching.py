"""Line and transformer outages on a balanced net: the solver's view of the net at each set of branch states.

``set_line_in_service`` names a branch as the backend reports it (``line.<index>``,
``transformer.<index>``: a row of ``net.line`` or ``net.trafo``). Taking it out of service sets its
``in_service`` to False; putting it in service sets ``in_service`` and closes every switch on it
(pandapower's line and transformer switches, ``et`` ``"l"``/``"t"``), so that it conducts. A net at
a set of branch states is then what pandapower makes of it: :class:`~openg2g.grid.nets.case.PandapowerCase`
builds the internal case of a copy of the net with those states (its own ``Ybus``; pandapower drops
every bus cut off from all external grids, with what is attached there). :class:`Topology` keeps
that case with what the backend needs of it: the internal bus of each supplied site and monitored
bus, the sites cut off, which monitored bus-phases are energized, and the branch rows of every
reported conductor.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from openg2g.core.state import frozen_array
from openg2g.grid.nets.case import PandapowerCase

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

__all__ = ["BranchKey", "Topology", "branch_key", "conducting", "switched_net", "topology"]

BranchKey = tuple[str, int]
"""A switchable branch: its pandapower table (``"line"``, ``"trafo"``) and row index."""

_BRANCH_NAME = re.compile(r"^(line|transformer)\.(-?\d+)$", re.IGNORECASE)
_TABLE = {"line": "line", "transformer": "trafo"}
_SWITCH_ELEMENT = {"line": "l", "trafo": "t"}


def branch_key(net: pandapowerNet, name: str) -> BranchKey | None:
    """The branch ``name`` (``line.<index>``, ``transformer.<index>``, any case) of ``net``, None
    when it names no row of ``net.line``/``net.trafo``."""
    match = _BRANCH_NAME.match(name.strip())
    if match is None:
        return None
    table, index = _TABLE[match.group(1).lower()], int(match.group(2))
    return (table, index) if index in net[table].index else None


def _switches(net: pandapowerNet, key: BranchKey) -> np.ndarray:
    """Row labels of the switches on branch ``key``."""
    sw = net.switch
    if not len(sw):
        return np.zeros(0, dtype=np.int64)
    table, index = key
    on = (sw["et"] == _SWITCH_ELEMENT[table]) & (sw["element"].astype(np.int64) == index)
    return np.asarray(sw.index[on], dtype=np.int64)


def conducting(net: pandapowerNet, key: BranchKey) -> bool:
    """Whether branch ``key`` of ``net`` conducts: in service, and every switch on it closed."""
    table, index = key
    closed = net.switch.loc[_switches(net, key), "closed"].astype(bool).all() if len(net.switch) else True
    return bool(net[table].at[index, "in_service"]) and bool(closed)


def switched_net(net: pandapowerNet, states: Mapping[BranchKey, bool]) -> pandapowerNet:
    """A copy of ``net`` with each branch of ``states`` out of service (False) or in service with
    its switches closed (True)."""
    out = copy.deepcopy(net)
    for (table, index), on in states.items():
        out[table].at[index, "in_service"] = on
        if on:
            out.switch.loc[_switches(out, (table, index)), "closed"] = True
    return out


@dataclass(frozen=True)
class Topology:
    """The solver's view of a net at one set of branch states.

    :param case: pandapower's internal case at those states.
    :param s_load: the net's own loads as internal bus injections (pu), for the load scale.
    :param site_bus: supplied site -> the internal bus it draws at.
    :param unsupplied: the sites whose bus is cut off from every external grid.
    :param mon_idx: per monitored bus-phase, its internal bus (0 where de-energized: see ``live``).
    :param live: per monitored bus-phase, whether it is energized (read-only).
    :param all_live: every monitored bus-phase energized.
    :param gather: per reported conductor, its row in ``[i_from; i_to; 0]`` (an out-of-service
        branch reads the zero row).
    :param sources: the internal buses of the in-service external grids.
    """

    case: PandapowerCase
    s_load: np.ndarray
    site_bus: Mapping[str, int]
    unsupplied: frozenset[str]
    mon_idx: np.ndarray
    live: np.ndarray
    all_live: bool
    gather: np.ndarray
    sources: tuple[int, ...]


def _conductor_rows(case: PandapowerCase, rows: np.ndarray) -> np.ndarray:
    """Per conductor (three per branch end), its row in ``[i_from; i_to; 0]`` (-1 = out of service)."""
    n_br = case.yf.shape[0]
    from_row = np.where(rows >= 0, rows, 2 * n_br)
    to_row = np.where(rows >= 0, n_br + rows, 2 * n_br)
    per_branch = np.stack([from_row, to_row], axis=1)  # (branches, terminals)
    return np.repeat(per_branch.reshape(-1), 3)


def topology(
    net: pandapowerNet, case: PandapowerCase, site_pp_bus: Mapping[str, int], monitored: Sequence[int]
) -> Topology:
    """The view of ``net`` (at the branch states ``case`` was built from).

    :param site_pp_bus: site -> the pandapower bus it draws at.
    :param monitored: the pandapower bus of each monitored bus (each reported as three bus-phases).
    """
    site_bus = {name: case.pp_bus[b] for name, b in site_pp_bus.items() if b in case.pp_bus}
    internal = np.array([case.pp_bus.get(b, -1) for b in monitored], dtype=np.int64)
    live = np.repeat(internal >= 0, 3)
    rows = np.concatenate([case.branch_rows("line", len(net.line)), case.branch_rows("trafo", len(net.trafo))])
    grids = net.ext_grid[net.ext_grid["in_service"].astype(bool)]
    sources = tuple(sorted({case.pp_bus[int(b)] for b in grids["bus"] if int(b) in case.pp_bus}))
    return Topology(
        case=case,
        s_load=case.load_injection(net),
        site_bus=site_bus,
        unsupplied=frozenset(name for name in site_pp_bus if name not in site_bus),
        mon_idx=np.repeat(np.maximum(internal, 0), 3),
        live=frozen_array(live, bool),
        all_live=bool(live.all()),
        gather=_conductor_rows(case, rows),
        sources=sources,
    )

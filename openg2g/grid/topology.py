"""A grid's one-line topology as two small tables, for feeder maps and voltage profiles.

``buses`` (``bus``, ``x``, ``y``, ``phases``) holds every bus by the name the run's tables use,
with its drawing coordinates (NaN where the feeder file or net has none); ``edges`` (``name``,
``from_bus``, ``to_bus``, ``kind`` in line/switch/transformer, ``in_service``, ``length_km``) holds
every branch, a regulator bank of single-phase units once. :func:`distance_from_source_km` walks
the in-service branches from the source bus, counting line lengths (a transformer or switch adds
nothing), which is the x axis of a voltage profile along the feeder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

    from openg2g.grid.feeder.library import Feeder

__all__ = ["BUS_COLUMNS", "EDGE_COLUMNS", "Topology", "distance_from_source_km", "feeder_topology", "net_topology"]

BUS_COLUMNS = ("bus", "x", "y", "phases")
"""Columns of :attr:`Topology.buses`."""

EDGE_COLUMNS = ("name", "from_bus", "to_bus", "kind", "in_service", "length_km")
"""Columns of :attr:`Topology.edges`."""


@dataclass(frozen=True)
class Topology:
    """A grid drawn as a graph.

    :param buses: one row per bus (:data:`BUS_COLUMNS`; ``x``, ``y`` NaN without coordinates).
    :param edges: one row per branch (:data:`EDGE_COLUMNS`; ``length_km`` 0 for a transformer).
    :param source: the bus the grid is fed from (the substation's source side).
    """

    buses: pd.DataFrame
    edges: pd.DataFrame
    source: str


def feeder_topology(feeder: Feeder) -> Topology:
    """The topology of a feeder (:func:`openg2g.grid.feeder.library.load_feeder`, or an
    asymmetric net converted to the phase frame)."""
    model = feeder.model
    buses = pd.DataFrame(
        [
            {
                "bus": bus,
                "x": float(feeder.coords[bus][0]) if bus in feeder.coords else np.nan,
                "y": float(feeder.coords[bus][1]) if bus in feeder.coords else np.nan,
                "phases": "".join(feeder.bus_phases.get(bus, ())),
            }
            for bus in model.bus_kv
        ],
        columns=list(BUS_COLUMNS),
    )
    rows = [
        {
            "name": ln.name,
            "from_bus": ln.bus1,
            "to_bus": ln.bus2,
            "kind": "switch" if ln.switch else "line",
            "in_service": bool(ln.in_service),
            "length_km": float(ln.length_km),
        }
        for ln in model.lines
    ]
    seen: set[tuple[str, str]] = set()
    for t in model.transformers:
        pair = (t.windings[0].bus, t.windings[1].bus)
        if pair in seen:
            continue
        seen.add(pair)
        rows.append(
            {
                "name": t.bank or t.name,
                "from_bus": pair[0],
                "to_bus": pair[1],
                "kind": "transformer",
                "in_service": True,
                "length_km": 0.0,
            }
        )
    return Topology(buses, pd.DataFrame(rows, columns=list(EDGE_COLUMNS)), model.source.bus)


def _geo_xy(value: object) -> tuple[float, float]:
    """A bus's ``geo`` entry (GeoJSON point, pandapower 3) as ``(x, y)``; NaN when it has none."""
    if not isinstance(value, str) or not value.strip():
        return (np.nan, np.nan)
    try:
        coords = json.loads(value).get("coordinates")
        return (float(coords[0]), float(coords[1]))
    except (ValueError, TypeError, AttributeError, IndexError, KeyError):
        return (np.nan, np.nan)


def net_topology(net: pandapowerNet) -> Topology:
    """The topology of a balanced pandapower net, buses named as the balanced backend names them
    (:class:`openg2g.grid.nets.source.BusNames`); coordinates from ``net.bus.geo``."""
    from openg2g.grid.nets.source import BusNames

    names = dict(zip(BusNames(net).index, BusNames(net).names))
    geo = net.bus["geo"] if "geo" in net.bus else pd.Series(None, index=net.bus.index)
    xy = [_geo_xy(geo.at[i]) for i in net.bus.index]
    buses = pd.DataFrame(
        {
            "bus": [names[int(i)] for i in net.bus.index],
            "x": [p[0] for p in xy],
            "y": [p[1] for p in xy],
            "phases": "abc",
        },
        columns=list(BUS_COLUMNS),
    )
    rows = [
        {
            "name": str(r.get("name") or f"line {i}"),
            "from_bus": names[int(r["from_bus"])],
            "to_bus": names[int(r["to_bus"])],
            "kind": "line",
            "in_service": bool(r["in_service"]),
            "length_km": float(r["length_km"]),
        }
        for i, r in net.line.iterrows()
    ]
    rows += [
        {
            "name": str(r.get("name") or f"trafo {i}"),
            "from_bus": names[int(r["hv_bus"])],
            "to_bus": names[int(r["lv_bus"])],
            "kind": "transformer",
            "in_service": bool(r["in_service"]),
            "length_km": 0.0,
        }
        for i, r in net.trafo.iterrows()
    ]
    live = net.ext_grid[net.ext_grid["in_service"].astype(bool)]
    source = names[int(live["bus"].iloc[0])] if len(live) else buses["bus"].iloc[0]
    return Topology(buses, pd.DataFrame(rows, columns=list(EDGE_COLUMNS)), source)


def distance_from_source_km(topology: Topology) -> pd.Series:
    """Each bus's distance from the source along the in-service branches (km): the shortest sum of
    line lengths; NaN for a bus no in-service path reaches."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import dijkstra

    names = [str(b) for b in topology.buses["bus"]]
    index = {b: k for k, b in enumerate(names)}
    live = topology.edges[topology.edges["in_service"].astype(bool)]
    pairs = [
        (index[str(a)], index[str(b)], float(km))
        for a, b, km in zip(live["from_bus"], live["to_bus"], live["length_km"])
        if str(a) in index and str(b) in index
    ]
    n = len(names)
    if not pairs or topology.source not in index:
        return pd.Series(np.nan, index=names, name="distance_km")
    i, j, w = (np.array(col) for col in zip(*pairs))
    # a zero-length branch must stay an edge: csgraph reads an explicit 0 as "no edge"
    w = np.maximum(w, 1e-12)
    graph = coo_matrix((w, (i, j)), shape=(n, n)).tocsr()
    dist = dijkstra(graph, directed=False, indices=index[topology.source])
    dist = np.where(np.isfinite(dist), dist, np.nan)
    return pd.Series(dist, index=names, name="distance_km")

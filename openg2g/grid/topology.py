"""A grid's one-line topology as two small tables, for feeder maps and voltage profiles.

``buses`` (``bus``, ``x``, ``y``, ``phases``, ``kv``) holds every bus by the name the run's tables
use, with its drawing coordinates (NaN where the feeder file or net has none) and base voltage;
``edges`` (:data:`EDGE_COLUMNS`) holds every two-terminal series element OpenDSS counts on a path
from its energy meter: lines, switches, transformers, regulators (a bank of single-phase units
once) and series reactors, and a multi-winding transformer once per winding beyond the first.
:func:`distance_from_source_km` walks the in-service ones from the source bus, counting line
lengths, which is the x axis of a voltage profile along the feeder.

Lengths are counted as OpenDSS's ``Bus.Distance`` counts them, with one exception: a line's
length in km from the file's length and unit; a line given without a unit (``units=none``: IEEE
123 and 37 as distributed, some of IEEE 8500's) by its number read as km, as OpenDSS does, and
flagged (``unit_unknown``) so a profile can say so; a switch, transformer, regulator or reactor
adds nothing (OpenDSS counts a switch's nominal 1 m).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

    from openg2g.grid.feeder.library import Feeder
    from openg2g.grid.feeder.model import LineModel

__all__ = [
    "BUS_COLUMNS",
    "EDGE_COLUMNS",
    "EDGE_KINDS",
    "Topology",
    "distance_from_source_km",
    "feeder_topology",
    "net_topology",
]

BUS_COLUMNS = ("bus", "x", "y", "phases", "kv")
"""Columns of :attr:`Topology.buses` (``kv``: base voltage, kV line to line; NaN where unknown)."""

EDGE_COLUMNS = ("name", "from_bus", "to_bus", "kind", "in_service", "length_km", "unit_unknown")
"""Columns of :attr:`Topology.edges`: ``kind`` one of :data:`EDGE_KINDS`, ``length_km`` (km; 0 for
all but lines, NaN for a line of no known length), ``unit_unknown`` True for a line whose file gave
its length without a unit (counted as km)."""

EDGE_KINDS = ("line", "switch", "transformer", "regulator", "reactor")
"""The kinds of branch in :attr:`Topology.edges`."""

_PRIMITIVE_KINDS = {"transformer": "transformer", "autotrans": "transformer", "reactor": "reactor"}
"""Element class of a static element (:class:`openg2g.grid.feeder.model.PrimitiveModel`) -> its
branch kind; the others (faults, sources) are not series elements."""


@dataclass(frozen=True)
class Topology:
    """A grid drawn as a graph.

    :param buses: one row per bus (:data:`BUS_COLUMNS`; ``x``, ``y`` NaN without coordinates).
    :param edges: one row per branch (:data:`EDGE_COLUMNS`; ``length_km`` 0 but for lines).
    :param source: the bus the grid is fed from (the substation's source side).
    """

    buses: pd.DataFrame
    edges: pd.DataFrame
    source: str


def _edge(name: str, a: str, b: str, kind: str, in_service: bool = True, length_km: float = 0.0) -> dict[str, object]:
    return {
        "name": name,
        "from_bus": a,
        "to_bus": b,
        "kind": kind,
        "in_service": in_service,
        "length_km": length_km,
        "unit_unknown": False,
    }


def _line_edge(line: LineModel) -> dict[str, object]:
    """A line or switch as a branch, its length as the module docstring says."""
    row = _edge(line.name, line.bus1, line.bus2, "switch" if line.switch else "line", bool(line.in_service))
    if line.switch:
        return row
    if math.isfinite(line.length_km):
        row["length_km"] = float(line.length_km)
    elif line.length_unitless is not None:
        row["length_km"], row["unit_unknown"] = float(line.length_unitless), True
    else:
        row["length_km"] = math.nan
    return row


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
                "kv": float(kv),
            }
            for bus, kv in model.bus_kv.items()
        ],
        columns=list(BUS_COLUMNS),
    )
    rows = [_line_edge(ln) for ln in model.lines]
    seen: set[tuple[str, str]] = set()
    for t in model.transformers:
        pair = (t.windings[0].bus, t.windings[1].bus)
        if pair in seen:
            continue
        seen.add(pair)
        rows.append(_edge(t.bank or t.name, *pair, "regulator" if t.bank else "transformer"))
    for p in model.primitives:
        cls, _, name = p.name.partition(".")
        kind = _PRIMITIVE_KINDS.get(cls)
        # a terminal's bus in order, each once: a center-tapped transformer's two secondary halves share one
        ends = list(dict.fromkeys(bus for bus, _ in p.terminals))
        if kind is not None:
            rows += [_edge(name, ends[0], other, kind) for other in ends[1:]]
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
    (:class:`openg2g.grid.nets.source.BusNames`); coordinates from ``net.bus.geo``, base voltages
    from ``vn_kv``. Its branches: lines (out of service where an open line switch cuts them),
    closed bus-bus switches, two- and three-winding transformers and series impedances (drawn as
    reactors)."""
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
            "kv": net.bus["vn_kv"].to_numpy(dtype=float),
        },
        columns=list(BUS_COLUMNS),
    )
    switches = _table(net, "switch")
    cut = {int(r["element"]) for _, r in switches.iterrows() if r["et"] == "l" and not r["closed"]}

    def branch(i: object, r: pd.Series, what: str, a: str, b: str, kind: str, **more: Any) -> dict[str, object]:
        return _edge(str(r.get("name") or f"{what} {i}"), names[int(r[a])], names[int(r[b])], kind, **more)

    rows = [
        branch(
            i,
            r,
            "line",
            "from_bus",
            "to_bus",
            "line",
            in_service=bool(r["in_service"]) and int(i) not in cut,
            length_km=float(r["length_km"]),
        )
        for i, r in net.line.iterrows()
    ]
    rows += [
        branch(i, r, "switch", "bus", "element", "switch", in_service=bool(r["closed"]))
        for i, r in switches.iterrows()
        if r["et"] == "b"
    ]
    rows += [
        branch(i, r, "trafo", "hv_bus", "lv_bus", "transformer", in_service=bool(r["in_service"]))
        for i, r in _table(net, "trafo").iterrows()
    ]
    rows += [
        branch(i, r, "trafo3w", "hv_bus", side, "transformer", in_service=bool(r["in_service"]))
        for i, r in _table(net, "trafo3w").iterrows()
        for side in ("mv_bus", "lv_bus")
    ]
    rows += [
        branch(i, r, "impedance", "from_bus", "to_bus", "reactor", in_service=bool(r["in_service"]))
        for i, r in _table(net, "impedance").iterrows()
    ]
    live = net.ext_grid[net.ext_grid["in_service"].astype(bool)]
    source = names[int(live["bus"].iloc[0])] if len(live) else buses["bus"].iloc[0]
    return Topology(buses, pd.DataFrame(rows, columns=list(EDGE_COLUMNS)), source)


def _table(net: pandapowerNet, name: str) -> pd.DataFrame:
    """A table of the net, empty where the net has none (a net saved without it)."""
    table = net.get(name)
    return table if isinstance(table, pd.DataFrame) else pd.DataFrame()


def distance_from_source_km(topology: Topology) -> pd.Series:
    """Each bus's distance from the source along the in-service branches (km): the shortest sum of
    line lengths; NaN for a bus no in-service path of known lengths reaches (a line of NaN length
    is no path)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import dijkstra

    names = [str(b) for b in topology.buses["bus"]]
    index = {b: k for k, b in enumerate(names)}
    edges = topology.edges
    live = edges[edges["in_service"].astype(bool) & np.isfinite(edges["length_km"].to_numpy(dtype=float))]
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

"""Buses without coordinates placed from the topology (:mod:`openg2g.plot.placement`): on a line
between the buses with coordinates they lie between, fanned out from the one they hang off, a
tidy tree where there are none; every bus once, at a finite point of its own, deterministically."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.plot.placement import place_buses, step

SHARED_DATA = Path(
    os.environ.get("OPENG2G_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data"
)
CKT5 = SHARED_DATA / "opendss-test-cases" / "EPRITestCircuits" / "ckt5" / "Master_ckt5.dss"


def _tables(xy: dict[str, tuple[float, float]], pairs: list[tuple[str, str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    buses = pd.DataFrame({"bus": list(xy), "x": [p[0] for p in xy.values()], "y": [p[1] for p in xy.values()]})
    edges = pd.DataFrame({"from_bus": [a for a, _ in pairs], "to_bus": [b for _, b in pairs]})
    return buses, edges


NAN = (math.nan, math.nan)
TREE = {
    "a": (0.0, 0.0),
    "u1": NAN,
    "u2": NAN,
    "b": (9.0, 0.0),
    "c": (9.0, 10.0),
    "h1": NAN,
    "h2": NAN,
    "h3": NAN,
    "d": NAN,
}
TREE_PAIRS = [("a", "u1"), ("u1", "u2"), ("u2", "b"), ("b", "c"), ("b", "h1"), ("b", "h2"), ("b", "h3"), ("h1", "d")]
"""a - u1 - u2 - b between buses with coordinates, c above b, three buses hanging off b and one
more off the first of them."""


def test_a_bus_between_two_with_coordinates_lies_evenly_between_them() -> None:
    pos = place_buses(*_tables(TREE, TREE_PAIRS))
    assert pos["u1"] == pytest.approx((3.0, 0.0)) and pos["u2"] == pytest.approx((6.0, 0.0))
    assert pos["a"] == (0.0, 0.0) and pos["b"] == (9.0, 0.0) and pos["c"] == (9.0, 10.0)


def test_buses_hanging_off_one_fan_out_a_step_a_hop_away_from_its_neighbours() -> None:
    pos = place_buses(*_tables(TREE, TREE_PAIRS))
    hop = step({k: v for k, v in TREE.items() if not math.isnan(v[0])}, TREE_PAIRS)
    assert hop == pytest.approx(5.0)  # half the one branch between two buses with coordinates (b - c, 10)
    bx, by = pos["b"]
    for leaf in ("h1", "h2", "h3"):
        assert math.dist(pos[leaf], pos["b"]) == pytest.approx(hop)
        # away from c (above) and u2 (left): to the lower right
        assert pos[leaf][0] > bx - 1e-9 and pos[leaf][1] < by + 1e-9
    assert math.dist(pos["d"], pos["b"]) == pytest.approx(2 * hop)
    assert math.dist(pos["d"], pos["h1"]) == pytest.approx(hop)  # straight on from h1
    assert len({pos[b] for b in pos}) == len(pos)


def test_no_coordinates_give_a_tidy_tree_from_the_source() -> None:
    xy = dict.fromkeys(["s", "a", "b", "c", "d", "e"], NAN)
    pairs = [("s", "a"), ("a", "b"), ("a", "c"), ("c", "d"), ("c", "e")]
    pos = place_buses(*_tables(xy, pairs), source="s")
    # hops from s on x (3 at most, over 1.5), leaf order on y (b, d, e: 0, 1, 2, over 1)
    assert pos["s"][0] == 0.0 and pos["a"][0] == pytest.approx(0.5) and pos["d"][0] == pytest.approx(1.5)
    assert [pos[b][1] for b in ("b", "d", "e")] == pytest.approx([0.0, 0.5, 1.0])
    assert pos["c"][1] == pytest.approx(0.75) and pos["a"][1] == pytest.approx(0.375)
    assert pos == place_buses(*_tables(xy, pairs), source="s")


def test_a_part_without_coordinates_is_drawn_beside_the_rest() -> None:
    xy = {"a": (0.0, 0.0), "b": (4.0, 0.0), "p": NAN, "q": NAN}
    pos = place_buses(*_tables(xy, [("a", "b"), ("p", "q")]))
    assert pos["p"][0] > 4.0 and pos["q"][0] > pos["p"][0]
    assert all(np.isfinite(v).all() for v in pos.values())


def test_a_bus_placed_on_another_is_moved_aside() -> None:
    # two buses hang off each end of a zero-length branch between coincident buses with coordinates
    xy = {"a": (0.0, 0.0), "b": (0.0, 0.0), "c": (2.0, 0.0), "p": NAN, "q": NAN}
    pos = place_buses(*_tables(xy, [("a", "b"), ("b", "c"), ("a", "p"), ("b", "q")]))
    assert pos["a"] == pos["b"] == (0.0, 0.0)  # the file's own points stay, shared or not
    assert pos["p"] != pos["q"]


def _check_feeder(buses: pd.DataFrame, edges: pd.DataFrame, source: str) -> float:
    """Every bus placed, once, near its neighbours; returns the seconds it took."""
    start = time.perf_counter()
    pos = place_buses(buses, edges, source)
    seconds = time.perf_counter() - start
    assert list(pos) == list(buses["bus"])
    xy = np.array(list(pos.values()))
    assert np.isfinite(xy).all()
    given = buses.dropna(subset=["x", "y"])
    for b, x, y in zip(given["bus"], given["x"], given["y"]):
        assert pos[b] == (x, y)
    placed = [b for b in pos if b not in set(given["bus"])]
    points = [pos[b] for b in placed]
    assert len(set(points)) == len(points) and not set(points) & {pos[b] for b in given["bus"]}
    if len(given):
        lo, hi = given[["x", "y"]].min().to_numpy(), given[["x", "y"]].max().to_numpy()
        span = float(np.hypot(*(hi - lo)))
        inside = [(lo - 0.05 * span <= pos[b]).all() and (pos[b] <= hi + 0.05 * span).all() for b in placed]
        assert all(inside)
        near = {b: set() for b in pos}
        for a, b in zip(edges["from_bus"], edges["to_bus"]):
            near[a].add(b)
            near[b].add(a)
        assert all(min(math.dist(pos[b], pos[n]) for n in near[b]) < 0.05 * span for b in placed)
    assert pos == place_buses(buses, edges, source)
    return seconds


def test_ieee123s_two_buses_without_coordinates_sit_by_their_neighbours() -> None:
    from openg2g.grid.feeder.library import load_feeder
    from openg2g.grid.topology import feeder_topology

    topology = feeder_topology(load_feeder("ieee123"))
    assert topology.buses["x"].isna().sum() == 2
    _check_feeder(topology.buses, topology.edges, topology.source)


@pytest.mark.slow
@pytest.mark.skipif(not CKT5.is_file(), reason="EPRI ckt5 is not in ../shared/data (or $OPENG2G_SHARED_DATA)")
def test_ckt5s_2029_buses_without_coordinates_are_placed_in_well_under_a_second() -> None:
    from openg2g.grid.feeder.library import load_feeder
    from openg2g.grid.topology import feeder_topology

    topology = feeder_topology(load_feeder(str(CKT5)))
    assert topology.buses["x"].isna().sum() == 2029
    assert _check_feeder(topology.buses, topology.edges, topology.source) < 1.0


@pytest.mark.slow
def test_ieee8500_without_coordinates_is_a_tidy_tree_in_well_under_a_second() -> None:
    from openg2g.grid.feeder.library import load_feeder
    from openg2g.grid.topology import feeder_topology

    topology = feeder_topology(load_feeder("ieee8500"))
    buses = topology.buses.assign(x=np.nan, y=np.nan)
    assert _check_feeder(buses, topology.edges, topology.source) < 1.0

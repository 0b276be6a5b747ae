"""Drawing positions for buses the feeder file gives no coordinates, found from the topology.

A distribution feeder is (nearly) a tree, and the buses without coordinates are, on the feeders
tried, mostly the ends of it: service transformers' secondaries and customers' drops hanging off a
primary bus that has coordinates (EPRI ckt5 gives 969 of its 2,998 buses), now and then a bus on a
line between two that have them, or the whole feeder (a pandapower net without geodata).
:func:`place_buses` places them, deterministically and in linear time:

1. a breadth-first search from every bus with coordinates at once gives each other bus the
   nearest such bus (its anchor) and its parent towards it;
2. where two searches meet (a branch between buses of different anchors), the buses on the path
   between the two anchors are spaced evenly along the straight line between them;
3. the buses left hang off a placed bus as a small tree, fanned out away from that bus's placed
   neighbours, each hop one :func:`step` (half the median branch length between buses with
   coordinates), each child's wedge as wide as its share of the leaves;
4. a part of the grid with no coordinates at all gets a tidy tree: hops from its root (the
   source, else its first bus) on the x axis, leaf order on the y axis (a parent midway between
   its first and last child), drawn to the right of the buses with coordinates.

Positions that coincide are moved apart by a small fraction of a step, so no two buses are drawn
at one point unless the file put them there.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["FAN_RAD", "place_buses", "step"]

FAN_RAD = 2.0 * math.pi / 3.0
"""The widest angle a bus's hanging tree is fanned out over (rad)."""

_LEAF_RAD = 0.35
"""Angle between two neighbouring leaves of a hanging tree while the fan is narrower than
:data:`FAN_RAD` (rad)."""


def step(known: Mapping[str, tuple[float, float]], pairs: Sequence[tuple[str, str]]) -> float:
    """The length of one placed hop (drawing units): half the median length of the branches
    between two buses with coordinates, else the span of those buses over the square root of
    their number, else 1.

    :param known: bus -> coordinates.
    :param pairs: the branches as ``(from_bus, to_bus)``.
    """
    lengths = np.array(
        [math.dist(known[a], known[b]) for a, b in pairs if a in known and b in known and known[a] != known[b]]
    )
    if lengths.size:
        return 0.5 * float(np.median(lengths))
    if len(known) > 1:
        xy = np.array(list(known.values()))
        span = float(np.hypot(*(xy.max(axis=0) - xy.min(axis=0))))
        if span > 0:
            return span / math.sqrt(len(known))
    return 1.0


def place_buses(buses: pd.DataFrame, edges: pd.DataFrame, source: str | None = None) -> dict[str, tuple[float, float]]:
    """Bus -> drawing position: its own coordinates where finite, else one found from the
    topology as the module docstring says.

    :param buses: ``bus``, ``x``, ``y`` (NaN where unknown).
    :param edges: ``from_bus``, ``to_bus`` (every branch, in service or not: an open switch still
        says where a bus is).
    :param source: the bus the grid is fed from, the root of a tidy tree; ``None``: the first bus.
    :return: every bus of ``buses``, in its order.
    """
    names = [str(b) for b in buses["bus"]]
    x = buses["x"].to_numpy(dtype=float)
    y = buses["y"].to_numpy(dtype=float)
    pos: dict[str, tuple[float, float]] = {
        b: (float(bx), float(by)) for b, bx, by in zip(names, x, y) if math.isfinite(bx) and math.isfinite(by)
    }
    if len(pos) == len(names):
        return pos
    known = set(pos)
    pairs = [(str(a), str(b)) for a, b in zip(edges["from_bus"], edges["to_bus"])]
    adjacent: dict[str, list[str]] = {b: [] for b in names}
    for a, b in pairs:
        if a in adjacent and b in adjacent and a != b:
            adjacent[a].append(b)
            adjacent[b].append(a)
    hop = step(pos, pairs)
    anchor, parent, order = _search(names, known, adjacent)
    _bridge(pos, anchor, parent, pairs)
    _hang(pos, parent, order, adjacent, hop)
    _tidy(pos, names, adjacent, hop, source)
    _separate(pos, known, hop)
    return {b: pos[b] for b in names}


def _search(
    names: Sequence[str], known: set[str], adjacent: Mapping[str, Sequence[str]]
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """Breadth-first search from every bus with coordinates at once: each bus it reaches -> its
    anchor, each such bus without coordinates -> its parent, and those buses in the order reached."""
    anchor = {b: b for b in names if b in known}
    parent: dict[str, str] = {}
    order: list[str] = []
    queue = deque(b for b in names if b in known)
    while queue:
        u = queue.popleft()
        for v in adjacent[u]:
            if v not in anchor:
                anchor[v], parent[v] = anchor[u], u
                order.append(v)
                queue.append(v)
    return anchor, parent, order


def _chain(bus: str, parent: Mapping[str, str]) -> list[str]:
    """The buses from ``bus`` up to its anchor, both included."""
    out = [bus]
    while out[-1] in parent:
        out.append(parent[out[-1]])
    return out


def _bridge(
    pos: dict[str, tuple[float, float]],
    anchor: Mapping[str, str],
    parent: Mapping[str, str],
    pairs: Sequence[tuple[str, str]],
) -> None:
    """Place the buses on a path between two anchors evenly along the line between them."""
    for a, b in pairs:
        if a not in anchor or b not in anchor or anchor[a] == anchor[b] or (a in pos and b in pos):
            continue
        path = _chain(a, parent)[::-1] + _chain(b, parent)
        (x0, y0), (x1, y1) = pos[path[0]], pos[path[-1]]
        last = len(path) - 1
        for k, bus in enumerate(path[1:-1], start=1):
            if bus not in pos:
                pos[bus] = (x0 + (x1 - x0) * k / last, y0 + (y1 - y0) * k / last)


def _hang(
    pos: dict[str, tuple[float, float]],
    parent: Mapping[str, str],
    order: Sequence[str],
    adjacent: Mapping[str, Sequence[str]],
    hop: float,
) -> None:
    """Fan the buses still unplaced out from the placed bus they hang off."""
    children: dict[str, list[str]] = {}
    for bus in order:
        if bus not in pos:
            children.setdefault(parent[bus], []).append(bus)
    leaves: dict[str, int] = {}
    for bus in reversed(order):  # children before their parents
        if bus not in pos:
            leaves[bus] = sum(leaves[c] for c in children.get(bus, ())) or 1
    for root in [b for b in children if b in pos]:
        rx, ry = pos[root]
        away = np.zeros(2)
        for v in adjacent[root]:
            if v in pos and v not in children.get(root, ()) and pos[v] != pos[root]:
                d = np.subtract(pos[v], pos[root])
                away -= d / np.hypot(*d)
        centre = math.atan2(away[1], away[0]) if np.hypot(*away) > 1e-9 else math.pi / 2
        total = sum(leaves[c] for c in children[root])
        width = min(FAN_RAD, _LEAF_RAD * (total - 1))
        queue = deque((c, 1) for c in children[root])
        start = {root: centre - width / 2}
        share = {root: width / total}
        while queue:  # breadth first: a bus's children come one after another, each taking the next part of its wedge
            bus, depth = queue.popleft()
            up = parent[bus]
            lo = start[up]
            start[up] += leaves[bus] * share[up]
            angle = lo + leaves[bus] * share[up] / 2
            pos[bus] = (rx + depth * hop * math.cos(angle), ry + depth * hop * math.sin(angle))
            start[bus], share[bus] = lo, share[up]
            queue.extend((c, depth + 1) for c in children.get(bus, ()))


def _tidy(
    pos: dict[str, tuple[float, float]],
    names: Sequence[str],
    adjacent: Mapping[str, Sequence[str]],
    hop: float,
    source: str | None,
) -> None:
    """Lay out each part of the grid that no bus with coordinates reaches as a tidy tree, to the
    right of what is placed, one part above the other; with nothing placed, the tree fills a
    1.5 x 1 box."""
    alone = [b for b in names if b not in pos]
    if not alone:
        return
    nothing_placed = not pos
    left, bottom = 0.0, 0.0
    if pos:
        xy = np.array(list(pos.values()))
        left, bottom = float(xy[:, 0].max()) + 2 * hop, float(xy[:, 1].min())
    roots = ([source] if source in alone else []) + alone
    for root in roots:
        if root in pos:
            continue
        depth, leaf = _tree(root, adjacent)
        width, height = max(max(depth.values()), 1), max(max(leaf.values()), 1)
        sx, sy = (1.5 / width, 1.0 / height) if nothing_placed and len(depth) == len(alone) else (hop, hop)
        for bus in depth:
            pos[bus] = (left + depth[bus] * sx, bottom + leaf[bus] * sy)
        bottom += (height + 2) * sy


def _tree(root: str, adjacent: Mapping[str, Sequence[str]]) -> tuple[dict[str, int], dict[str, float]]:
    """Each bus of ``root``'s part of the grid -> its hops from ``root`` and its leaf order (a leaf
    the next whole number, a parent midway between its first and last child)."""
    depth = {root: 0}
    children: dict[str, list[str]] = {}
    order = [root]
    queue = deque([root])
    while queue:
        u = queue.popleft()
        for v in adjacent[u]:
            if v not in depth:
                depth[v] = depth[u] + 1
                children.setdefault(u, []).append(v)
                order.append(v)
                queue.append(v)
    leaf: dict[str, float] = {}
    count = 0
    stack: list[tuple[str, bool]] = [(root, False)]
    while stack:  # depth first, children in the order found, so a subtree's leaves are consecutive
        bus, done = stack.pop()
        kids = children.get(bus, [])
        if done:
            leaf[bus] = (leaf[kids[0]] + leaf[kids[-1]]) / 2
        elif kids:
            stack.append((bus, True))
            stack += [(c, False) for c in reversed(kids)]
        else:
            leaf[bus] = float(count)
            count += 1
    return depth, leaf


def _separate(pos: dict[str, tuple[float, float]], known: set[str], hop: float) -> None:
    """Move each placed bus that lands on another bus's point a little aside (a hundredth of a
    step per bus already there, round a circle), so no two are drawn as one."""
    taken: dict[tuple[float, float], int] = {}
    for bus in sorted(pos, key=lambda b: b not in known):  # the file's points first: they stay
        point = pos[bus]
        n = taken.get(point, 0)
        taken[point] = n + 1
        if n and bus not in known:
            angle = n * 2.399963  # the golden angle: successive moves spread round the point
            pos[bus] = (point[0] + 0.01 * hop * n * math.cos(angle), point[1] + 0.01 * hop * n * math.sin(angle))

"""The complex power at the PQ ports (:meth:`Injections.s_pq`) against hand-computed values: a site
missing from a step, two sites and other elements sharing a bus's ports, an element listing its
phases out of order, and one listing a phase twice (which then draws twice)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from openg2g.core.state import DatacenterState
from openg2g.grid.config import GridSpec
from openg2g.grid.config import SiteConnection as Site
from openg2g.grid.feeder.injections import Injections
from openg2g.grid.feeder.library import load_feeder
from openg2g.grid.feeder.network import node_index


def _state(site: str, p_w: list[float], q_var: list[float]) -> DatacenterState:
    return DatacenterState(site, 0.0, np.array(p_w), np.array(q_var), {})


def test_port_powers_add_up_per_node_and_step() -> None:
    feeder = load_feeder("ieee13")
    nodes = node_index(feeder.model)
    spec = GridSpec(
        feeder="ieee13",
        pv=[{"name": "pv", "bus": "675", "kw": 30, "phases": ["a", "a"]}],
        extra_loads=[{"name": "x", "bus": "671", "kw_per_phase": 10, "power_factor": 0.6, "phases": ["c", "a"]}],
    )
    sites = [Site("dc1", "671"), Site("dc2", "671")]
    injections = Injections(feeder, spec, sites, nodes, {}, Path("."))
    port = {int(n): k for k, n in enumerate(injections.pq_nodes)}

    def at(bus: str, phase: str) -> int:
        return port[nodes.index[(bus, phase)]]

    dc1 = _state("dc1", [1e5, 2e5, 3e5], [1e4, 2e4, 3e4])
    dc2 = _state("dc2", [4e5, 5e5, 6e5], [0.0, 0.0, 5e4])
    s = injections.s_pq([0.0, 0.1, 0.2], [{"dc1": dc1}, {"dc2": dc2, "dc1": dc1}, {"dc2": dc2}])

    x = 1e4 * (1 + 1j * 0.8 / 0.6)  # 10 kW per phase at pf 0.6 lagging: 13.33 kvar
    for step, present in enumerate([(dc1,), (dc1, dc2), (dc2,)]):
        for k, ph in enumerate("abc"):
            expected = sum(st.p_w[k] + 1j * st.q_var[k] for st in present)
            expected += x if ph in "ac" else 0.0
            assert math.isclose(s[at("671", ph), step].real, expected.real, rel_tol=1e-12)
            assert math.isclose(s[at("671", ph), step].imag, expected.imag, rel_tol=1e-12)
        # the PV's two listed phases are both a: 15 kW each, 30 kW generated at 675.a, none elsewhere
        np.testing.assert_array_equal(s[at("675", "a"), step], -3e4)
    # 671.a, b, c shared by both sites and the extra load; 675.a by the PV's two listed phases
    assert len(injections.pq_nodes) == 4

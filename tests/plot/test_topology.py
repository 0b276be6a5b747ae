"""The one-line topology (:mod:`openg2g.grid.topology`): every series element OpenDSS counts on a
path is a branch, and distances from the source add up the published line lengths."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from openg2g.grid.feeder.library import load_feeder
from openg2g.grid.topology import Topology, distance_from_source_km, feeder_topology

FT_KM = 0.3048e-3
MI_KM = 1.609344

SHARED_DATA = Path(
    os.environ.get("OPENG2G_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data"
)
CKT5 = SHARED_DATA / "opendss-test-cases" / "EPRITestCircuits" / "ckt5" / "Master_ckt5.dss"

SERIES = """clear
new circuit.series basekv=12.47 pu=1.0 phases=3 mvasc3=200000 mvasc1=200000
new line.a bus1=sourcebus bus2=b1 r1=0.1 x1=0.2 r0=0.3 x0=0.6 c1=0 c0=0 length=2 units=kft
new line.s bus1=b1 bus2=b2 switch=y
new reactor.r bus1=b2 bus2=b3 phases=3 r=0.05 x=0.5
new line.c bus1=b3 bus2=b4 r1=0.1 x1=0.2 r0=0.3 x0=0.6 c1=0 c0=0 length=1 units=mi
new line.d bus1=b4 bus2=b5 r1=0.1 x1=0.2 r0=0.3 x0=0.6 c1=0 c0=0 length=0.5
new line.open bus1=b4 bus2=b6 r1=0.1 x1=0.2 r0=0.3 x0=0.6 c1=0 c0=0 length=1 units=km enabled=no
new load.ld bus1=b5 kv=12.47 kw=500 kvar=100
new load.far bus1=b6 kv=12.47 kw=10 kvar=1
set voltagebases=[12.47]
calcvoltagebases
"""
"""Lines in feet and miles, a switch of no length and a series reactor between them, a line given
without a unit (0.5, read as km) and a line out of service."""


def test_ieee13_distances_are_the_published_line_lengths() -> None:
    topology = feeder_topology(load_feeder("ieee13"))
    distance = distance_from_source_km(topology)
    # 650-632 2000 ft, 632-671 667+1333 ft, 671-680 1000 ft, 632-633 500 ft, switch 671-692 none, 692-675 500 ft
    expected_ft = {"632": 2000, "671": 4000, "680": 5000, "633": 2500, "692": 4000, "675": 4500}
    for bus, ft in expected_ft.items():
        assert distance[bus] == pytest.approx(ft * FT_KM, abs=1e-9), bus
    assert distance["650"] == pytest.approx(0.0, abs=1e-9)  # behind the substation transformer and regulator
    kinds = topology.edges.set_index("name")["kind"]
    assert kinds["671692"] == "switch" and kinds["reg1"] == "regulator" and kinds["sub"] == "transformer"
    assert topology.buses.set_index("bus").at["671", "kv"] == pytest.approx(4.16)


@pytest.mark.slow
def test_a_series_reactor_and_a_switch_of_no_length_pass_the_distance_on(tmp_path: Path) -> None:
    import opendssdirect as dss

    master = tmp_path / "series.dss"
    master.write_text(SERIES)
    topology = feeder_topology(load_feeder(str(master)))
    edges = topology.edges.set_index("name")
    assert edges.at["r", "kind"] == "reactor" and edges.at["s", "kind"] == "switch"
    assert bool(edges.at["d", "unit_unknown"]) and not edges["unit_unknown"].drop("d").any()
    distance = distance_from_source_km(topology)
    b1 = 2000 * FT_KM
    assert distance[["b1", "b2", "b3"]].tolist() == pytest.approx([b1] * 3, abs=1e-9)
    assert distance["b4"] == pytest.approx(b1 + MI_KM)
    assert distance["b5"] == pytest.approx(b1 + MI_KM + 0.5)
    assert np.isnan(distance["b6"])  # only an out-of-service line reaches it
    # OpenDSS's own distances from a meter at the source: the same, but for the switch's nominal 1 m
    dss.Text.Command(f"redirect [{master}]")
    dss.Text.Command("new energymeter.m element=line.a terminal=1")
    dss.Text.Command("solve")
    for bus in ("b1", "b4", "b5"):
        dss.Circuit.SetActiveBus(bus)
        switch_m = 0.001 if bus != "b1" else 0.0
        assert dss.Bus.Distance() == pytest.approx(distance[bus] + switch_m, abs=1e-6), bus


def test_a_line_without_a_known_length_cuts_the_path() -> None:
    buses = pd.DataFrame({"bus": ["s", "a", "b"], "x": np.nan, "y": np.nan, "phases": "abc", "kv": 12.47})
    edges = pd.DataFrame(
        {
            "name": ["l1", "l2"],
            "from_bus": ["s", "a"],
            "to_bus": ["a", "b"],
            "kind": ["line", "line"],
            "in_service": [True, True],
            "length_km": [0.5, np.nan],
            "unit_unknown": [False, False],
        }
    )
    distance = distance_from_source_km(Topology(buses, edges, "s"))
    assert distance["a"] == pytest.approx(0.5) and np.isnan(distance["b"])


@pytest.mark.parametrize("name", ["ieee123", "ieee37"])
def test_feeders_given_without_length_units_have_a_distance_everywhere(name: str) -> None:
    topology = feeder_topology(load_feeder(name))
    assert distance_from_source_km(topology).notna().all()
    lines = topology.edges[topology.edges["kind"] == "line"]
    assert lines["unit_unknown"].all()


@pytest.mark.slow
def test_ieee8500_reaches_every_bus_through_its_reactor_and_service_transformers() -> None:
    topology = feeder_topology(load_feeder("ieee8500"))
    kinds = topology.edges["kind"].value_counts()
    assert kinds["reactor"] == 1 and kinds["transformer"] >= 1177
    assert distance_from_source_km(topology).notna().all()


@pytest.mark.slow
@pytest.mark.skipif(not CKT5.is_file(), reason="EPRI ckt5 is not in ../shared/data (or $OPENG2G_SHARED_DATA)")
def test_ckt5_has_a_distance_past_its_series_reactor() -> None:
    topology = feeder_topology(load_feeder(str(CKT5)))
    distance = distance_from_source_km(topology)
    assert (topology.edges["kind"] == "reactor").sum() == 1
    assert distance.notna().all() and 5.0 < distance.max() < 5.5


@pytest.mark.slow
def test_a_pandapower_nets_switches_and_three_winding_transformers_are_branches() -> None:
    import pandapower as pp

    from openg2g.grid.topology import net_topology

    net = pp.create_empty_network()
    hv, mv, lv, a, b, c, d = (
        pp.create_bus(net, kv, name=n)
        for n, kv in [("hv", 110), ("mv", 20), ("lv", 10), ("a", 20), ("b", 20), ("c", 20), ("d", 20)]
    )
    pp.create_ext_grid(net, hv)
    pp.create_transformer3w(net, hv, mv, lv, std_type="63/25/38 MVA 110/20/10 kV")
    pp.create_switch(net, mv, a, et="b", closed=True)
    cable = {"r_ohm_per_km": 0.125, "x_ohm_per_km": 0.1, "c_nf_per_km": 0.0, "max_i_ka": 0.4}
    pp.create_line_from_parameters(net, a, b, length_km=1.5, **cable)
    bc = pp.create_line_from_parameters(net, b, c, length_km=2.0, **cable)
    pp.create_switch(net, c, bc, et="l", closed=False)
    pp.create_impedance(net, b, d, rft_pu=0.01, xft_pu=0.02, sn_mva=10)
    topology = net_topology(net)
    assert topology.source == "hv"
    assert topology.buses.set_index("bus")["kv"].to_dict() == {
        "hv": 110,
        "mv": 20,
        "lv": 10,
        "a": 20,
        "b": 20,
        "c": 20,
        "d": 20,
    }
    edges = topology.edges
    assert sorted(edges["kind"]) == ["line", "line", "reactor", "switch", "transformer", "transformer"]
    live = edges.set_index(["from_bus", "to_bus"])["in_service"]
    assert not live[("b", "c")] and live[("a", "b")]  # the open line switch cuts b-c
    distance = distance_from_source_km(topology)
    assert distance["lv"] == pytest.approx(0.0, abs=1e-9) and distance["b"] == pytest.approx(1.5)
    assert distance["d"] == pytest.approx(1.5) and np.isnan(distance["c"])

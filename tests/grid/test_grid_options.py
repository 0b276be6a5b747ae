"""Grid options with known answers: which bus-phases count for the voltage limits by default (the
primary levels, a site's own level, every level on a low-voltage network), and the solve tolerance."""

from __future__ import annotations

import pytest

from openg2g.grid.config import GridSpec, SiteConnection
from openg2g.grid.kinds import build_grid


def _buses(bus_phases: tuple[str, ...]) -> set[str]:
    return {bp.rsplit(".", 1)[0] for bp in bus_phases}


def test_ieee13_by_default_leaves_out_the_480_v_bus_634_and_keeps_the_4_16_kv_ones() -> None:
    primary = _buses(build_grid(GridSpec(feeder="ieee13"), [SiteConnection("dc", "671")]).bus_phases())
    every = _buses(
        build_grid(GridSpec(feeder="ieee13", monitored_levels="all"), [SiteConnection("dc", "671")]).bus_phases()
    )
    # IEEE 13: 634 is the 480 V side of XFM1; every other bus past the substation is at 4.16 kV
    assert every - primary == {"634"}
    assert {"632", "671", "675", "680", "692", "633", "645", "646", "684", "611", "652"} <= primary


def test_a_datacenter_on_a_secondary_bus_keeps_its_bus_monitored() -> None:
    grid = build_grid(GridSpec(feeder="ieee13"), [SiteConnection("dc", "634")])
    assert {"634.a", "634.b", "634.c"} <= set(grid.bus_phases())


@pytest.mark.parametrize(
    ("spec", "has_634"),
    [
        (GridSpec(feeder="ieee13", monitored_buses=["634", "671"]), True),  # the scenario's own list stands
        (GridSpec(feeder="ieee13", monitored_min_kv=0.48), True),
        (GridSpec(feeder="ieee13", monitored_min_kv=4.16), False),
    ],
)
def test_an_explicit_list_or_level_is_taken_as_given(spec: GridSpec, has_634: bool) -> None:
    buses = _buses(build_grid(spec, [SiteConnection("dc", "671")]).bus_phases())
    assert ("634" in buses) is has_634


def test_a_campus_on_a_400_v_net_is_judged_at_its_own_level() -> None:
    # CIGRE LV: Bus 0 (20 kV, the external grid), Bus R0 (20 kV), 0.4 kV networks below
    lv = _buses(
        build_grid(GridSpec(pandapower="create_cigre_network_lv"), [SiteConnection("dc", "Bus R11")]).bus_phases()
    )
    assert {"Bus R0", "Bus R11", "Bus R18", "Bus I2", "Bus C20"} <= lv
    # the same net with no site at 0.4 kV: only its 20 kV buses past the external grid are a primary level
    mv = _buses(
        build_grid(GridSpec(pandapower="create_cigre_network_lv"), [SiteConnection("dc", "Bus R0")]).bus_phases()
    )
    assert mv == {"Bus R0", "Bus I0", "Bus C0"}


def test_a_looser_tolerance_stops_earlier_within_it() -> None:
    from openg2g.core.state import DatacenterState

    def voltages(tolerance_pu: float) -> dict[str, float]:
        grid = build_grid(GridSpec(feeder="ieee13", tolerance_pu=tolerance_pu), [SiteConnection("dc", "671")])
        load = DatacenterState("dc", 1.0, (1.2e6, 1.2e6, 1.2e6), (4e5, 4e5, 4e5), {})
        state = grid.solve(1.0, {"dc": load}, 1.0)
        return {bp: state.voltage(bp) for bp in grid.bus_phases()}

    tight, loose = voltages(1e-10), voltages(1e-4)
    worst = max(abs(tight[bp] - loose[bp]) for bp in tight)
    assert 0 < worst < 1e-4  # it stopped earlier, within its tolerance of the converged answer
    assert "tolerance_pu" not in GridSpec(feeder="ieee13").model_dump()  # the default hashes as before

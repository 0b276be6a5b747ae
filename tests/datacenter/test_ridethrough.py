"""Datacenter ride-through (openg2g/datacenter/ridethrough*.py) against hand-computed timelines.

The inner site asks a constant 300 kW (100 kW and 75 kvar a phase) and serves 1,000 tok/s, so
every figure is arithmetic. The driver does what the engine's contract says: the step
``(t - dt, t]`` first, then the solve at ``t`` (``observe_grid``), whose decisions act from the
next step on. Times are ``k / steps_per_s`` as the engine's clock makes them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from openg2g.core.commands import COMMANDS, Actuator, Command, ReleaseBlock, SetBatchSize
from openg2g.core.errors import CommandError, ScenarioError, SimulationError, UnknownNameError
from openg2g.core.interfaces import DatacenterBackend, ModelInfo, SiteInfo
from openg2g.core.state import DatacenterState, ModelState
from openg2g.datacenter import ReplayDatacenter, TraceLibrary
from openg2g.datacenter.ridethrough import RideThroughSpec
from openg2g.datacenter.ridethrough_machine import MODES, TIME_TOLERANCE_S, RideThrough
from openg2g.datacenter.ridethrough_site import RideThroughSite
from openg2g.scenario.loader import load_scenario
from openg2g.scenario.schema import SiteSpec
from openg2g.testing import ToySite

from .conftest import site_spec

P_PHASE_W = 100_000.0
P_W = 3 * P_PHASE_W
Q_PER_P = 0.75  # power factor 0.8
TOK_S = 1000.0
NOMINAL = (1.0, 1.0, 1.0)


class ConstantSite(DatacenterBackend):
    """100 kW and 75 kvar a phase; one model of 10 replicas, 200 kW of GPUs, 1,000 tok/s, ITL
    0.05 s with 2 % of tokens over the deadline. Logs the commands it is given."""

    name = "dc"

    def __init__(self) -> None:
        self.applied: list[Command] = []

    def info(self) -> SiteInfo:
        model = ModelInfo("m", 1, 10, (8,), (20_000.0,), (0.05,), (100.0,), 0.06, 8)
        return SiteInfo("dc", "bus", {"m": model}, 0.8, 1.0)

    def reset(self, seed: int) -> None:
        self.applied = []

    def step(self, t_s: float, dt_s: float) -> DatacenterState:
        model = ModelState("m", 10.0, 8, 200_000.0, 0.05, TOK_S, 0.06, 0.02)
        return DatacenterState("dc", t_s, np.full(3, P_PHASE_W), np.full(3, P_PHASE_W * Q_PER_P), {"m": model})

    def apply(self, command: Command, t_s: float) -> None:
        self.applied.append(command)


def spec(blocks: list[dict[str, Any]], **top: Any) -> RideThroughSpec:
    return RideThroughSpec.model_validate({"blocks": blocks, **top})


def block(name: str = "A", fraction: float = 1.0, action: str = "trip", **kw: Any) -> dict[str, Any]:
    return {"name": name, "fraction": fraction, "action": action, **kw}


def site_of(*blocks: dict[str, Any], **top: Any) -> RideThroughSite:
    site = RideThroughSite(ConstantSite(), spec(list(blocks), **top))
    site.reset(0)
    return site


Volts = Callable[[float], tuple[float, float, float]]


def drive(
    site: RideThroughSite,
    steps: int,
    v: Volts = lambda t: NOMINAL,
    f: Callable[[float], float] = lambda t: 60.0,
    per_s: int = 10,
    before: dict[int, Callable[[float], None]] | None = None,
    first: int = 1,
) -> dict[float, DatacenterState]:
    """Steps ``first..steps`` of ``1 / per_s`` s, each solved after it; ``before[k]`` runs at the
    start of step ``k`` (at ``(k - 1) / per_s``). Returns the states by step end time."""
    dt = 1 / per_s
    out = {}
    for k in range(first, steps + 1):
        if before and k in before:
            before[k]((k - 1) / per_s)
        t = k / per_s
        out[t] = site.step_block(np.array([t]), dt).state(0)
        site.observe_grid(t, dt, v(t), f(t))
    return out


def sag(lo: float, hi: float, level: float = 0.3) -> Volts:
    """``level`` pu on phase a for the solves in ``(lo, hi]``, nominal otherwise."""
    return lambda t: (level, 1.0, 1.0) if lo + 1e-9 < t <= hi + 1e-9 else NOMINAL


def moves(site: RideThroughSite) -> list[tuple[float, str, str, str, str]]:
    return [(round(x.t_s, 9), x.block, x.from_mode, x.to_mode, x.cause) for x in site.machine.transitions]


def kw(state: DatacenterState) -> float:
    return state.power_w / 1e3


# ---------------------------------------------------------------------------------------- curves


@pytest.mark.parametrize(
    ("per_s", "duration_s", "steps_at_duration"),
    [(10, 0.2, 2), (60, 0.05, 3)],
    ids=["0.1s-steps", "cycle-steps"],
)
def test_a_sag_of_exactly_the_duration_rides_through(per_s, duration_s, steps_at_duration):
    site = site_of(block(under_voltage=[[0.5, duration_s]]))
    start = per_s  # the sag starts at 1 s
    states = drive(site, 3 * per_s, v=sag(1.0, (start + steps_at_duration) / per_s, 0.4), per_s=per_s)
    assert moves(site) == []
    assert all(s.power_w == P_W for s in states.values())


@pytest.mark.parametrize(
    ("per_s", "duration_s", "steps_at_duration"),
    [(10, 0.2, 2), (60, 0.05, 3)],
    ids=["0.1s-steps", "cycle-steps"],
)
def test_one_step_longer_acts_from_the_next_step(per_s, duration_s, steps_at_duration):
    site = site_of(block(under_voltage=[[0.5, duration_s]]))
    acted_k = per_s + steps_at_duration + 1
    states = drive(site, 3 * per_s, v=sag(1.0, acted_k / per_s, 0.4), per_s=per_s)
    t_acted = acted_k / per_s
    (transition,) = site.machine.transitions
    assert (transition.t_s, transition.from_mode, transition.to_mode) == (t_acted, "online", "tripped")
    assert (transition.cause, transition.point, transition.quantity) == ("under_voltage", 0, "v_min_pu")
    assert transition.value == 0.4 and transition.limit == 0.5
    assert transition.duration_s == pytest.approx((steps_at_duration + 1) / per_s, abs=1e-12)
    # the step the solve stands for ran online; the next one is tripped (residual 0: nothing)
    assert states[t_acted].power_w == P_W
    after = states[(acted_k + 1) / per_s]
    assert after.power_w == 0.0 and after.q_var.sum() == 0.0
    assert after.models["m"].throughput_tok_s == 0.0 and math.isnan(after.models["m"].itl_s)
    assert after.models["m"].deadline_miss_fraction == 0.0 and after.supplied


def test_the_lowest_phase_counts_for_under_voltage_and_the_highest_for_over_voltage():
    site = site_of(block(under_voltage=[[0.5, 0.1]], over_voltage=[[1.2, 0.1]]))
    drive(site, 20, v=lambda t: (1.0, 1.25, 0.55) if 1.0 < t <= 1.25 else NOMINAL)
    (transition,) = site.machine.transitions
    assert (round(transition.t_s, 9), transition.cause, transition.quantity, transition.value) == (
        1.2,
        "over_voltage",
        "v_max_pu",
        1.25,
    )
    site = site_of(block(under_voltage=[[0.5, 0.1]], over_voltage=[[1.2, 0.1]]))
    drive(site, 20, v=lambda t: (1.15, 1.0, 0.45) if 1.0 < t <= 1.25 else NOMINAL)
    (transition,) = site.machine.transitions
    assert (round(transition.t_s, 9), transition.cause, transition.quantity) == (1.2, "under_voltage", "v_min_pu")


def test_over_voltage_points_allow_shorter_excursions_higher_up():
    # above 1.1 for longer than 0.5 s, above 1.3 for longer than 0.1 s
    curve = {"over_voltage": [[1.1, 0.5], [1.3, 0.1]]}
    site = site_of(block(**curve))
    drive(site, 30, v=lambda t: (1.0, 1.0, 1.2) if 1.0 < t <= 1.5 else NOMINAL)  # 1.2 pu for 0.5 s
    assert moves(site) == []
    site = site_of(block(**curve))
    drive(site, 30, v=lambda t: (1.0, 1.0, 1.2) if 1.0 < t <= 1.6 else NOMINAL)
    assert [(m[0], m[4]) for m in moves(site)] == [(1.6, "over_voltage")]
    assert site.machine.transitions[0].point == 0
    site = site_of(block(**curve))
    drive(site, 30, v=lambda t: (1.0, 1.0, 1.35) if 1.0 < t <= 1.2 else NOMINAL)
    assert [(m[0], m[4]) for m in moves(site)] == [(1.2, "over_voltage")]
    assert site.machine.transitions[0].point == 1


def test_frequency_limits_act_and_hold_the_return():
    # below 57 Hz at once, below 59.5 Hz for longer than 0.5 s; the return needs >= 59.5 Hz
    site = site_of(
        block(under_frequency=[[57.0, 0.0], [59.5, 0.5]], over_frequency=[[61.0, 0.2]]),
        return_to_service={"delay_s": 1, "ramp_s": 0},
    )
    f = {round(k / 10, 9): 59.3 for k in range(11, 16)}  # 59.3 Hz for 0.5 s: rides through
    f |= {round(k / 10, 9): 59.3 for k in range(31, 38)}  # for 0.7 s: acts at 3.6 s
    f |= {round(k / 10, 9): 59.4 for k in range(38, 61)}  # inside the curve, outside the return band
    drive(site, 100, f=lambda t: f.get(round(t, 9), 60.0))
    assert moves(site) == [
        (3.6, "A", "online", "tripped", "under_frequency"),
        (7.0, "A", "tripped", "waiting_return", "return_band"),  # 60 Hz from the solve at 6.1 s
        (7.0, "A", "waiting_return", "returning", "auto_return"),
        (7.0, "A", "returning", "online", "ramp_end"),
    ]
    trip = site.machine.transitions[0]
    assert (trip.point, trip.quantity, trip.value, trip.limit) == (1, "f_hz", 59.3, 59.5)
    assert trip.duration_s == pytest.approx(0.6)
    site = site_of(block(under_frequency=[[57.0, 0.0], [59.5, 0.5]], over_frequency=[[61.0, 0.2]]))
    drive(site, 20, f=lambda t: 56.5 if 1.0 < t <= 1.1 else 60.0)
    assert [(m[0], site.machine.transitions[0].point) for m in moves(site)] == [(1.1, 0)]
    site = site_of(block(under_frequency=[[57.0, 0.0], [59.5, 0.5]], over_frequency=[[61.0, 0.2]]))
    drive(site, 20, f=lambda t: 61.5 if 1.0 < t <= 1.3 else 60.0)
    assert [(m[0], m[4]) for m in moves(site)] == [(1.3, "over_frequency")]


# ------------------------------------------------------------------------------------------- UPS


def test_the_machine_gives_the_fractions_a_site_applies():
    ups = {"energy_kwh": 1.0, "discharge_efficiency": 1.0}
    machine = RideThrough(
        spec(
            [
                block("A", 0.25, "ups", residual_fraction=0.2, under_voltage=[[0.5, 0.0]], ups=ups),
                block("B", 0.75, under_voltage=[[0.3, 1.0]]),
            ]
        ),
        "dc",
    )
    load = np.full(3, 360e3)  # W per step; A's IT load 72 kW: its 3.6 MJ last 50 s
    first = machine.advance(np.array([0.1, 0.2, 0.3]), 0.1, load)
    assert first.steady and first.grid_fraction.tolist() == [1.0] * 3
    (moved,) = machine.observe(0.3, 0.1, (0.4, 1.0, 1.0), 60.0)
    assert (moved.block, moved.to_mode) == ("A", "on_ups")
    on_ups = machine.advance(np.array([0.4, 0.5]), 0.1, load[:2])
    assert not on_ups.steady and on_ups.transitions == ()
    assert on_ups.grid_fraction.tolist() == pytest.approx([0.75 + 0.25 * 0.2] * 2, abs=1e-15)
    assert on_ups.serving_fraction.tolist() == [1.0, 1.0] and on_ups.recharge_w.tolist() == [0.0, 0.0]
    assert machine.state().blocks["A"].ups_energy_kwh == pytest.approx(1.0 - 72e3 * 0.2 / 3.6e6, rel=1e-12)
    later = machine.advance(np.arange(6, 506) / 10, 0.1, np.full(500, 360e3))  # empty at 50.3 s
    (empty,) = later.transitions
    assert (empty.to_mode, empty.t_s) == ("ups_empty", pytest.approx(50.3, abs=1e-9))
    assert later.serving_fraction[-1] == pytest.approx(0.75) and later.grid_fraction[-1] == pytest.approx(0.8)


def test_a_ups_emptied_mid_event_stops_serving_at_the_hand_computed_time():
    # 0.75 kWh = 2.7 MJ; the IT load (90 % of 300 kW) takes 270 kW / 0.9 = 300 kW of it: 9 s
    ups = {"energy_kwh": 0.75, "discharge_efficiency": 0.9}
    site = site_of(block(action="ups", residual_fraction=0.1, under_voltage=[[0.5, 0.0]], ups=ups))
    states = drive(site, 120, v=sag(1.0, 100.0))  # the sag never ends
    assert moves(site) == [
        (1.1, "A", "online", "on_ups", "under_voltage"),
        (10.1, "A", "on_ups", "ups_empty", "ups_empty"),
    ]
    assert site.machine.transitions[1].t_s == pytest.approx(10.1, abs=1e-9)
    for t, s in states.items():
        served = 1.0 if t <= 10.1 + 1e-9 else 0.0
        assert s.models["m"].throughput_tok_s == pytest.approx(TOK_S * served, abs=1e-6), t
        drawn = P_W if t <= 1.1 + 1e-9 else 0.1 * P_W  # on the UPS and after, the residual only
        assert s.power_w == pytest.approx(drawn, rel=1e-12), t
    (event,) = site.events()
    assert event.blocks_transferred == ("A",) and event.blocks_ups_empty == ("A",) and event.blocks_tripped == ()
    assert event.ups_energy_kwh == pytest.approx(0.75, rel=1e-12)
    assert event.mw_lost == pytest.approx(0.27) and event.mw_lost_at_s == pytest.approx(1.2)
    assert event.energy_not_served_kwh == pytest.approx(270.0 * 1.9 / 3600, rel=1e-9)  # 10.1 s to 12 s
    assert event.tokens_not_served == pytest.approx(1900.0, rel=1e-9)
    assert event.end_s is None and event.time_to_full_return_s is None
    totals = site.totals
    assert totals.ups_delivered_j == pytest.approx(0.9 * 2.7e6, rel=1e-12)


def test_recharge_adds_the_charger_load_until_the_energy_used_is_back():
    ups = {"energy_kwh": 1.0, "discharge_efficiency": 1.0, "charge_efficiency": 0.9, "recharge_kw": 30.0}
    site = site_of(
        block(action="ups", under_voltage=[[0.5, 0.0]], ups=ups), return_to_service={"delay_s": 1, "ramp_s": 1}
    )
    states = drive(site, 250, v=sag(1.0, 1.1))
    # on the UPS for steps 1.2-2.1 (300 kJ), ramping back over 2.2-3.1 (300 kW x 0.1 s x 4.5 = 135 kJ)
    used_j = 300e3 + 135e3
    end_s = 3.1 + used_j / (0.9 * 30e3)  # 27 kW stored: 16.11 s
    assert moves(site) == [
        (1.1, "A", "online", "on_ups", "under_voltage"),
        (2.1, "A", "on_ups", "waiting_return", "return_band"),
        (2.1, "A", "waiting_return", "returning", "auto_return"),
        (3.1, "A", "returning", "recharging", "ramp_end"),
        (round(end_s, 9), "A", "recharging", "online", "recharged"),
    ]
    assert states[2.5].power_w == pytest.approx(0.4 * P_W)  # the ramp at 40 %
    for t, s in states.items():
        if 3.1 + 1e-9 < t <= math.floor(end_s * 10) / 10 + 1e-9:
            assert s.power_w == pytest.approx(P_W + 30e3, rel=1e-12), t
            assert s.q_var[0] == pytest.approx(P_PHASE_W * Q_PER_P + 10e3 * Q_PER_P, rel=1e-12), t
        elif t > end_s + 0.1:
            assert s.power_w == P_W, t
    last = states[round(math.ceil(end_s * 10) / 10, 9)]  # the step in which the energy is back
    assert last.power_w == pytest.approx(P_W + 30e3 * (end_s - 19.2) / 0.1, rel=1e-9)
    (event,) = site.events()
    assert event.end_s == pytest.approx(end_s) and event.time_to_full_return_s == pytest.approx(2.0)
    assert event.ups_energy_kwh == pytest.approx(used_j / 3.6e6, rel=1e-12)
    assert event.recharge_kwh == pytest.approx(used_j / 0.9 / 3.6e6, rel=1e-9)
    assert event.energy_not_served_kwh == 0.0 and event.tokens_not_served == 0.0
    status = site.ride_through_state.blocks["A"]
    assert status.mode == "online" and status.state_of_charge == 1.0


def test_a_ups_block_transfers_with_an_empty_ups_serving_nothing():
    ups = {"energy_kwh": 0.001, "discharge_efficiency": 1.0}
    site = site_of(
        block(action="ups", under_voltage=[[0.5, 0.0]], ups=ups), return_to_service={"delay_s": 0.5, "ramp_s": 1}
    )
    states = drive(site, 40, v=lambda t: (0.3, 1, 1) if 1.0 < t <= 1.1 or 1.7 < t <= 1.8 else NOMINAL)
    # 3.6 kJ lasts 12 ms at 300 kW: empty within the first step on the UPS; the second sag comes
    # during the return ramp, before any recharge
    assert moves(site)[:5] == [
        (1.1, "A", "online", "on_ups", "under_voltage"),
        (1.112, "A", "on_ups", "ups_empty", "ups_empty"),
        (1.6, "A", "ups_empty", "waiting_return", "return_band"),
        (1.6, "A", "waiting_return", "returning", "auto_return"),
        (1.8, "A", "returning", "ups_empty", "under_voltage"),
    ]
    assert states[1.2].models["m"].throughput_tok_s == pytest.approx(0.12 * TOK_S)  # 12 ms of the step
    assert states[1.9].models["m"].throughput_tok_s == 0.0
    (event,) = site.events()
    assert event.blocks_transferred == ("A",) and event.blocks_ups_empty == ("A",)


# ---------------------------------------------------------------------------------------- return


def test_a_reclose_during_the_return_ramp_trips_the_block_again():
    site = site_of(
        block(residual_fraction=0.1, under_voltage=[[0.5, 0.1]]), return_to_service={"delay_s": 1, "ramp_s": 2}
    )
    v = lambda t: (0.3, 1, 1) if 1.0 < t <= 1.3 + 1e-9 or 3.0 < t <= 3.3 + 1e-9 else NOMINAL
    states = drive(site, 80, v=v)
    assert moves(site) == [
        (1.2, "A", "online", "tripped", "under_voltage"),
        (2.3, "A", "tripped", "waiting_return", "return_band"),  # inside from the solve at 1.4: since 1.3
        (2.3, "A", "waiting_return", "returning", "auto_return"),
        (3.2, "A", "returning", "tripped", "under_voltage"),  # the reclose, at 45 % of the ramp
        (4.3, "A", "tripped", "waiting_return", "return_band"),
        (4.3, "A", "waiting_return", "returning", "auto_return"),
        (6.3, "A", "returning", "online", "ramp_end"),
    ]
    assert states[3.0].power_w == pytest.approx((0.1 + 0.9 * 0.35) * P_W, rel=1e-12)
    assert states[3.2].power_w == pytest.approx((0.1 + 0.9 * 0.45) * P_W, rel=1e-12)
    assert states[3.3].power_w == pytest.approx(0.1 * P_W, rel=1e-12)
    assert states[6.3].power_w == pytest.approx(P_W, rel=1e-12) and states[6.4].power_w == P_W
    (event,) = site.events()  # the reclose belongs to the same event
    assert (event.start_s, event.end_s) == (1.2, 6.3) and event.time_to_full_return_s == pytest.approx(5.1)
    assert event.blocks_tripped == ("A",) and event.blocks_transferred == ()
    assert event.mw_lost == pytest.approx(0.27) and event.mw_lost_at_s == pytest.approx(1.3)
    # tripped 11 steps twice; the ramps' unserved shares sum to 6.75 and 9.5 steps; 100 tokens a step
    assert event.tokens_not_served == pytest.approx(100 * (11 + 6.75 + 11 + 9.5), rel=1e-12)
    assert event.energy_not_served_kwh == pytest.approx(0.9 * 30e3 * (11 + 6.75 + 11 + 9.5) / 3.6e6, rel=1e-12)


def test_blocks_returning_together_start_stagger_s_apart_in_listed_order():
    site = site_of(
        block("B", 0.3, under_voltage=[[0.5, 0.0]]),
        block("A", 0.5, under_voltage=[[0.5, 0.0]]),
        block("C", 0.2, under_voltage=[[0.5, 0.0]]),
        return_to_service={"delay_s": 1, "ramp_s": 2, "stagger_s": 1},
    )
    states = drive(site, 80, v=sag(1.0, 1.1))
    starts = [(m[0], m[1]) for m in moves(site) if m[4] == "auto_return"]
    ends = [(m[0], m[1]) for m in moves(site) if m[4] == "ramp_end"]
    assert starts == [(2.1, "B"), (3.1, "A"), (4.1, "C")]
    assert ends == [(4.1, "B"), (5.1, "A"), (6.1, "C")]
    # at 3.6 s: B at 75 % of its ramp, A at 25 %, C waiting
    assert states[3.6].power_w == pytest.approx((0.3 * 0.75 + 0.5 * 0.25) * P_W, rel=1e-12)
    status = site.ride_through_state
    assert status.online_fraction == pytest.approx(1.0) and status.blocks["C"].since_s == pytest.approx(6.1)


def test_a_block_that_may_return_later_takes_the_next_slot():
    # B's return band holds 0.3 s later than A's: it still starts stagger_s after A
    site = site_of(
        block("A", 0.5, under_voltage=[[0.5, 0.0]]),
        block("B", 0.5, under_voltage=[[0.5, 0.0]], under_frequency=[[59.0, 100.0]]),
        return_to_service={"delay_s": 1, "ramp_s": 0, "stagger_s": 2},
    )
    drive(site, 60, v=sag(1.0, 1.1), f=lambda t: 58.5 if t <= 1.4 + 1e-9 else 60.0)
    assert [(m[0], m[1]) for m in moves(site) if m[4] == "return_band"] == [(2.1, "A"), (2.4, "B")]
    assert [(m[0], m[1]) for m in moves(site) if m[4] == "auto_return"] == [(2.1, "A"), (4.1, "B")]


def test_commanded_return_waits_for_release_block():
    site = site_of(
        block("A", 0.5, under_voltage=[[0.5, 0.0]]),
        block("B", 0.5, under_voltage=[[0.5, 0.0]]),
        return_to_service={"delay_s": 1, "ramp_s": 2, "mode": "commanded"},
    )
    release_a = ReleaseBlock(site="dc", block="A", ramp_s=1.0)
    states = drive(
        site,
        60,
        v=sag(1.0, 1.1),
        before={
            16: lambda t: site.apply(release_a, t),  # at 1.5 s, before A may return: it waits
            31: lambda t: site.apply(ReleaseBlock(site="dc", block="B"), t),  # at 3.0 s, the spec's ramp
        },
    )
    assert moves(site) == [
        (1.1, "A", "online", "tripped", "under_voltage"),
        (1.1, "B", "online", "tripped", "under_voltage"),
        (2.1, "A", "tripped", "waiting_return", "return_band"),
        (2.1, "B", "tripped", "waiting_return", "return_band"),
        (2.1, "A", "waiting_return", "returning", "released"),
        (3.0, "B", "waiting_return", "returning", "released"),
        (3.1, "A", "returning", "online", "ramp_end"),
        (5.0, "B", "returning", "online", "ramp_end"),
    ]
    assert states[2.5].power_w == pytest.approx(0.5 * 0.4 * P_W, rel=1e-12)
    assert states[4.0].power_w == pytest.approx((0.5 + 0.5 * 0.5) * P_W, rel=1e-12)
    assert site.inner.applied == []  # releases are the ride-through's own


def test_release_block_refusals_name_the_reason():
    site = site_of(
        block("A", 0.5, under_voltage=[[0.5, 0.0]]),
        block("B", 0.5, under_voltage=[[0.5, 0.0]]),
        return_to_service={"delay_s": 1, "mode": "commanded"},
    )
    with pytest.raises(CommandError, match="is online, on the grid: nothing to release"):
        site.apply(ReleaseBlock("dc", "A"), 0.0)
    drive(site, 12, v=sag(1.0, 1.1))
    site.apply(ReleaseBlock("dc", "A"), 1.2)
    with pytest.raises(CommandError, match="released already"):
        site.apply(ReleaseBlock("dc", "A"), 1.2)
    with pytest.raises(UnknownNameError, match=r"no such block; the site's blocks: \['A', 'B'\]"):
        site.apply(ReleaseBlock("dc", "Z"), 1.2)
    with pytest.raises(CommandError, match="ramp_s must be between 0"):
        site.apply(ReleaseBlock("dc", "B", ramp_s=-1.0), 1.2)
    with pytest.raises(CommandError, match="delivered to site 'dc'"):
        site.apply(ReleaseBlock("dc2", "B"), 1.2)
    auto = site_of(block(under_voltage=[[0.5, 0.0]]))
    with pytest.raises(CommandError, match="returns its blocks itself"):
        auto.apply(ReleaseBlock("dc", "A"), 0.0)


def test_leaving_the_band_while_waiting_cancels_the_slot():
    site = site_of(
        block("A", 0.5, under_voltage=[[0.5, 0.0]]),
        block("B", 0.5, under_voltage=[[0.5, 0.0]]),
        return_to_service={"delay_s": 1, "ramp_s": 0, "stagger_s": 3},
    )
    # back inside at 1.1 s; both may return at 2.1 s (A at once, B at 5.1 s); 0.85 pu at 3.0 s
    drive(site, 80, v=lambda t: (0.3, 1, 1) if 1.0 < t <= 1.1 else (0.85, 1, 1) if 2.9 < t <= 3.0 else NOMINAL)
    assert moves(site)[4:] == [
        (2.1, "A", "waiting_return", "returning", "auto_return"),
        (2.1, "A", "returning", "online", "ramp_end"),
        (3.0, "B", "waiting_return", "tripped", "band_left"),
        (4.0, "B", "tripped", "waiting_return", "return_band"),
        (5.1, "B", "waiting_return", "returning", "auto_return"),
        (5.1, "B", "returning", "online", "ramp_end"),
    ]
    left = site.machine.transitions[6]
    assert (left.quantity, left.value, left.limit) == ("v_min_pu", 0.85, 0.9)
    assert left.reason == "supply left the return band: v_min_pu 0.85 beyond 0.9"


# ----------------------------------------------------------------------------------- supply loss


def test_a_supply_loss_is_zero_pu_ups_blocks_serve_on_others_stop():
    site = site_of(
        block("A", 0.5, "ups", residual_fraction=0.2, under_voltage=[[0.5, 0.05]], ups={"energy_kwh": 10.0}),
        block("B", 0.5, under_voltage=[[0.5, 0.15]]),
        return_to_service={"delay_s": 0.5, "ramp_s": 0},
    )
    states = drive(
        site,
        25,
        v=lambda t: (1.0, 1.0, 1.0),  # what the engine gives is ignored while the supply is lost
        before={11: lambda t: site.set_supply(False, t), 21: lambda t: site.set_supply(True, t)},
    )
    assert moves(site)[:2] == [
        (1.1, "A", "online", "on_ups", "under_voltage"),
        (1.2, "B", "online", "tripped", "under_voltage"),
    ]
    assert site.machine.transitions[0].value == 0.0
    for k in range(11, 21):
        s = states[k / 10]
        assert s.power_w == 0.0 and not s.supplied
        # A's IT load rides on its UPS from the first step without supply; B serves nothing
        assert s.models["m"].throughput_tok_s == pytest.approx(0.5 * TOK_S, rel=1e-12)
    assert states[2.1].supplied and states[2.1].power_w == pytest.approx(0.5 * 0.2 * P_W)
    assert site.inner.supplied  # the inner site was never cut off
    t = site.totals
    # by 2.5 s: asked 750 kJ = grid 300 + 15 kJ, UPS 120 kW x 1.5 s, not served 30 + 150 + 75 kJ
    assert t.asked_j == pytest.approx(750e3, rel=1e-12)
    assert t.grid_j == pytest.approx(315e3, rel=1e-12)
    assert t.ups_delivered_j == pytest.approx(180e3, rel=1e-12)
    assert t.not_served_j == pytest.approx(255e3, rel=1e-12)


# ---------------------------------------------------------------------------------- bookkeeping


def test_energy_from_grid_and_ups_is_what_was_asked_minus_what_was_not_served():
    toy_spec = SiteSpec.model_validate(
        {
            "name": "dc",
            "bus": "dc",
            "models": [{"model": "toy-a", "gpus_per_replica": 1, "replicas": 12, "batch_size": 128}],
        }
    )
    ride = spec(
        [
            block("A", 0.25, "ups", residual_fraction=0.3, under_voltage=[[0.6, 0.0]], ups={"energy_kwh": 0.0005}),
            block("B", 0.75, residual_fraction=0.05, under_voltage=[[0.5, 0.2]]),
        ],
        return_to_service={"delay_s": 1, "ramp_s": 1.5, "stagger_s": 0.4},
    )
    site = RideThroughSite(ToySite(toy_spec), ride)
    site.reset(3)
    asked = RideThroughSite(ToySite(toy_spec), spec([block()]))  # the same noise, never disturbed
    asked.reset(3)
    drawn_j = asked_j = 0.0
    for k in range(1, 151):
        t = k / 10
        s = site.step_block(np.array([t]), 0.1)
        asked_j += asked.step_block(np.array([t]), 0.1).power_w[0] * 0.1
        drawn_j += s.power_w[0] * 0.1
        site.observe_grid(t, 0.1, (0.4, 1.0, 1.0) if 1.0 < t <= 1.5 or 4.0 < t <= 4.3 else NOMINAL, 60.0)
    totals = site.totals
    assert {m[3] for m in moves(site)} >= {"on_ups", "ups_empty", "tripped", "returning", "recharging"}
    assert totals.asked_j == pytest.approx(asked_j, rel=1e-12)
    assert totals.grid_j + totals.ups_delivered_j + totals.not_served_j == pytest.approx(asked_j, rel=1e-12)
    assert drawn_j == pytest.approx(totals.grid_j + totals.recharge_j, rel=1e-12)
    assert totals.ups_drawn_j == pytest.approx(totals.ups_delivered_j / 0.95, rel=1e-12)
    assert totals.not_served_j > 0 and totals.ups_delivered_j > 0 and totals.recharge_j > 0


def test_one_block_of_steps_equals_the_same_steps_one_by_one():
    def run(per_call: int) -> tuple[np.ndarray, np.ndarray, list]:
        site = site_of(
            block("A", 0.6, "ups", residual_fraction=0.1, under_voltage=[[0.5, 0.1]], ups={"energy_kwh": 0.02}),
            block("B", 0.4, under_voltage=[[0.7, 0.2]]),
            return_to_service={"delay_s": 1, "ramp_s": 1.3, "stagger_s": 0.5},
        )
        p, tok = [], []
        for j in range(1, 41):  # solves every 0.5 s over steps of 0.1 s
            times = np.array([(5 * j - 4 + i) / 10 for i in range(5)])
            for chunk in np.split(times, 5 // per_call):
                series = site.step_block(chunk, 0.1)
                p.append(series.p_w)
                tok.append(series.models["m"].throughput_tok_s)
            t = j / 2
            site.observe_grid(t, 0.5, (0.45, 1, 1) if 1.0 < t <= 2.0 else NOMINAL, 60.0)
        return np.concatenate(p), np.concatenate(tok), moves(site)

    whole, one_by_one = run(5), run(1)
    assert np.array_equal(whole[0], one_by_one[0]) and np.array_equal(whole[1], one_by_one[1])
    assert whole[2] == one_by_one[2] and len(whole[2]) >= 6


# ------------------------------------------------------------------------- the site's interface


def test_fractions_summing_to_1_only_within_rounding_give_exact_whole_and_none():
    # 0.1 + 0.2 + 0.7 is 1.0000000000000002 in floats
    site = site_of(*(block(n, f, under_voltage=[[0.5, 0.0]]) for n, f in (("A", 0.1), ("B", 0.2), ("C", 0.7))))
    states = drive(site, 30, v=sag(1.0, 100.0))
    assert states[1.0].power_w == P_W and states[1.0].models["m"].throughput_tok_s == TOK_S
    out = states[2.0]
    assert out.power_w == 0.0 and out.models["m"].throughput_tok_s == 0.0 and math.isnan(out.models["m"].itl_s)
    t = site.totals
    assert t.grid_j + t.ups_delivered_j + t.not_served_j == pytest.approx(t.asked_j, rel=1e-15)


def test_the_steady_site_is_the_inner_site_unchanged():
    site = site_of(block("A", 0.5), block("B", 0.5, "ups", ups={"energy_kwh": 1}))
    inner = ConstantSite()
    for k in range(1, 11):
        t = k / 10
        got, want = site.step_block(np.array([t]), 0.1), inner.step_block(np.array([t]), 0.1)
        assert np.array_equal(got.p_w, want.p_w) and np.array_equal(got.q_var, want.q_var)
        assert got.models["m"].throughput_tok_s.tolist() == [TOK_S]
        site.observe_grid(t, 0.1, (0.96, 1.0, 1.04), 60.0)
    records = site.take_records()
    assert records["t_s"].size == 20 and set(records["mode"]) == {"online"}
    assert np.isnan(records["ups_energy_kwh"][0]) and records["ups_energy_kwh"][1] == 1.0
    assert site.take_records()["t_s"].size == 0  # taken


def test_records_and_state_follow_the_blocks():
    site = site_of(
        block("A", 0.5, "ups", residual_fraction=0.2, under_voltage=[[0.5, 0.0]], ups={"energy_kwh": 1.0}),
        block("B", 0.5, under_voltage=[[0.5, 0.0]]),
    )
    drive(site, 20, v=sag(1.0, 100.0))
    state = site.ride_through_state
    a, b = state.blocks["A"], state.blocks["B"]
    assert state.t_s == 2.0 and state.online_fraction == 0.0 and state.on_ups_fraction == 0.5
    assert (a.mode, a.since_s, a.on_ups, b.mode) == ("on_ups", 1.1, True, "tripped")
    assert a.time_in_mode_s == pytest.approx(0.9) and a.grid_fraction == 0.2 and b.serving_fraction == 0.0
    used_kwh = 0.5 * 0.8 * P_W * 0.9 / 0.95 / 3.6e6  # the IT load of A over 0.9 s
    assert a.ups_energy_kwh == pytest.approx(1.0 - used_kwh, rel=1e-12)
    assert a.state_of_charge == pytest.approx(1.0 - used_kwh, rel=1e-12) and b.state_of_charge is None
    records = site.take_records()
    at = records["t_s"] == 2.0
    assert records["block"][at].tolist() == ["A", "B"] and records["mode"][at].tolist() == ["on_ups", "tripped"]
    assert records["grid_fraction"][at].tolist() == [0.2, 0.0] and records["serving_fraction"][at].tolist() == [1, 0]
    assert set(records["mode"]) <= set(MODES)
    row = site.take_transitions()[0].fields()
    assert json.loads(json.dumps(row)) == row and row["reason"].startswith("under_voltage point 0")
    assert site.take_transitions() == []  # taken
    summary = site.summary()
    assert summary["events"][0]["blocks_transferred"] == ["A"] and summary["events"][0]["blocks_tripped"] == ["B"]
    site.reset(0)
    assert site.ride_through_state.blocks["A"].state_of_charge == 1.0 and site.events() == []


def test_other_commands_go_to_the_inner_site():
    toy_spec = SiteSpec.model_validate(
        {
            "name": "dc",
            "bus": "dc",
            "models": [{"model": "toy-a", "gpus_per_replica": 1, "replicas": 4, "batch_size": 128}],
        }
    )
    site = RideThroughSite(ToySite(toy_spec), spec([block()]))
    site.reset(0)
    site.apply(SetBatchSize("dc", "toy-a", 8), 0.0)
    assert site.step(0.1, 0.1).models["toy-a"].batch_size == 8


def test_the_engine_contract_is_checked():
    site = site_of(block())
    drive(site, 5)
    with pytest.raises(SimulationError, match=r"t=0.7 s: site 'dc' ride-through: the solve stands for \(0.6, 0.7\]"):
        site.observe_grid(0.7, 0.1, NOMINAL, 60.0)
    with pytest.raises(SimulationError, match="the step starts at 0.6 s, but the previous one ended at 0.5 s"):
        site.step_block(np.array([0.7]), 0.1)
    site.step_block(np.array([0.6, 0.7]), 0.1)
    with pytest.raises(SimulationError, match="already ran to 0.7 s"):
        site.observe_grid(0.6, 0.1, NOMINAL, 60.0)
    for v, f, words in [
        ((1.0, math.nan, 1.0), 60.0, "three finite magnitudes"),
        ((1.0, 1.0), 60.0, "three finite magnitudes"),
        ((1.0, -0.1, 1.0), 60.0, ">= 0"),
        (NOMINAL, math.inf, "f_hz must be a finite frequency"),
    ]:
        with pytest.raises(SimulationError, match=words):
            site.observe_grid(0.7, 0.2, v, f)
    with pytest.raises(SimulationError, match="a step >"):
        RideThrough(spec([block()]), "dc").observe(1.0, TIME_TOLERANCE_S / 2, NOMINAL, 60.0)


# ---------------------------------------------------------------------------------- the command


def test_release_block_is_a_datacenter_command_with_its_own_actuator():
    assert COMMANDS["release_block"] is ReleaseBlock
    command = ReleaseBlock(site="dc", block="hall2", ramp_s=30)
    assert command.ramp_s == 30.0 and isinstance(command.ramp_s, float)
    assert command.actuators() == (Actuator("ride_through", ("dc", "hall2")),)
    assert command.actuators()[0].overlaps(Actuator("ride_through", ("dc",)))
    with pytest.raises(CommandError, match="ReleaseBlock.ramp_s: expected a finite number or None"):
        ReleaseBlock(site="dc", block="hall2", ramp_s=math.nan)
    with pytest.raises(CommandError, match="ReleaseBlock.block: expected a string"):
        ReleaseBlock(site="dc", block=2)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ validation

GOOD_BLOCK = {"name": "A", "fraction": 1.0, "action": "trip"}

BAD_SPECS: list[tuple[str, dict[str, Any], str, str]] = [
    # (id, ride_through data, field path, words of the message)
    ("sum", {"blocks": [{**GOOD_BLOCK, "fraction": 0.6}]}, "", "fractions sum to 0.6, not 1"),
    (
        "sum-two",
        {"blocks": [{**GOOD_BLOCK, "fraction": 0.5}, {**GOOD_BLOCK, "name": "B", "fraction": 0.4}]},
        "",
        "(A 0.5, B 0.4)",
    ),
    ("fraction>1", {"blocks": [{**GOOD_BLOCK, "fraction": 1.5}]}, "blocks.0.fraction", "less than or equal to 1"),
    ("fraction<0", {"blocks": [{**GOOD_BLOCK, "fraction": -0.1}]}, "blocks.0.fraction", "greater than or equal to 0"),
    ("fraction-nan", {"blocks": [{**GOOD_BLOCK, "fraction": math.nan}]}, "blocks.0.fraction", "finite number"),
    ("no-blocks", {"blocks": []}, "blocks", "at least 1"),
    (
        "duplicate",
        {"blocks": [{**GOOD_BLOCK, "fraction": 0.5}, {**GOOD_BLOCK, "fraction": 0.5}]},
        "",
        "names listed twice: ['A']",
    ),
    ("unknown-key", {"blocks": [{**GOOD_BLOCK, "colour": "red"}]}, "blocks.0.colour", "Extra inputs"),
    ("unknown-top", {"blocks": [GOOD_BLOCK], "delay_s": 3}, "delay_s", "Extra inputs"),
    ("action", {"blocks": [{**GOOD_BLOCK, "action": "shed"}]}, "blocks.0.action", "'ups' or 'trip'"),
    (
        "uv-not-monotone",
        {"blocks": [{**GOOD_BLOCK, "under_voltage": [[0.5, 2.0], [0.8, 1.0]]}]},
        "blocks.0.under_voltage",
        "under_voltage is not monotone: point 1 (0.8 pu, 1 s) allows no longer than point 0 (0.5 pu, 2 s)",
    ),
    (
        "uv-unsorted",
        {"blocks": [{**GOOD_BLOCK, "under_voltage": [[0.8, 2.0], [0.5, 1.0]]}]},
        "blocks.0.under_voltage",
        "point 1 (0.5 pu, 1 s) follows point 0 (0.8 pu, 2 s): list the points by strictly ascending level",
    ),
    (
        "ov-not-monotone",
        {"blocks": [{**GOOD_BLOCK, "over_voltage": [[1.1, 0.5], [1.2, 0.5]]}]},
        "blocks.0.over_voltage",
        "point 1 (1.2 pu, 0.5 s) allows no shorter than point 0 (1.1 pu, 0.5 s)",
    ),
    (
        "uf-not-monotone",
        {"blocks": [{**GOOD_BLOCK, "under_frequency": [[58.0, 5.0], [59.0, 1.0]]}]},
        "blocks.0.under_frequency",
        "point 1 (59 Hz, 1 s) allows no longer",
    ),
    (
        "of-not-monotone",
        {"blocks": [{**GOOD_BLOCK, "over_frequency": [[61.0, 1.0], [62.0, 2.0]]}]},
        "blocks.0.over_frequency",
        "point 1 (62 Hz, 2 s) allows no shorter",
    ),
    (
        "negative-duration",
        {"blocks": [{**GOOD_BLOCK, "under_voltage": [[0.5, -0.1]]}]},
        "blocks.0.under_voltage",
        "point 0 (0.5 pu, -0.1 s): the duration must be between 0",
    ),
    (
        "nan-level",
        {"blocks": [{**GOOD_BLOCK, "under_voltage": [[math.nan, 1.0]]}]},
        "blocks.0.under_voltage.0.0",
        "finite",
    ),
    (
        "inf-duration",
        {"blocks": [{**GOOD_BLOCK, "over_voltage": [[1.1, math.inf]]}]},
        "blocks.0.over_voltage.0.1",
        "finite",
    ),
    ("bool", {"blocks": [{**GOOD_BLOCK, "under_voltage": [[0.5, True]]}]}, "blocks.0.under_voltage", "boolean"),
    ("pair", {"blocks": [{**GOOD_BLOCK, "under_voltage": [[0.5]]}]}, "blocks.0.under_voltage.0.1", "Field required"),
    (
        "uv-above-nominal",
        {"blocks": [{**GOOD_BLOCK, "under_voltage": [[1.05, 1.0]]}]},
        "blocks.0.under_voltage",
        "1.05 pu is not below the nominal 1 pu",
    ),
    (
        "ov-below-nominal",
        {"blocks": [{**GOOD_BLOCK, "over_voltage": [[0.95, 1.0]]}]},
        "blocks.0.over_voltage",
        "0.95 pu is not above the nominal 1 pu",
    ),
    (
        "uf-above-nominal",
        {"blocks": [{**GOOD_BLOCK, "under_frequency": [[61.0, 1.0]]}]},
        "",
        "blocks.0.under_frequency point 0: 61 Hz is not below the nominal 60 Hz",
    ),
    (
        "of-below-nominal-50hz",
        {"nominal_hz": 50, "blocks": [{**GOOD_BLOCK, "over_frequency": [[49.0, 1.0]]}]},
        "",
        "blocks.0.over_frequency point 0: 49 Hz is not above the nominal 50 Hz",
    ),
    ("ups-missing", {"blocks": [{**GOOD_BLOCK, "action": "ups"}]}, "blocks.0", "action ups needs ups"),
    (
        "ups-on-trip",
        {"blocks": [{**GOOD_BLOCK, "ups": {"energy_kwh": 1}}]},
        "blocks.0",
        "action trip has no UPS to use",
    ),
    (
        "ups-energy",
        {"blocks": [{**GOOD_BLOCK, "action": "ups", "ups": {"energy_kwh": 0}}]},
        "blocks.0.ups.energy_kwh",
        "greater than 0",
    ),
    (
        "ups-efficiency",
        {"blocks": [{**GOOD_BLOCK, "action": "ups", "ups": {"energy_kwh": 1, "charge_efficiency": 1.2}}]},
        "blocks.0.ups.charge_efficiency",
        "less than or equal to 1",
    ),
    (
        "two-chargers",
        {
            "blocks": [
                {**GOOD_BLOCK, "action": "ups", "ups": {"energy_kwh": 1, "recharge_kw": 5, "recharge_fraction": 0.2}}
            ]
        },
        "blocks.0.ups",
        "give the charger's power once",
    ),
    (
        "residual",
        {"blocks": [{**GOOD_BLOCK, "residual_fraction": 1.2}]},
        "blocks.0.residual_fraction",
        "less than or equal to 1",
    ),
    (
        "delay",
        {"blocks": [GOOD_BLOCK], "return_to_service": {"delay_s": -1}},
        "return_to_service.delay_s",
        "greater than or equal to 0",
    ),
    (
        "ramp-inf",
        {"blocks": [GOOD_BLOCK], "return_to_service": {"ramp_s": math.inf}},
        "return_to_service.ramp_s",
        "finite",
    ),
    (
        "band",
        {"blocks": [GOOD_BLOCK], "return_to_service": {"v_min_pu": 1.02}},
        "return_to_service.v_min_pu",
        "less than 1",
    ),
    (
        "f-band",
        {"blocks": [GOOD_BLOCK], "return_to_service": {"f_min_hz": 60.5}},
        "",
        "return_to_service.f_min_hz: 60.5 Hz is not below the nominal 60 Hz",
    ),
    (
        "f-band-order",
        {"blocks": [GOOD_BLOCK], "return_to_service": {"f_min_hz": 59.9, "f_max_hz": 59.8}},
        "return_to_service",
        "f_min_hz (59.9 Hz) must be below f_max_hz (59.8 Hz)",
    ),
    (
        "mode",
        {"blocks": [GOOD_BLOCK], "return_to_service": {"mode": "manual"}},
        "return_to_service.mode",
        "'auto' or 'commanded'",
    ),
]


@pytest.mark.parametrize(("data", "path", "words"), [c[1:] for c in BAD_SPECS], ids=[c[0] for c in BAD_SPECS])
def test_bad_ride_through_is_refused_naming_the_field(data, path, words):
    with pytest.raises(ValidationError) as info:
        SiteSpec.model_validate(
            {
                "name": "dc",
                "bus": "671",
                "models": [{"model": "m", "gpus_per_replica": 1, "replicas": 1, "batch_size": 8}],
                "ride_through": data,
            }
        )
    where = "ride_through" + (f".{path}" if path else "")
    found = [(".".join(map(str, e["loc"])), e["msg"]) for e in info.value.errors()]
    assert any(loc == where and words in msg for loc, msg in found), found


def test_a_scenario_file_names_the_file_and_field():
    bad = "{blocks: [{name: A, fraction: 1, action: trip, under_voltage: [[0.5, 2], [0.8, 1]]}]}"
    with pytest.raises(ScenarioError) as info:
        load_scenario("ieee13_none", overrides=[f"datacenters.0.ride_through={bad}"])
    assert any(
        loc.endswith("scenarios/ieee13_none.yaml: datacenters.0.ride_through.blocks.0.under_voltage")
        and "not monotone: point 1" in msg
        for loc, msg in info.value.problems
    ), info.value.problems


def test_defaults_and_a_site_without_ride_through_dump_as_before():
    base = {
        "name": "dc",
        "bus": "671",
        "models": [{"model": "m", "gpus_per_replica": 1, "replicas": 1, "batch_size": 8}],
    }
    assert "ride_through" not in SiteSpec.model_validate(base).model_dump()
    with_ride = SiteSpec.model_validate({**base, "ride_through": {"blocks": [GOOD_BLOCK]}})
    assert SiteSpec.model_validate(with_ride.model_dump()) == with_ride
    rt = with_ride.ride_through
    assert rt is not None and rt.nominal_hz == 60.0
    b = rt.blocks[0]
    assert b.under_voltage == [(0.7, 0.02), (0.8, 0.5), (0.9, 10.0)] and b.over_voltage == [(1.1, 0.5), (1.2, 0.003)]
    assert (b.under_frequency, b.over_frequency, b.residual_fraction) == ([], [], 0.0)
    band = rt.return_to_service
    assert (band.v_min_pu, band.v_max_pu, band.delay_s, band.ramp_s, band.stagger_s, band.mode) == (
        0.9,
        1.1,
        300.0,
        300.0,
        0.0,
        "auto",
    )


def test_a_replay_site_rides_through_with_its_own_series(library: TraceLibrary):
    replay_spec = site_spec(
        [{"model": "Llama-3.1-8B", "gpus_per_replica": 1, "replicas": 64, "batch_size": 128}], name="dc"
    )
    bare = ReplayDatacenter.from_spec(replay_spec, library)
    site = RideThroughSite(
        ReplayDatacenter.from_spec(replay_spec, library),
        spec(
            [block("A", 0.5, under_voltage=[[0.5, 0.0]]), block("B", 0.5, under_voltage=[[0.2, 0.0]])],
            return_to_service={"delay_s": 1, "ramp_s": 0},
        ),
    )
    bare.reset(7)
    site.reset(7)
    for k in range(1, 41):
        t = k / 10
        want, got = bare.step_block(np.array([t]), 0.1), site.step_block(np.array([t]), 0.1)
        half = 1.1 + 1e-9 < t <= 2.2 + 1e-9  # A trips at 1.1 s, may return at 2.2 s
        assert np.array_equal(got.p_w, 0.5 * want.p_w if half else want.p_w), t
        tok_want, tok_got = want.models["Llama-3.1-8B"].throughput_tok_s, got.models["Llama-3.1-8B"].throughput_tok_s
        assert tok_got == pytest.approx(tok_want * (0.5 if half else 1.0), rel=1e-15), t
        site.observe_grid(t, 0.1, (0.4, 1.0, 1.0) if 1.0 < t <= 1.2 else NOMINAL, 60.0)
    assert moves(site) == [
        (1.1, "A", "online", "tripped", "under_voltage"),
        (2.2, "A", "tripped", "waiting_return", "return_band"),
        (2.2, "A", "waiting_return", "returning", "auto_return"),
        (2.2, "A", "returning", "online", "ramp_end"),
    ]


# ---------------------------------------------------------------------------------- repeated sags


def _sags(*windows: tuple[float, float], level: float = 0.85) -> Volts:
    """``level`` pu on phase a for the solves in each ``(lo, hi]``, nominal otherwise."""
    return lambda t: (level, 1.0, 1.0) if any(lo + 1e-9 < t <= hi + 1e-9 for lo, hi in windows) else NOMINAL


def test_the_third_sag_within_the_window_acts_at_its_first_solve() -> None:
    # three 0.2 s sags to 0.85 pu (each well inside the default curve's 0.8 pu / 10 s point)
    # starting at 1.0, 5.0 and 9.0 s: the third falls 8 s after the first, within 10 s
    site = site_of(block(repeated_sags={"count": 3, "within_s": 10}))
    drive(site, 120, _sags((1.0, 1.2), (5.0, 5.2), (9.0, 9.2)))
    (leave, *_) = site.machine.transitions
    assert (round(leave.t_s, 9), leave.to_mode, leave.cause) == (9.1, "tripped", "repeated_sags")
    assert leave.value == 3 and leave.limit == 0.9 and leave.duration_s == pytest.approx(8.0)
    assert leave.reason == "sag 3 below 0.9 pu within 8 s"
    (event,) = site.events()
    assert event.blocks_tripped == ("A",) and event.start_s == pytest.approx(9.1)


def test_sags_further_apart_than_the_window_do_not_add_up() -> None:
    # the third sag starts 10.1 s after the first: only two fall within any 10 s
    site = site_of(block(repeated_sags={"count": 3, "within_s": 10}))
    drive(site, 150, _sags((1.0, 1.2), (5.0, 5.2), (11.1, 11.3)))
    assert site.machine.transitions == ()
    # a sag that lasts (0.85 pu from 1.0 to 3.0 s) is one sag, not one per solve
    site = site_of(block(repeated_sags={"count": 2, "within_s": 10}))
    drive(site, 50, _sags((1.0, 3.0)))
    assert site.machine.transitions == ()


def test_repeated_sags_refuse_bad_values() -> None:
    for bad, words in (
        ({"count": 1, "within_s": 10}, "greater than or equal to 2"),
        ({"count": 3, "within_s": 0}, "greater than 0"),
        ({"count": 3, "within_s": 10, "below_pu": 1.0}, "less than 1"),
    ):
        with pytest.raises(ValidationError, match=words):
            spec([block(repeated_sags=bad)])

"""The return coordinator against a hand-computed timeline of crafted observations."""

from __future__ import annotations

import numpy as np
import pytest

from openg2g.controllers.return_coordinator import ReturnCoordinator
from openg2g.core.commands import ReleaseBlock
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext, ModelInfo, RideThroughInfo, SiteInfo
from openg2g.core.state import BlockStatus, DatacenterState, GridState, Observation, RideThroughState

BUS_PHASES = ("671.a", "671.b", "671.c")


def _context(mode: str = "commanded", f0_hz: float | None = None) -> ControlContext:
    model = ModelInfo("m", 1, 10, (8,), (1.0,), (0.05,), (1.0,), None, 8)
    info = RideThroughInfo({"A": 0.5, "B": 0.5}, {"A": "ups", "B": "ups"}, mode, 300.0)
    sites = {"dc": SiteInfo("dc", "671", {"m": model}, 0.95, 1.0, ride_through=info)}
    return ControlContext(sites, BUS_PHASES, {}, 0.95, 1.05, 1.0, f0_hz=f0_hz)


def _observation(
    t: float, modes: dict[str, str], v_pu: float = 1.0, taps: int = 0, f_hz: float | None = None, mw: float = 10.0
) -> Observation:
    blocks = {
        name: BlockStatus(name, 0.5, mode, 0.0, t, mode == "on_ups", 1.0, 1.0, 1.0, 1.0, False)
        for name, mode in modes.items()
    }
    online = sum(0.5 for m in modes.values() if m in ("online", "recharging"))
    p = np.full(3, mw * 1e6 / 3)
    dc = DatacenterState("dc", t, p, 0.3 * p, {})
    grid = GridState(t, BUS_PHASES, np.full(3, v_pu), {"reg1": (taps, taps, taps)}, p, 0.3 * p, 0.0)
    return Observation(
        t, {"dc": dc}, grid, 0.95, 1.05, f_hz=f_hz, ride_through={"dc": RideThroughState(t, blocks, online, 0.0)}
    )


def test_releases_one_block_at_a_time_within_the_ramp_limit_once_settled() -> None:
    ctrl = ReturnCoordinator(ReturnCoordinator.Config(max_ramp_mw_per_min=30, settle_s=5))
    ctrl.reset(_context(), 0)
    sent: dict[float, list] = {}
    for t in range(1, 40):
        if t == 1:
            obs = _observation(t, {"A": "online", "B": "online"})  # 10 MW before the disturbance
        elif t < 10:
            obs = _observation(t, {"A": "on_ups", "B": "on_ups"}, v_pu=0.5 if t == 2 else 1.0, mw=0.0)
        elif t < 11:
            obs = _observation(t, {"A": "waiting_return", "B": "waiting_return"}, mw=0.0)
        elif t < 20:
            # A ramps from 10 s (5 MW over 60 * 5 / 30 = 10 s); a tap moves at 15 s
            obs = _observation(t, {"A": "returning", "B": "waiting_return"}, taps=1 if t >= 15 else 0, mw=0.0)
        elif t < 21:
            obs = _observation(t, {"A": "recharging", "B": "waiting_return"}, taps=1, mw=5.0)
        else:
            obs = _observation(t, {"A": "recharging", "B": "returning"}, taps=1, mw=5.0)
        commands = ctrl.step(obs)
        if commands:
            sent[t] = commands
    # unsettled at 2 s (0.5 pu): settled from 7 s, A ready at 10 s; B waits for A's ramp (to 20 s)
    # and for 5 s without a tap move after the one at 15 s: 20 s
    assert sent == {
        10: [ReleaseBlock(site="dc", block="A", ramp_s=10.0)],
        20: [ReleaseBlock(site="dc", block="B", ramp_s=10.0)],
    }


def test_waits_for_the_frequency_to_come_back() -> None:
    ctrl = ReturnCoordinator(ReturnCoordinator.Config(settle_s=3, frequency_band_hz=0.05))
    ctrl.reset(_context(f0_hz=60.0), 0)
    ctrl.step(_observation(0, {"A": "online", "B": "online"}, f_hz=60.0))
    released = []
    for t in range(1, 12):
        f = 60.2 if t <= 5 else 60.01
        if ctrl.step(_observation(t, {"A": "waiting_return", "B": "on_ups"}, f_hz=f, mw=0.0)):
            released.append(t)
    assert released == [8]  # 60.2 Hz until 5 s, settled 3 s later


def test_refuses_sites_it_cannot_release() -> None:
    with pytest.raises(ControllerError, match="no site has a ride-through with a commanded return"):
        ReturnCoordinator().reset(_context(mode="auto"), 0)
    with pytest.raises(ControllerError, match=r"unknown sites \['dc9'\]"):
        ReturnCoordinator(ReturnCoordinator.Config(sites=["dc9"])).reset(_context(), 0)


def test_a_block_running_low_or_waiting_too_long_goes_without_the_grid_settling() -> None:
    ctrl = ReturnCoordinator(ReturnCoordinator.Config(settle_s=5, max_wait_s=50, release_below_soc=0.3))
    ctrl.reset(_context(), 0)
    ctrl.step(_observation(0, {"A": "online", "B": "online"}))

    def low_voltage(t: float, modes: dict[str, str], soc: float) -> Observation:
        obs = _observation(t, modes, v_pu=0.9, mw=0.0)  # never settled
        blocks = {
            name: BlockStatus(name, 0.5, m, 0.0, t - 1.0, m == "on_ups", 1.0, 1.0, 1.0, soc, False)
            for name, m in modes.items()
        }
        return Observation(
            t, obs.datacenters, obs.grid, 0.95, 1.05, ride_through={"dc": RideThroughState(t, blocks, 0.0, 0.0)}
        )

    assert ctrl.step(low_voltage(10, {"A": "waiting_return", "B": "on_ups"}, soc=0.5)) == []
    assert ctrl.step(low_voltage(11, {"A": "waiting_return", "B": "on_ups"}, soc=0.3)) == [
        ReleaseBlock(site="dc", block="A", ramp_s=10.0)
    ]
    # waiting 50 s (time in mode from the status) releases too
    ctrl = ReturnCoordinator(ReturnCoordinator.Config(settle_s=5, max_wait_s=50))
    ctrl.reset(_context(), 0)
    ctrl.step(_observation(0, {"A": "online", "B": "online"}))
    late = _observation(60, {"A": "waiting_return", "B": "on_ups"}, v_pu=0.9, mw=0.0)
    assert ctrl.step(late) == [ReleaseBlock(site="dc", block="A", ramp_s=10.0)]  # time in mode 60 s


def test_voltage_sensitivity_follows_the_share_of_the_load_on_the_grid() -> None:
    from openg2g.controllers._voltage import SensitivityCache, grid_share

    obs = _observation(5, {"A": "on_ups", "B": "online"})
    # A on its UPS draws its residual (crafted 1.0 here): make it draw nothing, as a UPS block with residual 0
    blocks = dict(obs.ride_through["dc"].blocks)
    blocks["A"] = BlockStatus("A", 0.5, "on_ups", 0.0, 5.0, True, 0.0, 1.0, 1.0, 1.0, False)
    obs = Observation(
        5, obs.datacenters, obs.grid, 0.95, 1.05, ride_through={"dc": RideThroughState(5, blocks, 0.5, 0.5)}
    )
    h = -np.ones((3, 3))
    obs = Observation(5, obs.datacenters, obs.grid, 0.95, 1.05, lambda site: h, ride_through=obs.ride_through)
    assert grid_share(obs, "dc") == 0.5 and grid_share(obs, "other") == 1.0
    assert SensitivityCache(np.arange(3)).get(obs, "dc", 0).tolist() == (0.5 * h).tolist()

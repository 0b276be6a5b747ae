"""Rule-based, tap schedule, storage droop, load shift and no-op controllers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from openg2g.controllers.load_shift import LoadShiftController
from openg2g.controllers.noop import NoopController
from openg2g.controllers.rule_based import RuleBasedController
from openg2g.controllers.storage_droop import StorageDroopController, droop_setpoint
from openg2g.controllers.tap_schedule import TapScheduleController
from openg2g.core.commands import SetStoragePower, SetTaps, ShiftReplicas
from openg2g.core.errors import ControllerError
from tests.controllers.conftest import battery, make_context, make_observation, toy_model

# -- rule based ------------------------------------------------------------------------------


def _rule(ctx, **params) -> RuleBasedController:
    ctrl = RuleBasedController(RuleBasedController.Config(**params))
    ctrl.reset(ctx, 0)
    return ctrl


def test_rule_based_steps_down_on_undervoltage_and_back_up_on_margin():
    ctx = make_context([toy_model("m1"), toy_model("m2", initial_batch_size=64)])
    ctrl = _rule(ctx, hold_s=0.0, release_margin_pu=0.01)
    cmds = ctrl.step(make_observation(ctx, 0.94, t_s=1))
    assert {(c.model, c.batch_size) for c in cmds} == {("m1", 64), ("m2", 32)}
    # in the band between trigger and release: hold
    assert ctrl.step(make_observation(ctx, 0.955, t_s=2, batches={"m1": 64, "m2": 32})) == []
    # margin: back up one size, never above the initial size
    cmds = ctrl.step(make_observation(ctx, 0.97, t_s=3, batches={"m1": 64, "m2": 32}))
    assert {(c.model, c.batch_size) for c in cmds} == {("m1", 128), ("m2", 64)}
    assert ctrl.step(make_observation(ctx, 0.97, t_s=4)) == []


def test_rule_based_overvoltage_steps_up_and_hold_time_is_respected():
    ctx = make_context([toy_model("m1", initial_batch_size=64)])
    ctrl = _rule(ctx, hold_s=5.0)
    assert [c.batch_size for c in ctrl.step(make_observation(ctx, 1.06, t_s=0, batches={"m1": 64}))] == [128]
    assert ctrl.step(make_observation(ctx, 1.06, t_s=2, batches={"m1": 128})) == []  # holding
    assert [c.batch_size for c in ctrl.step(make_observation(ctx, 1.06, t_s=5, batches={"m1": 128}))] == [256]


def test_rule_based_changes_a_model_at_most_its_budget_in_any_60_s():
    ctx = make_context([toy_model("m1", initial_batch_size=64)])
    ctrl = _rule(ctx, hold_s=0.0, max_changes_per_min=2)
    batch, sent = 64, []
    for t in range(62):  # under-voltage all along: a step down asked for every second
        for c in ctrl.step(make_observation(ctx, 0.94, t_s=t, batches={"m1": batch})):
            batch = c.batch_size
            sent.append((t, batch))
    # two changes, then held until the first is 60 s old, then the next
    assert sent == [(0, 32), (1, 16), (60, 8)]  # 8: the smallest measured size


def test_change_budget_window():
    from openg2g.controllers._budget import ChangeBudget

    budget = ChangeBudget(3)
    for t in (0.0, 0.1, 30.0):
        assert budget.allows("m", t)
        budget.spend("m", t)
    assert not budget.allows("m", 59.9) and budget.allows("other", 59.9)
    assert budget.allows("m", 60.0)  # the change at 0 s is 60 s old: out of the window, as the summary counts
    assert ChangeBudget(None).allows("m", 0.0)


def test_rule_based_latency_guard():
    info = toy_model("m1", initial_batch_size=256, itl_deadline_s=0.06)
    ctx = make_context([info])
    ctrl = _rule(ctx, hold_s=0.0)
    # ITL above the deadline steps down whatever the voltage
    cmds = ctrl.step(make_observation(ctx, 1.0, t_s=0, batches={"m1": 256}, itl_s={"m1": 0.08}))
    assert [c.batch_size for c in cmds] == [128]
    # overvoltage would step up, but the measured ITL at the next size exceeds the deadline
    assert info.itl_s[info.batch_sizes.index(512)] > 0.06 >= info.itl_s[info.batch_sizes.index(128)]
    cmds = ctrl.step(make_observation(ctx, 1.06, t_s=1, batches={"m1": 256}, itl_s={"m1": 0.05}))
    assert cmds == [] or all(c.batch_size <= 256 for c in cmds)


def test_rule_based_rejects_release_below_trigger():
    with pytest.raises(ValidationError, match="release_margin_pu"):
        RuleBasedController.Config(trigger_margin_pu=0.02, release_margin_pu=0.01)


def test_rule_based_unknown_bus_lists_valid_ones():
    with pytest.raises(ControllerError, match="valid buses"):
        _rule(make_context(), buses=["999"])


# -- tap schedule ----------------------------------------------------------------------------


def _taps(entries) -> TapScheduleController:
    ctrl = TapScheduleController(TapScheduleController.Config(schedule=entries))
    ctrl.reset(make_context(), 0)
    return ctrl


def test_tap_schedule_fires_each_entry_once_at_its_time():
    ctrl = _taps(
        [{"t_s": 3300, "bank": "reg1", "taps": [10, 6, 10]}, {"t_s": 1500, "bank": "reg1", "taps": [16, 6, 15]}]
    )
    ctx = ctrl.context
    fired = {}
    for t in range(3601):
        for c in ctrl.step(make_observation(ctx, 1.0, t_s=float(t))):
            assert isinstance(c, SetTaps)
            fired[t] = c.taps
    assert fired == {1500: (16, 6, 15), 3300: (10, 6, 10)}


def test_tap_schedule_catches_up_after_a_coarse_step_and_resets():
    ctrl = _taps([{"t_s": 1.5, "bank": "reg1", "taps": [1, 1, 1]}, {"t_s": 2.5, "bank": "reg1", "taps": [2, 2, 2]}])
    ctx = ctrl.context
    assert ctrl.step(make_observation(ctx, 1.0, t_s=1.0)) == []
    assert [c.taps for c in ctrl.step(make_observation(ctx, 1.0, t_s=3.0))] == [(1, 1, 1), (2, 2, 2)]
    ctrl.reset(ctx, 0)
    assert len(ctrl.step(make_observation(ctx, 1.0, t_s=3.0))) == 2


def test_tap_schedule_rejects_unknown_bank_and_out_of_range_taps():
    with pytest.raises(ControllerError, match="valid banks"):
        _taps([{"t_s": 1, "bank": "reg9", "taps": [1, 1, 1]}])
    with pytest.raises(ControllerError, match=r"outside \[-16, 16\]"):
        _taps([{"t_s": 1, "bank": "reg1", "taps": [17, 1, 1]}])
    with pytest.raises(ControllerError, match="3 phases"):
        _taps([{"t_s": 1, "bank": "reg1", "taps": [1, 1]}])
    with pytest.raises(ValidationError, match="t_s"):
        TapScheduleController.Config(schedule=[{"t_s": -1, "bank": "reg1", "taps": [1, 1, 1]}])
    with pytest.raises(ValidationError, match="taps"):
        TapScheduleController.Config(schedule=[{"t_s": 1, "bank": "reg1", "taps": ["up"]}])


# -- storage droop ---------------------------------------------------------------------------


def test_droop_curve_points():
    # deadband [0.99, 1.01], 10,000 kW/pu, limit 200 kW
    args = {"v_ref_pu": 1.0, "deadband_pu": 0.01, "gain_per_pu": 1e4, "limit": 200.0}
    assert droop_setpoint(1.0, **args) == 0.0
    assert droop_setpoint(0.995, **args) == 0.0
    assert droop_setpoint(0.98, **args) == pytest.approx(100.0)  # 0.01 below the band: discharge
    assert droop_setpoint(1.02, **args) == pytest.approx(-100.0)  # above: charge
    assert droop_setpoint(0.90, **args) == 200.0 and droop_setpoint(1.10, **args) == -200.0


def test_storage_droop_controller_sends_on_change_only():
    ctx = make_context(storages=("bat1",))
    cfg = StorageDroopController.Config(
        storage="bat1", buses=["671"], droop_kw_per_pu=1e4, droop_kvar_per_pu=5e3, p_max_kw=200, q_max_kvar=100
    )
    ctrl = StorageDroopController(cfg)
    ctrl.reset(ctx, 0)
    v = [0.98, 0.98, 0.98, 1.0, 1.0, 1.0]
    half = [battery(soc=0.5)]  # far from its limits
    (cmd,) = ctrl.step(make_observation(ctx, v, storage=half))
    assert isinstance(cmd, SetStoragePower) and cmd.name == "bat1"
    assert (cmd.p_w, cmd.q_var) == (pytest.approx(100e3), pytest.approx(50e3))
    assert ctrl.step(make_observation(ctx, [0.98005] * 3 + [1.0] * 3, storage=half)) == []  # below resolution
    (cmd,) = ctrl.step(make_observation(ctx, 1.0, storage=half))
    assert (cmd.p_w, cmd.q_var) == (0.0, 0.0)


def _droop(dt_s: float, **params) -> StorageDroopController:
    """A P-only droop on bat1 at 671: deadband [0.99, 1.01], 10,000 kW/pu, at most 200 kW."""
    ctrl = StorageDroopController(
        StorageDroopController.Config(storage="bat1", buses=["671"], droop_kw_per_pu=1e4, p_max_kw=200, **params)
    )
    ctrl.reset(make_context(storages=("bat1",), dt_s=dt_s), 0)
    return ctrl


def test_storage_droop_asks_no_more_than_the_state_of_charge_sustains_until_the_next_step():
    """A 10 kWh battery, efficiency 0.9, limits 0.1-0.9, every 60 s. At 0.98 pu the curve asks
    100 kW; at soc 0.2 the cells hold 1 kWh above the floor, 0.9 kWh delivered: 54 kW for 60 s.
    At 1.02 pu it asks -100 kW: 0.7 x 10 / 0.9 = 7.78 kWh of room, 466.7 kW for 60 s, so the
    curve stands; near the ceiling (soc 0.89: 0.1111 kWh of room) it is 6.67 kW."""
    ctrl = _droop(60.0)
    low = [0.98] * 3 + [1.0] * 3
    ctx = ctrl.context
    (cmd,) = ctrl.step(make_observation(ctx, low, storage=[battery(soc=0.2, capacity_kwh=10.0)]))
    assert cmd.p_w == pytest.approx(54e3, rel=1e-12)
    high = [1.02] * 3 + [1.0] * 3
    (cmd,) = ctrl.step(make_observation(ctx, high, storage=[battery(soc=0.2, capacity_kwh=10.0)]))
    assert cmd.p_w == pytest.approx(-100e3, rel=1e-12)
    (cmd,) = ctrl.step(make_observation(ctx, high, storage=[battery(soc=0.89, capacity_kwh=10.0)]))
    assert cmd.p_w == pytest.approx(-0.01 * 10.0 / 0.9 * 60.0 * 1e3, rel=1e-9)
    # at the floor: 0 once, then nothing while it stays there
    (cmd,) = ctrl.step(make_observation(ctx, low, storage=[battery(soc=0.1, capacity_kwh=10.0)]))
    assert cmd.p_w == 0.0
    assert ctrl.step(make_observation(ctx, low, storage=[battery(soc=0.1, capacity_kwh=10.0)])) == []
    # without soc_limits the curve is sent as it is
    (cmd,) = _droop(60.0, soc_limits=False).step(make_observation(ctx, low, storage=[battery(soc=0.1)]))
    assert cmd.p_w == pytest.approx(100e3)


def test_storage_droop_resends_when_the_setpoint_in_force_outlasts_the_charge():
    """100 kW sent at soc 0.5 of 10 kWh every 60 s. At soc 0.1 + 98 / 60 / 9 the cells deliver
    98/60 kWh above the floor, 98 kW for 60 s: 2 kW less than in force, below the 5 kW
    resolution, yet resent, since 100 kW would reach the floor before the next step."""
    ctrl = _droop(60.0, resolution_kw=5.0)
    low = [0.98] * 3 + [1.0] * 3
    (cmd,) = ctrl.step(make_observation(ctrl.context, low, storage=[battery(soc=0.5, capacity_kwh=10.0)]))
    assert cmd.p_w == pytest.approx(100e3)
    soc = 0.1 + 98.0 / 60.0 / 9.0
    (cmd,) = ctrl.step(make_observation(ctrl.context, low, storage=[battery(soc=soc, capacity_kwh=10.0)]))
    assert cmd.p_w == pytest.approx(98e3, rel=1e-9)


def test_storage_droop_without_a_reported_state_of_charge_names_the_way_out():
    ctrl = _droop(1.0)
    with pytest.raises(ControllerError, match=r"no state of charge for battery 'bat1' \(set soc_limits: false"):
        ctrl.step(make_observation(ctrl.context, 0.98))


def test_storage_droop_unknown_storage():
    ctrl = StorageDroopController(StorageDroopController.Config(storage="nope", buses=["671"]))
    with pytest.raises(ControllerError, match="unknown storage"):
        ctrl.reset(make_context(storages=("bat1",)), 0)


# -- load shift ------------------------------------------------------------------------------


def test_load_shift_moves_replicas_from_stressed_site_with_cooldown():
    ctx = make_context(sites={"dc1": [toy_model("m1")], "dc2": [toy_model("m1")]})
    ctrl = LoadShiftController(LoadShiftController.Config(replicas_per_shift=20, cooldown_s=60, ramp_s=10))
    ctrl.reset(ctx, 0)
    v = [0.949] * 3 + [1.0] * 3  # 671 (dc1) stressed, 680 (dc2) healthy
    (cmd,) = ctrl.step(make_observation(ctx, v, t_s=0))
    assert cmd == ShiftReplicas(site="dc1", model="m1", replicas=20, to_site="dc2", ramp_s=10)
    assert ctrl.step(make_observation(ctx, v, t_s=30)) == []  # cooling down
    assert len(ctrl.step(make_observation(ctx, v, t_s=60))) == 1
    assert ctrl.step(make_observation(ctx, 1.0, t_s=200)) == []  # nobody stressed


def test_load_shift_respects_max_moved_and_needs_two_sites():
    ctx = make_context(sites={"dc1": [toy_model("m1")], "dc2": [toy_model("m1")]})
    cfg = LoadShiftController.Config(replicas_per_shift=20, cooldown_s=0, max_replicas_moved={"m1": 30})
    ctrl = LoadShiftController(cfg)
    ctrl.reset(ctx, 0)
    v = [0.94] * 3 + [1.0] * 3
    assert len(ctrl.step(make_observation(ctx, v, t_s=0))) == 1
    assert ctrl.step(make_observation(ctx, v, t_s=1)) == []  # 40 > 30
    with pytest.raises(ControllerError, match="at least two sites"):
        LoadShiftController().reset(make_context(), 0)


def test_noop_sends_nothing():
    ctx = make_context()
    ctrl = NoopController()
    ctrl.reset(ctx, 0)
    assert ctrl.step(make_observation(ctx, 0.5)) == []

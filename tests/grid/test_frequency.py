"""The aggregate frequency model (openg2g.grid.frequency) against closed forms: Anderson and
Mirheydar's step response, the steady state and the initial slope by hand, an inverse Laplace
transform by partial fractions for several governor groups; and its spec's refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.polynomial import polynomial as P
from pydantic import ValidationError

from openg2g.core.errors import SimulationError
from openg2g.grid.frequency import (
    GasTurbineGovernor,
    HydroGovernor,
    ReheatSteamGovernor,
    SystemFrequency,
    SystemFrequencySpec,
    reheat_step_response,
)

BASE_MW = 60_000.0
STEP_W = 1.5e9  # a datacenter cluster's worth, 2.5 % of the system


def _am_spec(**kw: float) -> SystemFrequencySpec:
    """Anderson and Mirheydar's typical reheat system (the spec's defaults) on a 60 GW base."""
    return SystemFrequencySpec(base_mw=BASE_MW, **kw)


def _run(spec: SystemFrequencySpec, steps: list[float], delta_p_w: float) -> tuple[np.ndarray, np.ndarray]:
    model = SystemFrequency(spec)
    t, f = [0.0], [spec.f0_hz]
    for dt in steps:
        f.append(model.step(dt, delta_p_w))
        t.append(model.t_s)
    return np.array(t), np.array(f)


def _mixed_steps(total_s: float) -> list[float]:
    # the engine's pattern: 0.1 s steps, one-cycle steps inside a disturbance window
    steps: list[float] = []
    while sum(steps) < total_s:
        steps += [1 / 60] * 12 if len(steps) % 3 == 0 else [0.1, 0.25]
    return steps


@pytest.mark.parametrize("dt", [1 / 60, 0.1, 0.5, 2.0, "mixed"])
def test_step_response_matches_anderson_mirheydar_closed_form(dt: float | str) -> None:
    spec = _am_spec()
    steps = _mixed_steps(60) if dt == "mixed" else [float(dt)] * math.ceil(60 / float(dt))
    t, f = _run(spec, steps, STEP_W)
    exact = reheat_step_response(spec, STEP_W)
    w_model = f / spec.f0_hz - 1
    w_exact = exact.deviation_pu(t)
    assert np.max(np.abs(w_model - w_exact)) <= 1e-9 * np.max(np.abs(w_exact))


def test_closed_form_nadir_is_where_the_slope_vanishes() -> None:
    exact = reheat_step_response(_am_spec(), STEP_W)
    # Anderson and Mirheydar's nadir formula and the response at its time are one number
    assert exact.deviation_pu(exact.nadir_t_s) == pytest.approx(exact.nadir_pu, rel=1e-13)
    h = 1e-4
    slope = (exact.deviation_pu(exact.nadir_t_s + h) - exact.deviation_pu(exact.nadir_t_s - h)) / (2 * h)
    assert abs(slope) < 1e-9 * abs(exact.nadir_pu)
    assert exact.deviation_pu(0.0) == pytest.approx(0.0, abs=1e-16)
    # the typical system by hand: D R + K_m = 1, wn^2 = 1 / (2 * 4 * 0.05 * 8) = 0.3125,
    # zeta = (0.4 + (0.05 + 0.95 * 0.3) * 8) / 2 * wn = 1.54 wn; a 2.5 % load gain settles at
    # -0.025 * 0.05 pu (59.925 Hz) after a nadir of 59.8375 Hz at 2.37 s
    assert exact.zeta == pytest.approx(1.54 * math.sqrt(0.3125), rel=1e-14)
    assert exact.nadir_hz == pytest.approx(59.83752, abs=1e-5)
    assert exact.nadir_t_s == pytest.approx(2.3688, abs=1e-4)
    assert exact.frequency_hz(1e4) == pytest.approx(60 - 60 * 0.025 * 0.05 / (0.05 + 0.95), rel=1e-12)


@pytest.mark.parametrize("dt", [1 / 60, 0.1, 1.0, 3.0])
def test_nadir_metric_is_exact_whatever_the_steps(dt: float) -> None:
    # the turning point inside a step is located on the exact solution, so the nadir and its time
    # do not depend on where the steps end
    spec = _am_spec()
    model = SystemFrequency(spec)
    for _ in range(math.ceil(30 / dt)):
        model.step(dt, STEP_W)
    exact = reheat_step_response(spec, STEP_W)
    got = model.metrics()
    assert got.nadir_hz - 60 == pytest.approx(exact.nadir_hz - 60, rel=1e-9)
    assert got.nadir_t_s == pytest.approx(exact.nadir_t_s, abs=1e-6)
    assert got.zenith_hz == 60.0 and got.zenith_t_s == 0.0


def test_steady_state_and_initial_rocof_by_hand() -> None:
    # K_m = 1, H 4 s, D 1, R 0.05, a 1 % load gain: -0.01 / (1 + 20) pu settles; -0.01 / 8 pu/s at first
    spec = SystemFrequencySpec(base_mw=BASE_MW, governors=[ReheatSteamGovernor(share=1.0)])
    step = 0.01 * BASE_MW * 1e6
    model = SystemFrequency(spec)
    assert model.steady_state_hz(step) == pytest.approx(60 * (1 - 0.01 / 21), rel=1e-15)
    assert model.initial_rocof_hz_s(step) == pytest.approx(-60 * 0.01 / 8, rel=1e-15)
    dt = 1e-6
    f1 = model.step(dt, step)
    assert (f1 - 60) / dt == pytest.approx(-0.075, rel=1e-5)
    model.step(600.0, step)
    assert model.frequency_hz == pytest.approx(60 - 0.6 / 21, abs=1e-12)


def test_windowed_rocof_approaches_the_initial_slope() -> None:
    spec = SystemFrequencySpec(base_mw=BASE_MW, rocof_window_s=0.001)
    model = SystemFrequency(spec)
    for _ in range(100):
        model.step(1e-4, STEP_W)
    got = model.metrics()
    assert got.rocof_hz_s == pytest.approx(model.initial_rocof_hz_s(STEP_W), rel=1e-3)
    assert got.rocof_t_s == pytest.approx(0.001, abs=1e-9)


def _partial_fraction_response(spec: SystemFrequencySpec, dp_pu: float, t: np.ndarray) -> np.ndarray:
    """w(t) for a step dP from rest by the inverse Laplace transform of
    W(s) = -dP / s / (2 H s + D + sum k_i / R_i G_i(s)), written out from the spec's fields (not
    the model's blocks) and expanded in partial fractions over its simple poles."""
    nums, dens = [], []
    for g in spec.governors:
        if isinstance(g, ReheatSteamGovernor):
            num, den = [1.0, g.f_hp * g.t_reheat_s], P.polymul([1.0, g.t_gov_s], [1.0, g.t_reheat_s])
        elif isinstance(g, GasTurbineGovernor):
            num, den = [1.0], P.polymul([1.0, g.t_valve_s], [1.0, g.t_fuel_s])
        else:
            assert isinstance(g, HydroGovernor)
            num = P.polymul([1.0, g.t_reset_s], [1.0, -g.t_water_s])
            den = P.polymul(
                P.polymul([1.0, g.t_gate_s], [1.0, g.temporary_droop_pu / g.droop_pu * g.t_reset_s]),
                [1.0, g.t_water_s / 2],
            )
        nums.append(P.polymul([g.share / g.droop_pu], num))
        dens.append(den)
    den_all = np.array([1.0])
    for d in dens:
        den_all = P.polymul(den_all, d)
    char = P.polymul([spec.d_pu, 2 * spec.h_s], den_all)
    for i, n in enumerate(nums):
        others = np.array([1.0])
        for j, d in enumerate(dens):
            if j != i:
                others = P.polymul(others, d)
        char = P.polyadd(char, P.polymul(n, others))
    numer = P.polymul([-dp_pu], den_all)
    poles = P.polyroots(char)
    dchar = P.polyder(char)
    w = np.full(t.shape, P.polyval(0.0, numer) / P.polyval(0.0, char), dtype=complex)
    for p in poles:
        w += P.polyval(p, numer) / (p * P.polyval(p, dchar)) * np.exp(p * t)
    return w.real


MIXED = [
    ReheatSteamGovernor(share=0.4, droop_pu=0.05, t_gov_s=0.3, f_hp=0.3, t_reheat_s=7.0),
    GasTurbineGovernor(share=0.3, droop_pu=0.04),
    HydroGovernor(share=0.1, droop_pu=0.05, temporary_droop_pu=0.4, t_reset_s=5.0, t_gate_s=0.2, t_water_s=1.2),
]


@pytest.mark.parametrize("dt", [1 / 60, 0.1, 0.7])
def test_several_governor_groups_match_partial_fractions(dt: float) -> None:
    spec = SystemFrequencySpec(base_mw=BASE_MW, h_s=3.5, d_pu=1.5, governors=MIXED)
    t, f = _run(spec, [dt] * math.ceil(40 / dt), STEP_W)
    w_exact = _partial_fraction_response(spec, STEP_W / (BASE_MW * 1e6), t)
    w_model = f / 60 - 1
    assert np.max(np.abs(w_model - w_exact)) <= 1e-9 * np.max(np.abs(w_exact))
    # and the steady state is the droops' and damping's: -dP / (D + sum k / R)
    restoring = 1.5 + 0.4 / 0.05 + 0.3 / 0.04 + 0.1 / 0.05
    assert SystemFrequency(spec).steady_state_hz(STEP_W) == pytest.approx(60 * (1 - 0.025 / restoring), rel=1e-14)


def test_a_held_load_that_steps_back_is_the_difference_of_two_steps() -> None:
    # the load is held over each step: on for 5 s, then back to the start
    spec = _am_spec()
    model = SystemFrequency(spec)
    t, f = [], []
    for k in range(200):
        f.append(model.step(0.1, STEP_W if k < 50 else 0.0))
        t.append(model.t_s)
    ta = np.array(t)
    exact = reheat_step_response(spec, STEP_W)
    w = exact.deviation_pu(ta) - np.where(ta > 5 + 1e-9, exact.deviation_pu(np.maximum(ta - 5, 0)), 0.0)
    assert np.max(np.abs(np.array(f) / 60 - 1 - w)) <= 1e-9 * np.max(np.abs(w))
    got = model.metrics()
    assert got.event_t_s == 0.0
    assert got.zenith_hz > 60  # the load leaving swings the frequency above nominal


def test_turning_points_inside_long_steps_are_found() -> None:
    # a lightly damped system (a swing of 1.5 s, decaying by e in 3 s): several inside each 8 s step
    spec = SystemFrequencySpec(
        base_mw=BASE_MW, h_s=2.0, d_pu=0.0, governors=[GasTurbineGovernor(share=1.0, droop_pu=0.03)]
    )
    coarse, fine = SystemFrequency(spec), SystemFrequency(spec)
    for _ in range(5):
        coarse.step(8.0, STEP_W)
    for _ in range(4000):
        fine.step(0.01, STEP_W)
    a, b = coarse.metrics(), fine.metrics()
    assert a.nadir_hz - 60 == pytest.approx(b.nadir_hz - 60, rel=1e-9)
    assert a.nadir_t_s == pytest.approx(b.nadir_t_s, abs=1e-6)
    assert a.zenith_hz - 60 == pytest.approx(b.zenith_hz - 60, rel=1e-9)


def test_same_inputs_same_bits_and_reset_starts_over() -> None:
    spec = SystemFrequencySpec(base_mw=BASE_MW, governors=MIXED)
    steps = _mixed_steps(20)
    loads = [STEP_W * ((k % 7) - 3) / 3 for k in range(len(steps))]
    one, two = SystemFrequency(spec), SystemFrequency(spec)
    first = [one.step(dt, p) for dt, p in zip(steps, loads, strict=True)]
    second = [two.step(dt, p) for dt, p in zip(steps, loads, strict=True)]
    one.reset()
    again = [one.step(dt, p) for dt, p in zip(steps, loads, strict=True)]
    assert first == second == again
    assert one.metrics() == two.metrics()


def test_the_event_is_the_first_load_change() -> None:
    model = SystemFrequency(_am_spec())
    for k in range(700):
        model.step(0.1, 0.0 if k < 10 else -STEP_W)
    got = model.metrics()
    assert got.event_t_s == pytest.approx(1.0, abs=1e-12)
    assert got.nadir_hz == 60.0
    # the load loss: the mirror of the gain's response, a zenith and a settling above 60 Hz
    exact = reheat_step_response(_am_spec(), -STEP_W)
    assert got.zenith_hz - 60 == pytest.approx(exact.nadir_hz - 60, rel=1e-9)
    assert got.zenith_t_s == pytest.approx(1.0 + exact.nadir_t_s, abs=1e-6)
    assert got.settling_hz is not None and got.settling_hz == pytest.approx(60.075, abs=1e-4)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"base_mw": 0}, "base_mw"),
        ({"base_mw": -5}, "base_mw"),
        ({"base_mw": float("nan")}, "base_mw"),
        ({"base_mw": 1000, "h_s": float("inf")}, "h_s"),
        ({"base_mw": 1000, "h_s": 0}, "h_s"),
        ({"base_mw": 1000, "d_pu": -1}, "d_pu"),
        ({"base_mw": 1000, "f0_hz": 0}, "f0_hz"),
        ({"base_mw": 1000, "h_s": True}, "h_s"),
        ({"base_mw": 1000, "governors": [{"kind": "reheat_steam", "droop_pu": 0}]}, "droop_pu"),
        ({"base_mw": 1000, "governors": [{"kind": "reheat_steam", "t_reheat_s": 0}]}, "t_reheat_s"),
        ({"base_mw": 1000, "governors": [{"kind": "reheat_steam", "t_gov_s": -0.1}]}, "t_gov_s"),
        ({"base_mw": 1000, "governors": [{"kind": "reheat_steam", "f_hp": 1.5}]}, "f_hp"),
        ({"base_mw": 1000, "governors": [{"kind": "steam", "share": 0.5}]}, "governors"),
        ({"base_mw": 1000, "governors": [{"kind": "gas_turbine", "share": 0.6}] * 2}, "add up to 1.2"),
        ({"base_mw": 1000, "d_pu": 0, "governors": []}, "nothing restores"),
        ({"base_mw": 1000, "rocof_window_s": 0}, "rocof_window_s"),
        (
            {
                "base_mw": 1000,
                "governors": [
                    {"kind": "hydro", "share": 0.5, "temporary_droop_pu": 0.04, "t_reset_s": 5, "t_water_s": 2}
                ],
            },
            "temporary_droop_pu",
        ),
        (
            # transient droop too small for the penstock: the governor loop is unstable
            {
                "base_mw": 1000,
                "d_pu": 0,
                "governors": [
                    {
                        "kind": "hydro",
                        "share": 1.0,
                        "temporary_droop_pu": 0.06,
                        "t_reset_s": 0.5,
                        "t_gate_s": 0.5,
                        "t_water_s": 4,
                    }
                ],
            },
            "unstable",
        ),
    ],
)
def test_spec_refuses_bad_values_naming_them(data: dict, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        SystemFrequencySpec.model_validate(data)


def test_spec_reads_governor_groups_by_kind() -> None:
    spec = SystemFrequencySpec.model_validate(
        {
            "base_mw": 80_000,
            "h_s": 3.2,
            "governors": [
                {"kind": "reheat_steam", "share": 0.3},
                {"kind": "gas_turbine", "share": 0.4},
                {"kind": "hydro", "share": 0.05, "temporary_droop_pu": 0.38, "t_reset_s": 5, "t_water_s": 1},
            ],
        }
    )
    assert [type(g) for g in spec.governors] == [ReheatSteamGovernor, GasTurbineGovernor, HydroGovernor]
    assert spec.restoring_pu == pytest.approx(1 + 0.3 / 0.05 + 0.4 / 0.05 + 0.05 / 0.05)
    assert SystemFrequencySpec.model_validate(spec.model_dump()) == spec
    with pytest.raises(ValidationError, match="governors.0"):
        SystemFrequencySpec.model_validate({"base_mw": 1000, "governors": [{"share": 0.5}]})


@pytest.mark.parametrize(
    ("dt", "p", "words"),
    [
        (0.0, 0.0, "finite time > 0"),
        (-0.1, 0.0, "finite time > 0"),
        (float("nan"), 0.0, "finite time > 0"),
        (0.1, float("inf"), "must be finite W"),
        (0.1, 2 * BASE_MW * 1e6, "exceeds the 60000 MW"),
    ],
)
def test_step_refuses_bad_arguments_with_the_time(dt: float, p: float, words: str) -> None:
    model = SystemFrequency(_am_spec())
    model.step(0.5, 0.0)
    with pytest.raises(SimulationError, match=rf"t=0.5 s, system frequency: .*{words}"):
        model.step(dt, p)


def test_closed_form_refuses_what_it_does_not_cover() -> None:
    with pytest.raises(ValueError, match="governor lag"):
        reheat_step_response(SystemFrequencySpec(base_mw=1000, governors=[ReheatSteamGovernor(t_gov_s=0.2)]), 1e6)
    with pytest.raises(ValueError, match="one reheat steam group"):
        reheat_step_response(SystemFrequencySpec(base_mw=1000, governors=MIXED), 1e6)
    with pytest.raises(ValueError, match="underdamped"):
        reheat_step_response(SystemFrequencySpec(base_mw=1000, d_pu=40), 1e6)

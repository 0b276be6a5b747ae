"""The aggregate frequency model (openg2g.grid.frequency) beside its closed form and ANDES: the table
of ``docs/disturbances.md`` ("Bulk system frequency"), and the cost of a step.

Rows, each a load step from rest:

1. **closed form**: Anderson and Mirheydar's typical reheat system (the spec's defaults) on a
   60 GW base losing 1.5 GW, and the model stepped at 0.1 s and at the engine's mix of 0.1 s and
   one-cycle steps;
2. **ANDES, one machine**: a GENCLS machine with TGOV1 over a lossless line, where the aggregate
   model is exact (``tests/grid/andes_sfr.py``);
3. **ANDES, Kundur's two-area system**: 50 MW lost and gained at bus 7 and bus 9, 200 MW lost at
   bus 7, with constant-power loads; and once with ANDES's default constant-impedance loads, which
   the aggregate model (no voltage) cannot follow.

Columns: the extreme (nadir for a load gain, zenith for a loss) and its time after the step, the
largest RoCoF over 0.5 s, NERC's Value B settling frequency (20 s to 52 s after the step) and the
settling time (within 0.01 Hz of it). ANDES rows need the ``dynamics`` extra; without it they are
left out, saying so::

    pip install -e ".[dynamics]"
    python bench/frequency_validation.py            # the table (about a minute)
    python bench/frequency_validation.py --no-andes # the closed-form rows and the step cost only

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

from openg2g.grid.frequency import (
    GasTurbineGovernor,
    HydroGovernor,
    ReheatSteamGovernor,
    SystemFrequency,
    SystemFrequencySpec,
    reheat_step_response,
)
from openg2g.grid.frequency_metrics import FrequencyMetrics

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the ANDES cases live with the tests

BASE_MW = 60_000.0
LOSS_W = -1.5e9


def _row(name: str, m: FrequencyMetrics, gain: bool, event_t_s: float = 0.0) -> str:
    peak, t_peak = (m.nadir_hz, m.nadir_t_s) if gain else (m.zenith_hz, m.zenith_t_s)
    rocof = "-" if m.rocof_hz_s is None else f"{m.rocof_hz_s:+.4f}"
    settle = "-" if m.settling_hz is None else f"{m.settling_hz:.5f}"
    t_settle = "-" if m.settling_t_s is None else f"{m.settling_t_s - event_t_s:.2f}"
    return f"| {name} | {peak:.5f} | {t_peak - event_t_s:.3f} | {rocof} | {settle} | {t_settle} |"


def _closed_form_rows() -> list[str]:
    spec = SystemFrequencySpec(base_mw=BASE_MW)
    exact = reheat_step_response(spec, LOSS_W)
    rows = [
        (
            f"| closed form (A&M typical, 60 GW, -1.5 GW) | {exact.nadir_hz:.5f} | {exact.nadir_t_s:.3f} | "
            f"{SystemFrequency(spec).initial_rocof_hz_s(LOSS_W):+.4f} (initial) | "
            f"{exact.frequency_hz(1e4):.5f} (steady) | - |"
        )
    ]
    for label, steps in (("0.1 s", [0.1] * 600), ("0.1 s and one-cycle", _mixed(60.0))):
        model = SystemFrequency(spec)
        for dt in steps:
            model.step(dt, LOSS_W)
        rows.append(_row(f"aggregate model, steps of {label}", model.metrics(), gain=False))
    return rows


def _mixed(total_s: float) -> list[float]:
    steps: list[float] = []
    while sum(steps) < total_s:
        steps += [1 / 60] * 12 if len(steps) % 3 == 0 else [0.1, 0.25]
    return steps


def _andes_rows() -> list[str]:
    from tests.grid.andes_sfr import kundur_step, single_machine_step

    rows = []
    cases = [
        (single_machine_step, {}),
        (kundur_step, {"step_mw": -50.0, "load": "PQ_0"}),
        (kundur_step, {"step_mw": 50.0, "load": "PQ_0"}),
        (kundur_step, {"step_mw": -50.0, "load": "PQ_1"}),
        (kundur_step, {"step_mw": 50.0, "load": "PQ_1"}),
        (kundur_step, {"step_mw": -200.0, "load": "PQ_0"}),
        (kundur_step, {"step_mw": -50.0, "load": "PQ_0", "loads": "constant_impedance"}),
    ]
    for fn, kw in cases:
        start = time.perf_counter()
        run = fn(**kw)  # type: ignore[operator]
        took = time.perf_counter() - start
        andes, model = run.metrics()
        gain = run.load_step_w > 0
        pa = (andes.nadir_hz if gain else andes.zenith_hz) - 60
        pm = (model.nadir_hz if gain else model.zenith_hz) - 60
        settle = (model.settling_hz or 0.0) - (andes.settling_hz or 0.0)
        rows.append(_row(f"{run.case} ({took:.0f} s)", andes, gain))
        rows.append(
            _row(f"aggregate, dP {run.delta_p_w / 1e6:+.3f} MW (load {run.load_step_w / 1e6:+g})", model, gain)
            + f" peak {100 * (pm - pa) / pa:+.2f} %, settling {settle:+.5f} Hz"
        )
    return rows


def _step_cost() -> list[str]:
    lines = []
    mixed = [
        ReheatSteamGovernor(share=0.4, t_gov_s=0.3, t_reheat_s=7.0),
        GasTurbineGovernor(share=0.3),
        HydroGovernor(share=0.1, temporary_droop_pu=0.4, t_reset_s=5.0, t_water_s=1.2),
    ]
    for label, spec in (
        ("A&M (2 states)", SystemFrequencySpec(base_mw=BASE_MW)),
        ("reheat + gas + hydro (9 states)", SystemFrequencySpec(base_mw=BASE_MW, governors=mixed)),
    ):
        model = SystemFrequency(spec)
        model.step(0.1, LOSS_W)
        for _ in range(2000):  # past the turning points, which cost a root search each
            model.step(0.1, LOSS_W)
        n = 20_000
        start = time.perf_counter()
        for _ in range(n):
            model.step(0.1, LOSS_W)
        per = (time.perf_counter() - start) / n
        model.reset()
        start = time.perf_counter()
        for _ in range(100):
            model.step(0.1, LOSS_W)
        first = time.perf_counter() - start
        lines.append(f"{label}: {per * 1e6:.1f} us per 0.1 s step; the first 10 s (nadir search) {first * 1e3:.1f} ms")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-andes", action="store_true", help="leave out the ANDES rows")
    args = parser.parse_args()
    print("| case | nadir or zenith (Hz) | at (s) | RoCoF 0.5 s (Hz/s) | settling, Value B (Hz) | settled at (s) |")
    print("|---|---|---|---|---|---|")
    for row in _closed_form_rows():
        print(row)
    if args.no_andes:
        pass
    elif importlib.util.find_spec("andes") is None:
        print('(ANDES rows left out: ANDES is not installed; pip install -e ".[dynamics]")')
    else:
        for row in _andes_rows():
            print(row)
    print()
    for line in _step_cost():
        print(line)


if __name__ == "__main__":
    main()

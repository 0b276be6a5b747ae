"""OpenDSS's own snapshot solve timed back to back with openg2g's on the same feeder and loads.

The feeder is an OpenDSS master file (default: the IEEE 8500-node test feeder in
``../shared/data/opendss-test-cases``). A balanced datacenter of ``--mw`` MW at pf 0.95 sits at
``--bus`` (three-phase), its power moving step to step by 10% (standard deviation, seeded);
OpenDSS holds its controls (``controlmode=off``) and the datacenter is a wye load of model 1 kept
at constant power (``vminpu=0.6``), as openg2g draws a site. OpenDSS solves each step at its
default tolerance (1e-4) and at 1e-8 (``DSS-Python``, the DSS-Extensions engine); openg2g reads the
same file (``load_feeder``) and solves the same steps at its tolerance (1e-8), one ``solve`` per
step and in ``solve_batch`` windows of 10 and 100 steps (its power flow, branch currents and
states). The two solutions are compared at the last step (largest difference of a bus-phase
voltage, pu).

Usage: python bench/bench_opendss.py [--master PATH] [--bus NAME] [--mw 2] [--steps 200]
Times are CPU time of this process (time.process_time), BLAS held to one thread. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import math
import time
from pathlib import Path

import numpy as np

from openg2g.core.state import DatacenterState
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.library import load_feeder
from openg2g.scenario.schema import GridSpec, ModelSpec, SiteSpec

MASTER = Path(__file__).resolve().parents[2] / "shared/data/opendss-test-cases/IEEETestCases/8500-Node/Master.dss"
PF = 0.95


def powers_kw(steps: int, mw: float) -> np.ndarray:
    """Datacenter power per step (kW): ``mw`` MW moving by 10% (standard deviation), seeded."""
    return mw * 1000.0 * (1.0 + 0.1 * np.random.default_rng(0).standard_normal(steps))


def opendss_ms(master: Path, bus: str, p_kw: np.ndarray, tolerance: float) -> tuple[float, float, dict[str, float]]:
    """ms per snapshot solve, mean iterations, and the last step's bus-phase voltages (pu)."""
    from dss import DSS  # DSS-Python: imported only here

    def command(text: str) -> None:
        DSS.Text.Command = text

    command("clear")
    command(f'compile "{master}"')
    circuit = DSS.ActiveCircuit
    circuit.SetActiveBus(bus)
    kv_ll = circuit.ActiveBus.kVBase * math.sqrt(3.0)
    kw0 = float(p_kw[0])
    command(
        f"new load.openg2g_dc bus1={bus}.1.2.3 phases=3 conn=wye model=1 kv={kv_ll!r} kw={kw0!r} "
        f"kvar={kw0 * math.tan(math.acos(PF))!r} vminpu=0.6 vmaxpu=1.5"
    )
    command("set controlmode=off")
    command(f"set tolerance={tolerance!r}")
    command("set maxiterations=1000")
    circuit.Solution.Solve()
    iterations = 0
    t0 = time.process_time()
    for kw in p_kw:
        circuit.Loads.Name = "openg2g_dc"
        circuit.Loads.kW = float(kw)
        circuit.Loads.kvar = float(kw) * math.tan(math.acos(PF))
        circuit.Solution.Solve()
        iterations += circuit.Solution.Iterations
    ms = (time.process_time() - t0) / len(p_kw) * 1e3
    names, pu = circuit.AllNodeNames, circuit.AllBusVmagPu
    phases = {"1": "a", "2": "b", "3": "c"}
    last = {f"{n.rsplit('.', 1)[0]}.{phases[n.rsplit('.', 1)[1]]}": v for n, v in zip(names, pu) if n[-1] in phases}
    return ms, iterations / len(p_kw), last


def openg2g_ms(master: Path, bus: str, p_kw: np.ndarray) -> tuple[float, dict[str, float], dict[int, float]]:
    """Build time (s), ms per step in windows of 1, 10 and 100 steps, and the last step's
    bus-phase voltages (pu)."""
    loads = []
    for i, kw in enumerate(p_kw):
        p = np.full(3, kw * 1000.0 / 3.0)
        loads.append({"dc": DatacenterState("dc", 0.1 * i, p, p * math.tan(math.acos(PF)), {})})
    t0 = time.process_time()
    site = SiteSpec(
        name="dc", bus=bus, power_factor=PF, models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)]
    )
    grid = FeederGrid(load_feeder(str(master)), GridSpec(feeder=str(master)), [site], Path("."))
    state = grid.solve(0.0, loads[0], 0.1)
    build_s = time.process_time() - t0
    t_s = [0.1 * i for i in range(len(loads))]
    per_step = {}
    for window in (1, 10, 100):
        t0 = time.process_time()
        for start in range(0, len(loads), window):
            states = grid.solve_batch(t_s[start : start + window], loads[start : start + window], 0.1)
        per_step[window] = (time.process_time() - t0) / len(loads) * 1e3
        state = states[-1]
    return build_s, dict(zip(state.bus_phases, state.v_pu)), per_step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--master", type=Path, default=MASTER, help="OpenDSS master file")
    ap.add_argument("--bus", default="m1069564", help="three-phase bus of the datacenter")
    ap.add_argument("--mw", type=float, default=2.0, help="datacenter power (MW)")
    ap.add_argument("--steps", type=int, default=200, help="steps solved by each")
    args = ap.parse_args()
    p_kw = powers_kw(args.steps, args.mw)
    print(f"{args.master.name}, {args.mw:g} MW at bus {args.bus}, {args.steps} steps")
    for tol in (1e-4, 1e-8):
        ms, its, ref = opendss_ms(args.master, args.bus, p_kw, tol)
        print(f"  OpenDSS snapshot, tolerance {tol:g}: {ms:.3f} ms/solve, {its:.1f} iterations")
    build_s, ours, per_step = openg2g_ms(args.master, args.bus, p_kw)
    print(f"  openg2g build (read the file, network, first solve): {build_s:.2f} s")
    for window, ms in per_step.items():
        print(f"  openg2g, tolerance 1e-8, windows of {window:3d} steps: {ms:.3f} ms/step")
    worst = max(abs(ours[bp] - ref[bp]) for bp in ours if bp in ref)
    print(f"  largest |V| difference at the last step (OpenDSS at 1e-8): {worst:.2e} pu")


if __name__ == "__main__":
    main()

"""openg2g through faults and source sags beside OpenDSS's own solution: the tables of
docs/disturbances.md ("Faults in the power flow").

For each bundled feeder with its OpenDSS source (IEEE 13, 123, 8500; ``../shared/data``, or
``$OPENG2G_SHARED_DATA``) and each case of ``tests/grid/fault_cases.py`` (SLG, LL, LLG and
three-phase faults, bolted and through 1 ohm, at three buses; the same at the bus of a datacenter
drawn as an OpenDSS model-1 load; three source sags, alone and with a bolted SLG fault mid-feeder),
the largest ``|V_openg2g - V_OpenDSS|`` over every node (pu of its bus base) and the node where it
is (:func:`openg2g.grid.feeder.crosscheck.crosscheck_disturbances`, the comparison the slow
``tests/grid/test_fault_validation.py`` asserts below 1e-6 pu). Then, per feeder, the seconds
openg2g takes to solve the first step through a fault (the network rebuilt with it) and the first
step of the feeder undisturbed (its network built likewise), medians over the bolted faults.
Asserts nothing::

    python bench/fault_validation.py
    python bench/fault_validation.py --only ieee13
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the cases live with the tests
SHARED = Path(os.environ.get("OPENG2G_SHARED_DATA") or ROOT.parent / "shared" / "data")

from openg2g.grid.config import GridSpec
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.build import SOURCES
from openg2g.grid.feeder.crosscheck import CrossCheck, crosscheck_disturbances
from openg2g.grid.feeder.library import load_feeder
from tests.grid.fault_cases import FAULT_BUSES, FAULT_KINDS, FAULT_R_OHM, SAGS, SITE, fault

_WHERE = ("near", "mid", "far")


def _cell(checks: list[CrossCheck]) -> str:
    """The cases' largest differences, bolted / 1 ohm, and the node of the larger."""
    worst = max(checks, key=lambda c: c.max_dv_pu)
    return " / ".join(f"{c.max_dv_pu:.1e}" for c in checks) + f" ({worst.worst})"


def fault_rows(feeder: str) -> list[str]:
    """One row per faulted bus: each kind's differences, bolted / 1 ohm."""
    path = SHARED / SOURCES[feeder]
    model = load_feeder(feeder)
    keys = [(bus, kind, r) for bus in FAULT_BUSES[feeder] for kind in FAULT_KINDS for r in FAULT_R_OHM]
    checks = dict(zip(keys, crosscheck_disturbances(path, [(fault(k, b, r),) for b, k, r in keys], feeder=model)))
    rows = []
    for where, bus in zip(_WHERE, FAULT_BUSES[feeder]):
        cells = [_cell([checks[(bus, kind, r)] for r in FAULT_R_OHM]) for kind in FAULT_KINDS]
        rows.append(f"| {feeder} | {bus} ({where}) | " + " | ".join(cells) + " |")
    return rows


def site_row(feeder: str) -> str:
    """The faults at the bus of a datacenter drawn as an OpenDSS model-1 load."""
    bus, mw = SITE[feeder]
    cases = [[(fault(kind, bus, r),) for r in FAULT_R_OHM] for kind in FAULT_KINDS]
    flat = crosscheck_disturbances(
        SHARED / SOURCES[feeder],
        [c for per_kind in cases for c in per_kind],
        bus,
        mw,
        feeder=load_feeder(feeder),
        dc_load_model="opendss",
    )
    n = len(FAULT_R_OHM)
    cells = [_cell(flat[i * n : (i + 1) * n]) for i in range(len(FAULT_KINDS))]
    return f"| {feeder} | {bus}, {mw:g} MW site | " + " | ".join(cells) + " |"


def sag_row(feeder: str) -> str:
    """Each sag alone / with a bolted SLG fault mid-feeder."""
    mid = FAULT_BUSES[feeder][1]
    cases = [c for sag in SAGS.values() for c in ((sag,), (sag, fault("SLG", mid, FAULT_R_OHM[0])))]
    checks = crosscheck_disturbances(SHARED / SOURCES[feeder], cases, feeder=load_feeder(feeder))
    cells = [_cell(checks[2 * i : 2 * i + 2]) for i in range(len(SAGS))]
    return f"| {feeder} | " + " | ".join(cells) + " |"


def timing_row(feeder: str) -> str:
    """Median seconds of the first solve through each bolted fault and of the first solve of the
    feeder undisturbed, each on a network built for it."""
    grid = FeederGrid.from_spec(GridSpec(feeder=feeder), [], Path("."))
    grid.solve(0.0, {}, 1.0)  # compiled kernels out of the way
    through, plain = [], []
    for bus in FAULT_BUSES[feeder]:
        for kind in FAULT_KINDS:
            grid.reset(0)
            start = time.perf_counter()
            before = grid.solve(0.0, {}, 1.0)
            plain.append(time.perf_counter() - start)
            grid.apply(fault(kind, bus, FAULT_R_OHM[0]), 0.0)
            start = time.perf_counter()
            after = grid.solve(0.0, {}, 1.0)
            through.append(time.perf_counter() - start)
            if not (before.converged and after.converged):
                raise RuntimeError(f"{feeder}: {kind} at {bus} did not solve")
    return f"| {feeder} | {statistics.median(through):.3f} | {statistics.median(plain):.3f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(FAULT_BUSES), help="feeders (default all)")
    args = parser.parse_args()
    feeders = args.only or list(FAULT_BUSES)
    if not SHARED.is_dir():
        sys.exit(f"source data not found at {SHARED} (set OPENG2G_SHARED_DATA)")
    r_text = " / ".join(f"{r:g}" for r in FAULT_R_OHM)
    print(f"Largest |V_openg2g - V_OpenDSS| (pu), fault through {r_text} ohm (node of the larger):\n")
    print("| feeder | faulted bus | " + " | ".join(FAULT_KINDS) + " |")
    print("|---|---|" + "---|" * len(FAULT_KINDS))
    for feeder in feeders:
        print("\n".join(fault_rows(feeder)), flush=True)
    print("\nThe same faults at the bus of a datacenter drawn as an OpenDSS model-1 load (load_model: opendss):\n")
    print("| feeder | faulted bus | " + " | ".join(FAULT_KINDS) + " |")
    print("|---|---|" + "---|" * len(FAULT_KINDS))
    for feeder in feeders:
        print(site_row(feeder), flush=True)
    print(
        f"\nSource sags, alone / with a bolted SLG fault mid-feeder ({', '.join(FAULT_BUSES[f][1] for f in feeders)}):\n"
    )
    print("| feeder | " + " | ".join(SAGS) + " |")
    print("|---|" + "---|" * len(SAGS))
    for feeder in feeders:
        print(sag_row(feeder), flush=True)
    print("\nSolve time, medians over the bolted faults:\n")
    print("| feeder | first step through a fault (s) | first step undisturbed (s) |")
    print("|---|---|---|")
    for feeder in feeders:
        print(timing_row(feeder), flush=True)


if __name__ == "__main__":
    main()

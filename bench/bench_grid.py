"""Grid solver speed per bundled feeder: one ``solve`` per step, and ``solve_batch`` per step.

Also: the engine's pattern (batches of ``--window`` steps, one per control step, each followed
by a voltage sensitivity at the datacenter bus), timed apart as batch time per step and time per
sensitivity; a regulator tap change (on top of the solve); and the factorization the solver
needs per operating point, done two ways: the dense LAPACK LU of the port Jacobian (``2 n_ports``
unknowns, what the solver does) and a sparse LU (SuperLU, minimum-degree ordering) of the same
linearization in node space (``2 n_nodes`` unknowns, ``Y + P^T D P``, which is as sparse as the
feeder), to show which one pays at each feeder's size.

Usage: python bench/bench_grid.py [--steps 2000] [--batch 1000] [--window 10] [--feeders ieee13 ieee123]
Times are CPU time of this process (time.process_time), so a busy machine does not inflate them.
Prints figures; asserts nothing. Targets: < 0.5 ms amortized per IEEE 13 step, < 2 ms per
IEEE 123 step. BLAS threads are pinned to 1 (small dense matrices: threads only add overhead).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from _grid_timing import site_loads, time_solves
from scipy.linalg.lapack import dgetrf
from scipy.sparse.linalg import splu

from openg2g.core.commands import SetTaps
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.library import list_feeders
from openg2g.grid.feeder.network import admittance
from openg2g.scenario.schema import GridSpec, ModelSpec, SiteSpec

DC_BUS = {"ieee13": "671", "ieee34": "806", "ieee123": "67"}


def _per_call_ms(f, repeat: int = 50) -> float:
    f()
    t0 = time.process_time()
    for _ in range(repeat):
        f()
    return (time.process_time() - t0) / repeat * 1e3


def factorizations(grid: FeederGrid) -> tuple[int, int, float, float]:
    """Ports, nodes, and ms per factorization at the last solved point: dense LU of the port
    Jacobian, sparse LU of the node-space matrix (its assembly not counted)."""
    net = grid._net
    scale, s_pq = grid._last
    ctx = net.kernel.prepare(scale * net.live_branch, 1)
    dx, dy = (d[:, 0] for d in net._i_comp_derivatives(net.u_last, ctx, np.conj(s_pq * net.live_pq)))
    jac = net._jacobian_of(dx, dy)
    y = sp.csc_matrix(admittance(grid._model, grid._nodes, grid._switching, grid._ports))
    inc = sp.csr_matrix(net.inc)
    port = sp.bmat([[sp.diags(dx.real), sp.diags(dy.real)], [sp.diags(dx.imag), sp.diags(dy.imag)]])
    inc2 = sp.block_diag([inc, inc])
    a = (sp.bmat([[y.real, -y.imag], [y.imag, y.real]]) + inc2.T @ port @ inc2).tocsc()
    dense = _per_call_ms(lambda: dgetrf(jac))
    sparse = _per_call_ms(lambda: splu(a, permc_spec="MMD_AT_PLUS_A"))
    return net.k.shape[0], len(grid._nodes), dense, sparse


def bench(feeder: str, steps: int, batch: int, window: int) -> dict[str, float]:
    bus = DC_BUS[feeder.removeprefix("openg2g-")]
    site = SiteSpec(name="dc", bus=bus, models=[ModelSpec(model="m", gpus_per_replica=1, replicas=1, batch_size=1)])
    t0 = time.process_time()
    grid = FeederGrid.from_spec(GridSpec(feeder=feeder), [site], Path("."))
    grid.solve(0.0, site_loads(1, 3.0)[0], 0.1)
    build_ms = (time.process_time() - t0) * 1e3
    timing = time_solves(grid, site_loads(steps, 3.0), site_loads(batch, 3.0, seed=1), window)
    loads = site_loads(batch, 3.0, seed=1)
    n_ports, n_nodes, dense_lu_ms, sparse_lu_ms = factorizations(grid)
    bank, info = next(iter(grid.regulators().items()))
    t0 = time.process_time()
    n_taps = 40
    for i in range(n_taps):
        grid.apply(SetTaps(bank, tuple([i % 5] * len(info.phases))), 0.1 * i)
        grid.solve(0.1 * i, loads[i], 0.1)
    tap_ms = (time.process_time() - t0) / n_taps * 1e3 - timing["solve_ms"]
    return {
        "build_ms": build_ms,
        **timing,
        "tap_change_ms": tap_ms,
        "ports": n_ports,
        "nodes": n_nodes,
        "dense_lu_ms": dense_lu_ms,
        "sparse_lu_ms": sparse_lu_ms,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000, help="step-by-step solves per feeder")
    ap.add_argument("--batch", type=int, default=1000, help="steps in one solve_batch call")
    ap.add_argument("--window", type=int, default=10, help="steps per batch in the engine's pattern")
    ap.add_argument("--feeders", nargs="*", default=list_feeders())
    args = ap.parse_args()
    print(
        f"{'feeder':18s} {'build ms':>9s} {'solve ms/step':>14s} {'batch ms/step':>14s}"
        f" {f'batch-{args.window} ms/step':>17s} {'sensitivity ms':>15s} {'tap change ms':>14s}"
        f" {'ports':>6s} {'nodes':>6s} {'dense LU ms':>12s} {'sparse LU ms':>13s}"
    )
    for feeder in args.feeders:
        r = bench(feeder, args.steps, args.batch, args.window)
        print(
            f"{feeder:18s} {r['build_ms']:9.1f} {r['solve_ms']:14.3f} {r['batch_step_ms']:14.4f} "
            f"{r['window_step_ms']:17.4f} {r['sensitivity_ms']:15.3f} {r['tap_change_ms']:14.3f}"
            f" {r['ports']:6d} {r['nodes']:6d} {r['dense_lu_ms']:12.3f} {r['sparse_lu_ms']:13.3f}"
        )


if __name__ == "__main__":
    main()

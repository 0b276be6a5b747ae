"""Timing pieces shared by the grid benchmarks (``bench_grid.py``, ``bench_pandapower.py``).

Times are CPU time of this process (``time.process_time``).
"""

from __future__ import annotations

import time

import numpy as np

from openg2g.core.interfaces import GridBackend
from openg2g.core.state import DatacenterState


def site_loads(n: int, mw: float, seed: int = 0) -> list[dict[str, DatacenterState]]:
    """``n`` steps of a balanced ``mw`` MW datacenter ``dc`` with +/-10% per-phase fluctuation, pf 0.95."""
    rng = np.random.default_rng(seed)
    p = mw * 1e6 / 3 * (1 + 0.1 * rng.standard_normal((n, 3)))
    q = p * np.tan(np.arccos(0.95))
    return [{"dc": DatacenterState("dc", 0.1 * i, p[i], q[i], {})} for i in range(n)]


def time_solves(
    grid: GridBackend, steps: list[dict[str, DatacenterState]], batch: list[dict[str, DatacenterState]], window: int
) -> dict[str, float]:
    """ms per step of one ``solve`` per step (over ``steps``), of one ``solve_batch`` of all of
    ``batch``, and of the engine's pattern over ``batch`` (windows of ``window`` steps, each
    followed by the site's voltage sensitivity), and ms per sensitivity."""
    t0 = time.process_time()
    for i, ld in enumerate(steps):
        grid.solve(0.1 * i, ld, 0.1)
    solve_ms = (time.process_time() - t0) / len(steps) * 1e3
    t_s = [0.1 * i for i in range(len(batch))]
    grid.solve_batch(t_s[:window], batch[:window], 0.1)
    t0 = time.process_time()
    grid.solve_batch(t_s, batch, 0.1)
    batch_ms = (time.process_time() - t0) / len(batch) * 1e3
    batch_s = sens_s = 0.0
    for start in range(0, len(batch), window):
        t0 = time.process_time()
        grid.solve_batch(t_s[start : start + window], batch[start : start + window], 0.1)
        t1 = time.process_time()
        grid.voltage_sensitivity("dc")
        batch_s += t1 - t0
        sens_s += time.process_time() - t1
    return {
        "solve_ms": solve_ms,
        "batch_step_ms": batch_ms,
        "window_step_ms": batch_s / len(batch) * 1e3,
        "sensitivity_ms": sens_s / -(-len(batch) // window) * 1e3,
    }

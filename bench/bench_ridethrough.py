"""Cost of a site's ride-through at 0.1 s steps, one solve per step (the engine's contract).

Prints CPU seconds of this process per simulated hour (steadier than wall time on a shared
machine) for the 4,800-GPU reference site (IEEE 13 bus 671, the replay backend) stepped one step
per call, bare and wrapped in a four-block ride-through
(:class:`openg2g.datacenter.ridethrough_site.RideThroughSite`) with ``observe_grid`` after every
step: in the steady state (nominal voltage throughout) and during an event that never ends (a
0.5 pu sag from the first step: two blocks on a UPS that does not run out, two tripped). Best of
``--repeats`` runs after a warm-up. Run: ``python bench/bench_ridethrough.py [--steps N]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_datacenter import DT_S, site

from openg2g.core.interfaces import DatacenterBackend
from openg2g.datacenter import ReplayDatacenter, TraceLibrary
from openg2g.datacenter.ridethrough import RideThroughSpec
from openg2g.datacenter.ridethrough_site import RideThroughSite

RIDE_THROUGH = RideThroughSpec.model_validate(
    {
        "blocks": [{"name": f"ups{i}", "fraction": 0.3, "action": "ups", "ups": {"energy_kwh": 1e6}} for i in range(2)]
        + [{"name": f"hall{i}", "fraction": 0.2, "action": "trip", "residual_fraction": 0.05} for i in range(2)],
    }
)


def run(dc: DatacenterBackend, steps: int, v_pu: float) -> float:
    """CPU seconds of ``steps`` steps of 0.1 s from a reset, each followed by a solve at ``v_pu``
    on every phase."""
    dc.reset(0)
    observe = dc.observe_grid if isinstance(dc, RideThroughSite) else None
    v = np.full(3, v_pu)
    start = time.process_time()
    for k in range(1, steps + 1):
        t = k / 10
        dc.step_block(np.array([t]), DT_S)
        if observe is not None:
            observe(t, DT_S, v, 60.0)
    return time.process_time() - start


def bench(label: str, dc: DatacenterBackend, steps: int, v_pu: float, repeats: int) -> None:
    """Print the best of ``repeats`` runs (after one short warm-up run)."""
    run(dc, min(steps, 300), v_pu)
    wall_s = min(run(dc, steps, v_pu) for _ in range(repeats))
    print(
        f"{label:>28}: {steps / wall_s:>8,.0f} steps/s | {wall_s / steps * 3600 / DT_S:6.2f} CPU s per simulated hour"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=3000, help="steps to time per case (default 3000 = 5 min)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case, the best printed (default 3)")
    args = parser.parse_args()
    library = TraceLibrary.load()
    spec = site(1.0, "reference")
    for label, wrapped, v_pu in (
        ("replay, bare", False, 1.0),
        ("ride-through, steady", True, 1.0),
        ("ride-through, in an event", True, 0.5),
    ):
        replay = ReplayDatacenter.from_spec(spec, library)
        dc = RideThroughSite(replay, RIDE_THROUGH) if wrapped else replay
        bench(label, dc, args.steps, v_pu, args.repeats)


if __name__ == "__main__":
    main()

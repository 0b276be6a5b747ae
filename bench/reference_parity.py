"""Our grid and datacenter beside the public OpenG2G's, part by part, on its ieee13 fixed-tap case and per site.

1. **Grid**: the public OpenG2G's datacenter power series (what its OpenDSS grid received each
   0.1 s) is fed to our grid backend configured like the study (``ieee13_fixedtap_none`` with every
   attached element as an OpenDSS model-1 load); the violation integral and voltages are compared
   with those its OpenDSS run reported.
2. **Datacenter** (with ``--ours RUN_DIR``): its mean power per phase and per model in the study's
   windows beside ours from a finished run of the same case.

Make the peer series first (about 90 s; see ../shared/reference/README.md)::

    $PEER/venv/bin/python ../shared/reference/peer_timeseries.py $PEER/src ieee13 baseline-no-tap \
        --out /tmp/ref_nt
    openg2g run ieee13_fixedtap_none --out /tmp/ours_nt --set outputs.plots=false \
        --set datacenters.0.load_model=opendss --set grid.pv.0.load_model=opendss \
        --set grid.extra_loads.0.load_model=opendss
    python bench/reference_parity.py /tmp/ref_nt --ours /tmp/ours_nt

3. **Sites** (``--sites SCENARIO``, any number of sites, e.g. ``scenarios/study/ieee123_none.yaml``):
   GPUs per phase of every site under the packed and the pool layout, at the counts its pool is
   handed out at, and with ``--ours`` the site's mean power per phase in that run. The study's
   z3_se has 200/200/200 GPUs (408.6/408.6/408.1 kW).

    python bench/reference_parity.py --sites scenarios/study/ieee123_none.yaml --ours /tmp/ours_123

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from openg2g.core.state import DatacenterState
from openg2g.datacenter.config import ModelSpec, SiteSpec
from openg2g.datacenter.layout import GPUS_PER_SERVER, ModelSlots, replica_phases
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.scenario.loader import load_scenario

STUDY_CONVENTION = [f"{e}.load_model=opendss" for e in ("datacenters.0", "grid.pv.0", "grid.extra_loads.0")]
WINDOWS_S = ((0, 1000), (1000, 2000), (2000, 3000), (3000, 3600))


def _violation_pu_s(v_pu: np.ndarray, dt_s: float, lo: float = 0.95, hi: float = 1.05) -> float:
    return float((np.maximum(lo - v_pu, 0) + np.maximum(v_pu - hi, 0)).sum() * dt_s)


def grid_parity(peer: Path, scenario: str) -> None:
    """Solve our grid on the peer's datacenter power and compare voltages step by step."""
    sc = load_scenario(scenario, STUDY_CONVENTION).scenario
    grid = FeederGrid.from_spec(sc.grid, sc.datacenters, load_scenario(scenario).base_dir)
    dc = pd.read_parquet(peer / "dc.parquet")
    ref_v = pd.read_parquet(peer / "voltages.parquet")
    ref_g = pd.read_parquet(peer / "grid.parquet")
    site = sc.datacenters[0].name
    t = dc["t_s"].to_numpy()
    p = dc[["p_a_w", "p_b_w", "p_c_w"]].to_numpy()
    q = dc[["q_a_var", "q_b_var", "q_c_var"]].to_numpy()
    states = grid.solve_batch(
        list(t), [{site: DatacenterState(site, ti, pi, qi, {})} for ti, pi, qi in zip(t, p, q)], 0.1
    )
    names = list(states[0].bus_phases)
    ours = np.array([s.v_pu for s in states])
    theirs = ref_v[names].to_numpy()
    dv = ours - theirs
    print("grid, fed the public OpenG2G's datacenter power (36,000 steps of 0.1 s):")
    print(
        f"  violation integral: ours {_violation_pu_s(ours, 0.1):.4f} pu.s, theirs {ref_g['viol_pu'].sum() * 0.1:.4f} pu.s"
    )
    print(f"  Vmin: ours {ours.min():.5f}, theirs {np.nanmin(theirs):.5f} pu")
    print(f"  |dV| max {np.nanmax(np.abs(dv)):.2e} pu, mean dV {np.nanmean(dv):+.2e} pu over {len(names)} bus-phases")


def datacenter_parity(peer: Path, ours: Path) -> None:
    """Mean power per phase and per model, by window, theirs beside ours (kW)."""
    theirs = pd.read_parquet(peer / "dc.parquet")
    mine = pd.read_parquet(ours / "datacenter")
    models = pd.read_parquet(ours / "models")
    print("datacenter mean power (kW, phase a | training total):")
    for lo, hi in WINDOWS_S:
        a = theirs[(theirs.t_s >= lo) & (theirs.t_s < hi)]
        b = mine[(mine.t_s >= lo) & (mine.t_s < hi)]
        print(
            f"  [{lo:4d}, {hi:4d}) s  theirs {a.p_a_w.mean() / 1e3:8.1f} | {a.training_w.mean() / 1e3:6.1f}"
            f"   ours {b.p_a_w.mean() / 1e3:8.1f} | {b.training_power_w.mean() / 1e3:6.1f}"
        )
    print("per model, t < 1000 s (kW):")
    early = theirs[theirs.t_s < 1000]
    mine_early = models[models.t_s < 1000]
    for col in [c for c in theirs.columns if c.startswith("power_w__")]:
        model = col.split("__", 1)[1]
        ours_kw = mine_early.loc[mine_early.model == model, "power_w"].mean() / 1e3
        print(f"  {model:18s} theirs {early[col].mean() / 1e3:7.1f}   ours {ours_kw:7.1f}")


def _running(site: SiteSpec, model: ModelSpec, replicas: int) -> int:
    """Replicas that run for ``replicas``: the last server filled when the site runs whole servers."""
    if not site.whole_servers:
        return replicas
    servers = -(-replicas * model.gpus_per_replica // GPUS_PER_SERVER)
    return -(-servers * GPUS_PER_SERVER // model.gpus_per_replica)


def site_phases(scenario: str, ours: Path | None) -> None:
    """GPUs per phase of every site, packed and pool, and (with a run) its mean power per phase."""
    sc = load_scenario(scenario).scenario
    dc = pd.read_parquet(ours / "datacenter") if ours is not None else None
    print("GPUs per phase a/b/c at the pool counts (packed from the configured counts | pool):")
    for site in sc.datacenters:
        pool = site.pool_replicas or {}
        counts = {m.model: pool.get(m.model, m.replicas) for m in site.models}
        running = {m.model: _running(site, m, counts[m.model]) for m in site.models}
        capacity = site.gpu_capacity or sum(m.gpus_per_replica * m.replicas for m in site.models)
        per = []
        for layout in ("packed", "pool"):
            # packed places the configured replicas first and grows each model on its own pattern
            first = {m.model: m.replicas if layout == "packed" else counts[m.model] for m in site.models}
            slots = [ModelSlots(m.model, m.gpus_per_replica, first[m.model], running[m.model]) for m in site.models]
            phases, _ = replica_phases(layout, slots, capacity, 0)
            gpus = np.zeros(3)
            for m, ph in zip(site.models, phases):
                np.add.at(gpus, ph, m.gpus_per_replica)
            per.append("/".join(f"{g:.0f}" for g in gpus))
        line = f"  {site.name:8s} {per[0]:>13s} | {per[1]:>13s}   (runs {site.layout})"
        if dc is not None:
            rows = dc[(dc.site == site.name) & (dc.t_s >= 2500)]
            line += (
                "   its power, t >= 2500 s: " + "/".join(f"{rows[f'p_{p}_w'].mean() / 1e3:.1f}" for p in "abc") + " kW"
            )
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "peer", type=Path, nargs="?", help="output folder of ../shared/reference/peer_timeseries.py (baseline-no-tap)"
    )
    ap.add_argument("--sites", help="a scenario whose sites' phases to report (any number of sites)")
    ap.add_argument("--scenario", default="ieee13_fixedtap_none")
    ap.add_argument("--ours", type=Path, help="a finished run of the same case, for the datacenter comparison")
    args = ap.parse_args()
    if args.sites is not None:
        site_phases(args.sites, args.ours)
    if args.peer is not None:
        grid_parity(args.peer, args.scenario)
        if args.ours is not None:
            datacenter_parity(args.peer, args.ours)


if __name__ == "__main__":
    main()

"""Our grid and datacenter beside the public OpenG2G's, part by part, on its cases (any number of sites).

1. **Grid**: the public OpenG2G's datacenter power series (what its OpenDSS grid received each
   0.1 s, every site) is fed to our grid backend configured like the study (``--scenario``, with
   ``grid.load_convention=opendss``: every attached element an OpenDSS model-1 load); the violation
   integral and voltages are compared with those its OpenDSS run reported. The same series with each
   site's three phases evened out to their mean isolates the study's per-phase imbalance, which comes
   from its servers' random amplitude scales (U(0.98, 1.02) each).
2. **Datacenter** (with ``--ours RUN_DIR``): each site's mean power per phase by window and per model
   beside ours from a finished run of the same case.

Make the peer series first (about 90 s for ieee13, 190 s for ieee34; see ../shared/reference/README.md;
a series with a ``site`` column holds several sites)::

    $PEER/venv/bin/python ../shared/reference/peer_timeseries.py $PEER/src ieee13 baseline-no-tap \
        --out /tmp/ref_nt
    openg2g run ieee13_fixedtap_none --out /tmp/ours_nt --set outputs.plots=false \
        --set grid.load_convention=opendss
    python bench/reference_parity.py /tmp/ref_nt --ours /tmp/ours_nt

    openg2g run scenarios/study/ieee34_none.yaml --out /tmp/ours_34 --set outputs.plots=false
    python bench/reference_parity.py /tmp/ref_34 --scenario scenarios/study/ieee34_none.yaml --ours /tmp/ours_34

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

STUDY_CONVENTION = ["grid.load_convention=opendss"]
WINDOWS_S = ((0, 1000), (1000, 2000), (2000, 3000), (3000, 3600))


def _violation_pu_s(v_pu: np.ndarray, dt_s: float, lo: float = 0.95, hi: float = 1.05) -> float:
    return float((np.maximum(lo - v_pu, 0) + np.maximum(v_pu - hi, 0)).sum() * dt_s)


def _site_series(dc: pd.DataFrame, default_site: str) -> dict[str, pd.DataFrame]:
    """The peer's datacenter rows per site (a file without a ``site`` column holds one site)."""
    if "site" not in dc.columns:
        return {default_site: dc.reset_index(drop=True)}
    return {str(s): rows.reset_index(drop=True) for s, rows in dc.groupby("site", sort=False)}


def _solve(grid: FeederGrid, sites: dict[str, pd.DataFrame], evened: bool) -> tuple[list[str], np.ndarray]:
    """Monitored bus-phases and their voltages (steps x bus-phases) of our grid on the peer's power; ``evened``: each site's three
    phases set to its three-phase mean at every step (reactive power scaled alike)."""
    t = next(iter(sites.values()))["t_s"].to_numpy()
    p = {s: rows[["p_a_w", "p_b_w", "p_c_w"]].to_numpy() for s, rows in sites.items()}
    q = {s: rows[["q_a_var", "q_b_var", "q_c_var"]].to_numpy() for s, rows in sites.items()}
    if evened:
        q = {s: q[s] / p[s] * p[s].mean(axis=1, keepdims=True) for s in sites}
        p = {s: np.repeat(p[s].mean(axis=1, keepdims=True), 3, axis=1) for s in sites}
    loads = [{s: DatacenterState(s, ti, p[s][i], q[s][i], {}) for s in sites} for i, ti in enumerate(t)]
    states = grid.solve_batch(list(t), loads, 0.1)
    return list(states[0].bus_phases), np.array([state.v_pu for state in states])


def grid_parity(peer: Path, scenario: str) -> None:
    """Solve our grid on the peer's datacenter power (every site) and compare voltages step by step;
    then again with each site's phases evened out, which isolates the peer's per-phase imbalance
    (its servers' random amplitude scales)."""
    loaded = load_scenario(scenario, STUDY_CONVENTION)
    sc = loaded.scenario
    sites = _site_series(pd.read_parquet(peer / "dc.parquet"), sc.datacenters[0].name)
    ref_v = pd.read_parquet(peer / "voltages.parquet")
    ref_g = pd.read_parquet(peer / "grid.parquet")
    names, ours = _solve(FeederGrid.from_spec(sc.grid, sc.datacenters, loaded.base_dir), sites, evened=False)
    theirs = ref_v[names].to_numpy()
    dv = ours - theirs
    print(f"grid, fed the public OpenG2G's datacenter power ({len(ours):,} steps of 0.1 s, sites {', '.join(sites)}):")
    print(
        f"  violation integral: ours {_violation_pu_s(ours, 0.1):.4f} pu.s, theirs {ref_g['viol_pu'].sum() * 0.1:.4f} pu.s"
    )
    print(f"  Vmin: ours {ours.min():.5f}, theirs {np.nanmin(theirs):.5f} pu")
    print(f"  |dV| max {np.nanmax(np.abs(dv)):.2e} pu, mean dV {np.nanmean(dv):+.2e} pu over {len(names)} bus-phases")
    for site, rows in sites.items():
        means = "/".join(f"{rows[f'p_{p}_w'].mean() / 1e3:.2f}" for p in "abc")
        print(f"  {site}: their mean power per phase a/b/c {means} kW")
    _, evened = _solve(FeederGrid.from_spec(sc.grid, sc.datacenters, loaded.base_dir), sites, evened=True)
    print(f"  each site's phases evened out: ours {_violation_pu_s(evened, 0.1):.4f} pu.s")


def datacenter_parity(peer: Path, ours: Path, scenario: str) -> None:
    """Mean power per phase (and training) by window, and per model, theirs beside ours (kW), site by site."""
    default_site = load_scenario(scenario).scenario.datacenters[0].name
    theirs = _site_series(pd.read_parquet(peer / "dc.parquet"), default_site)
    mine = pd.read_parquet(ours / "datacenter")
    models = pd.read_parquet(ours / "models")
    for site, rows in theirs.items():
        own = mine[mine.site == site]
        training = "training_w" in rows.columns
        print(f"{site}: mean power per phase a/b/c (kW{', | training total' if training else ''}):")
        for lo, hi in WINDOWS_S:
            a = rows[(rows.t_s >= lo) & (rows.t_s < hi)]
            b = own[(own.t_s >= lo) & (own.t_s < hi)]
            line = "  [{:4d}, {:4d}) s  theirs {}   ours {}".format(
                lo,
                hi,
                "/".join(f"{a[f'p_{p}_w'].mean() / 1e3:7.2f}" for p in "abc"),
                "/".join(f"{b[f'p_{p}_w'].mean() / 1e3:7.2f}" for p in "abc"),
            )
            if training:
                line += (
                    f"   training theirs {a.training_w.mean() / 1e3:6.1f} ours {b.training_power_w.mean() / 1e3:6.1f}"
                )
            print(line)
        print("  per model, t < 1000 s (kW):")
        early = rows[rows.t_s < 1000]
        mine_early = models[(models.t_s < 1000) & (models.site == site)]
        for col in [c for c in rows.columns if c.startswith("power_w__") and rows[c].notna().any()]:
            model = col.split("__", 1)[1]
            ours_kw = mine_early.loc[mine_early.model == model, "power_w"].mean() / 1e3
            print(f"    {model:18s} theirs {early[col].mean() / 1e3:7.1f}   ours {ours_kw:7.1f}")


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
        "peer",
        type=Path,
        nargs="?",
        help="output folder of a peer time-series run (dc, grid and voltages parquet files; taps fixed)",
    )
    ap.add_argument("--sites", help="a scenario whose sites' phases to report (any number of sites)")
    ap.add_argument("--scenario", default="ieee13_fixedtap_none", help="our counterpart of the peer case")
    ap.add_argument("--ours", type=Path, help="a finished run of the same case, for the datacenter comparison")
    args = ap.parse_args()
    if args.sites is not None:
        site_phases(args.sites, args.ours)
    if args.peer is not None:
        grid_parity(args.peer, args.scenario)
        if args.ours is not None:
            datacenter_parity(args.peer, args.ours, args.scenario)


if __name__ == "__main__":
    main()

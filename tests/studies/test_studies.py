"""Hosting capacity and siting studies on the toy run function (hand-checkable answers).

Toy physics (openg2g.testing.sweep): a site draws 100 kW per GPU; each bus hosts up to its limit
(671: 2.0 MW, 675: 1.0 MW, 680: 0.5 MW), 1.5 times that with a controller; the violation
integral is the excess (MW) x duration / 100.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from openg2g.studies import HostingConfig, SitingSpec, read_base, run_hosting_capacity, run_siting
from openg2g.studies.common import Topology
from openg2g.studies.hosting import model_mix
from openg2g.studies.siting import split_site
from openg2g.sweep.engines import LocalEngine, SerialEngine
from openg2g.testing import toy_run

TOPOLOGY = Topology(
    name="toy",
    bus_phases={
        "650": ("a", "b", "c"),
        "671": ("a", "b", "c"),
        "675": ("a", "b", "c"),
        "680": ("a", "b", "c"),
        "611": ("c",),
    },
    coords={"650": (0.0, 2.0), "671": (0.0, 0.0), "675": (1.0, 0.0), "680": (0.0, -1.0), "611": (-1.0, 0.0)},
    edges=(("650", "671"), ("671", "675"), ("671", "680"), ("671", "611")),
    source_side=("650",),
)


def write_base(directory: Path, replicas=(4, 2)) -> Path:
    data = {
        "name": "toy_dc",
        "duration_s": 3600,
        "grid": {"feeder": "toy"},
        "datacenters": [
            {
                "name": "dc1",
                "bus": "671",
                "models": [
                    {"model": "m1", "gpus_per_replica": 1, "replicas": replicas[0], "batch_size": 8},
                    {"model": "m2", "gpus_per_replica": 2, "replicas": replicas[1], "batch_size": 8},
                ],
            }
        ],
        "events": [
            {"t_s": 10, "command": "set_inference_scale", "site": "dc1", "fraction": 0.5},
            {"t_s": 3000, "command": "x"},
        ],
        "controllers": [],
        "toy": {"kw_per_gpu": 100.0, "limit_mw": 9.0, "limit_mw_by_bus": {"671": 2.0, "675": 1.0, "680": 0.5}},
    }
    path = directory / "toy_none.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_model_mix_is_replicas_over_their_gcd():
    mix = model_mix(
        {
            "name": "s",
            "models": [
                {"model": "a", "replicas": 720, "gpus_per_replica": 1},
                {"model": "b", "replicas": 180, "gpus_per_replica": 4},
                {"model": "c", "replicas": 90, "gpus_per_replica": 8},
            ],
            "base_load_kw_per_phase": 450,
        }
    )
    assert mix.replicas == {"a": 8, "b": 2, "c": 1} and mix.base_blocks == 90
    assert mix.gpus_per_block == 8 + 8 + 8 and mix.base_load_kw_per_phase == 5.0


@pytest.mark.slow
@pytest.mark.parametrize(
    "tolerance, expected",
    [
        # block = 2 x m1 + 1 x m2 = 4 GPUs = 0.4 MW; none: 0.4k <= limit; with a controller <= 1.5 limit
        (0.0, {("671", "none"): 5, ("675", "none"): 2, ("671", "ofo"): 7, ("675", "ofo"): 3}),
        # 60 s runs: violation = excess x 0.6 <= 0.3 -> excess <= 0.5 MW
        (0.3, {("671", "none"): 6, ("675", "none"): 3, ("671", "ofo"): 8, ("675", "ofo"): 5}),
    ],
)
def test_hosting_capacity_by_bus_and_controller(tmp_path, tolerance, expected):
    base = read_base(write_base(tmp_path))
    config = HostingConfig(buses=["671", "675"], controllers=("none", "ofo"), tolerance_pu_s=tolerance, duration_s=60)
    table = run_hosting_capacity(base, config, tmp_path / "out", LocalEngine(2), topology=TOPOLOGY, run_fn=toy_run)
    got = {(r.bus, r.controller): r.capacity_blocks for r in table.itertuples()}
    assert got == expected
    for r in table.itertuples():
        assert r.capacity_gpus == 4 * r.capacity_blocks
        assert r.capacity_peak_mw == pytest.approx(0.4 * r.capacity_blocks)
        assert r.first_failing_blocks == r.capacity_blocks + 1
        assert r.violation_integral_pu_s <= tolerance + 1e-12
    assert (tmp_path / "out" / "hosting_capacity.png").stat().st_size > 0
    evaluations = pd.read_parquet(tmp_path / "out" / "evaluations.parquet")
    assert set(evaluations["status"]) == {"complete"}
    assert list(evaluations.columns[:6]) == ["run_id", "index", "bus", "controller", "blocks", "gpus"]


def test_hosting_capacity_reuses_runs_and_defaults_to_three_phase_buses(tmp_path):
    base = read_base(write_base(tmp_path))
    config = HostingConfig(controllers=("none",), duration_s=60)
    first = run_hosting_capacity(base, config, tmp_path / "out", SerialEngine(), topology=TOPOLOGY, run_fn=toy_run)
    assert list(first["bus"]) == ["671", "675", "680"]  # three-phase, not the source bus 650 nor 611
    assert list(first["capacity_blocks"]) == [5, 2, 1]
    again = run_hosting_capacity(base, config, tmp_path / "out", SerialEngine(), topology=TOPOLOGY, run_fn=toy_run)
    pd.testing.assert_frame_equal(first, again)
    assert pd.read_parquet(tmp_path / "out" / "evaluations.parquet")["reused"].all()


def test_hosting_runs_drop_training_and_late_events(tmp_path):
    base = read_base(write_base(tmp_path))
    run_hosting_capacity(
        base,
        HostingConfig(buses=["680"], controllers=("none",), duration_s=60),
        tmp_path / "o",
        SerialEngine(),
        run_fn=toy_run,
    )
    run = next((tmp_path / "o" / "runs").glob("680-none-k*"))
    overrides = yaml.safe_load((run / "run.json").read_text())["overrides"]
    assert "datacenters.0.training=null" in overrides and "duration_s=60" in overrides
    events = yaml.safe_load(next(o for o in overrides if o.startswith("events=")).partition("=")[2])
    assert [e["t_s"] for e in events] == [10]


def test_split_site_halves_replicas_rounding_up_first():
    a, b = split_site(
        {
            "name": "dc",
            "bus": "1",
            "models": [{"model": "m", "replicas": 5}],
            "training": {"gpus": 8},
            "base_load_kw_per_phase": 10.0,
        },
        "671",
        "675",
    )
    assert (a["name"], a["bus"], a["models"][0]["replicas"]) == ("dc_a", "671", 3)
    assert (b["name"], b["bus"], b["models"][0]["replicas"]) == ("dc_b", "675", 2)
    assert a["training"] == {"gpus": 8} and b["training"] is None and a["base_load_kw_per_phase"] == 5.0


@pytest.mark.slow
def test_siting_ranks_single_and_pair_placements(tmp_path):
    base = read_base(write_base(tmp_path, replicas=(10, 5)))  # 20 GPUs = 2.0 MW
    spec = SitingSpec(
        study="siting",
        name="toy_siting",
        base="toy_none.yaml",
        candidates=["671", "675", "680"],
        pairs=True,
        duration_s=60,
    )
    table = run_siting(base, spec, tmp_path / "out", LocalEngine(2), topology=TOPOLOGY, run_fn=toy_run)
    # singles: 671 0, 675 (2.0-1.0) x 0.6, 680 (2.0-0.5) x 0.6; halves 1.1 MW (a) and 0.9 MW (b)
    expected = {"671": 0.0, "675": 0.6, "680": 0.9, "671+675": 0.0, "671+680": 0.4 * 0.6, "675+680": (0.1 + 0.4) * 0.6}
    got = dict(zip(table["placement"], table["violation_integral_pu_s"]))
    assert got == pytest.approx(expected)
    assert set(table["placement"][:2]) == {"671", "671+675"}
    assert list(table["placement"][2:]) == ["671+680", "675+680", "675", "680"]
    assert list(table["rank"]) == [1, 2, 3, 4, 5, 6]
    for name in ("siting.parquet", "siting_single.png", "siting_pairs.png", "siting_ranking.png"):
        assert (tmp_path / "out" / name).exists()
    pair_run = yaml.safe_load((tmp_path / "out" / "runs" / "pair-671-680-none" / "run.json").read_text())
    sites = yaml.safe_load(next(o for o in pair_run["overrides"] if o.startswith("datacenters=")).partition("=")[2])
    assert [s["name"] for s in sites] == ["dc1_a", "dc1_b"]
    events = yaml.safe_load(next(o for o in pair_run["overrides"] if o.startswith("events=")).partition("=")[2])
    assert [e["site"] for e in events] == ["dc1_a", "dc1_b"]


def test_a_stated_mix_gives_a_finer_block(tmp_path):
    site = {
        "name": "s",
        "models": [
            {"model": "m1", "replicas": 4, "gpus_per_replica": 1},
            {"model": "m2", "replicas": 2, "gpus_per_replica": 2},
        ],
        "base_load_kw_per_phase": 8.0,
    }
    mix = model_mix(site, {"m1": 1})
    assert mix.replicas == {"m1": 1, "m2": 0} and mix.gpus_per_block == 1 and mix.base_blocks == 8
    assert mix.base_load_kw_per_phase == 1.0 and mix.describe() == "1x m1 (1 GPU)"
    base = read_base(write_base(tmp_path))
    config = HostingConfig(buses=["675"], controllers=("none",), duration_s=60, mix={"m1": 1})
    table = run_hosting_capacity(base, config, tmp_path / "out", SerialEngine(), run_fn=toy_run)
    assert table["capacity_blocks"].iloc[0] == 10  # 1 GPU = 0.1 MW per block, 1.0 MW limit at 675


def test_a_mix_naming_an_unknown_model_is_rejected():
    from openg2g.sweep import SweepError

    with pytest.raises(SweepError, match="not served"):
        model_mix({"name": "s", "models": [{"model": "m1", "replicas": 4}]}, {"m9": 1})


def test_a_placement_with_non_converged_steps_ranks_after_every_converged_one():
    """Bus 680 looks best on its converged steps (1.59 pu.s) but half its steps did not converge."""
    import pandas as pd

    from openg2g.studies.siting import rank_placements

    table = pd.DataFrame(
        {
            "controller": ["none"] * 3,
            "placement": ["671", "675", "680"],
            "status": ["complete"] * 3,
            "violation_integral_pu_s": [50.5, 60.0, 1.59],
            "mean_throughput_tok_s": [1.0, 1.0, 1.0],
            "v_min_pu": [0.9, 0.9, 0.17],
            "nonconverged_steps": [0, 0, 100],
        }
    )
    ranked = rank_placements(table)
    assert list(ranked["placement"]) == ["671", "675", "680"] and list(ranked["rank"]) == [1, 2, 3]

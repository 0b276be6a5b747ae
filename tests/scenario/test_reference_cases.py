"""Known-answer checks of the bundled counterparts of the public OpenG2G study's cases
(arXiv 2605.05519, gpu2grid/openg2g 0.2.0): ``ieee34_ref_*``, ``ieee123_ref_*``, the ieee123
experiment scenarios and the sweep files that mirror the study's other scripts.

The expected values are the study's setup (its ``examples/offline/run_ofo.py``, ``systems.py`` and
analysis scripts): buses, capacities, base loads, replica schedules, PVs, loads, taps, source
voltages, and the size of its monitored set (every bus but a per-system exclude list: ieee34 27
buses / 67 bus-phases, ieee123 122 / 253). Everything here only loads and validates; the one
simulation is marked slow.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from openg2g.grid.feeder.backend import FeederGrid
from openg2g.scenario.loader import LoadedScenario, load_scenario
from openg2g.sweep.expand import expand_parameters, point_overrides
from openg2g.sweep.spec import load_sweep

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

REF_CASES = ["ieee34_ref_none", "ieee34_ref_ofo", "ieee123_ref_none", "ieee123_ref_ofo"]
EXPERIMENTS = [
    "ieee123_loadshift_ofo",
    "ieee123_loadshift_ofo_shift",
    "ieee123_storage_ofo_idle",
    "ieee123_storage_ofo_qv",
    "ieee123_storage_ofo_pv",
]
# sweep file -> number of runs
SWEEPS = {
    "sweep_ieee13_ofo_params": 23,
    "sweep_ieee123_controllers": 3,
    "sweep_ieee123_dc_zones": 106,
    "sweep_ieee34_dc_pairs": 380,
}
MODELS = {  # model -> (GPUs per replica, ITL deadline s), as the study's model specs
    "Llama-3.1-8B": (1, 0.08),
    "Llama-3.1-70B": (4, 0.10),
    "Llama-3.1-405B": (8, 0.12),
    "Qwen3-30B-A3B": (2, 0.06),
    "Qwen3-235B-A22B": (8, 0.14),
}
# the study's exclude lists (examples/offline/systems.py)
EXCLUDED = {
    "ieee34": {"sourcebus", "800", "802", "806", "808", "810", "812", "814", "888", "890"},
    "ieee123": {"sourcebus", "150", "150r", "149", "9r", "25r", "160r", "61s", "610", "300_open", "94_open"},
}


@cache
def _load(name: str) -> LoadedScenario:
    """A bundled scenario file, loaded and validated once per test session (the models are frozen)."""
    return load_scenario(SCENARIOS / f"{name}.yaml")


def _grid(loaded: LoadedScenario) -> FeederGrid:
    sc = loaded.scenario
    return FeederGrid.from_spec(sc.grid, sc.datacenters, loaded.base_dir)


def _sites(loaded: LoadedScenario) -> dict[str, tuple[str, float, int | None, dict[str, tuple[int, int]]]]:
    """site -> (bus, base kW per phase, capacity, {model: (replicas, batch)})."""
    return {
        s.name: (
            s.bus,
            s.base_load_kw_per_phase,
            s.gpu_capacity,
            {m.model: (m.replicas, m.batch_size) for m in s.models},
        )
        for s in loaded.scenario.datacenters
    }


def _check_models(loaded: LoadedScenario) -> None:
    for s in loaded.scenario.datacenters:
        assert s.power_factor == 0.95
        assert s.load_model == "constant_power"
        for m in s.models:
            assert (m.gpus_per_replica, m.itl_deadline_s) == MODELS[m.model]
            assert m.batch_sizes == [8, 16, 32, 64, 128, 256, 512]


@pytest.mark.parametrize("name", REF_CASES + EXPERIMENTS)
def test_scenario_validates(name: str) -> None:
    loaded = _load(name)
    assert loaded.scenario.name == name
    assert loaded.scenario.duration_s == 3600
    p = loaded.scenario.periods
    assert (float(p.datacenter_s), float(p.grid_s), float(p.control_s)) == (0.1, 0.1, 1.0)
    _check_models(loaded)


@pytest.mark.parametrize("variant", ["none", "ofo"])
def test_ieee34_is_the_study_case(variant: str) -> None:
    loaded = _load(f"ieee34_ref_{variant}")
    sc = loaded.scenario
    assert sc.seed == 0  # the study's site seeds 0 / 42 are not a scenario field (site i: seed + 1000 (i + 1))
    assert _sites(loaded) == {
        "upstream": (
            "850",
            120,
            2400,
            {"Llama-3.1-8B": (720, 128), "Llama-3.1-70B": (180, 128), "Llama-3.1-405B": (90, 128)},
        ),
        "downstream": ("834", 80, 2880, {"Qwen3-30B-A3B": (480, 128), "Qwen3-235B-A22B": (210, 128)}),
    }
    g = sc.grid
    assert g.feeder == "openg2g-ieee34"
    assert g.source_pu == 1.09
    assert {k: v.taps for k, v in g.regulators.items()} == {"reg1": [12, 8, 10], "reg2": [8, 8, 8]}
    assert all(v.mode == "fixed" for v in g.regulators.values())
    # SyntheticPV(130 / 65 kW per phase, site 0 / 1): our kw is the three-phase total
    assert [(pv.bus, pv.kw, pv.power_factor, pv.profile) for pv in g.pv] == [
        ("848", 390, 1.0, "profiles/reference_pv0.csv"),
        ("830", 195, 1.0, "profiles/reference_pv1.csv"),
    ]
    assert [(x.bus, x.kw_per_phase, x.power_factor, x.profile) for x in g.extra_loads] == [
        ("860", 80, 0.96, "profiles/reference_load0.csv"),
        ("844", 120, 0.96, "profiles/reference_load1.csv"),
        ("840", 60, 0.96, "profiles/reference_load2.csv"),
        ("858", 50, 0.96, "profiles/reference_load3.csv"),
        ("854", 40, 0.96, "profiles/reference_load4.csv"),
    ]
    assert sc.events == []  # constant replicas, taps fixed (the study's no-tap mode)
    assert [c.kind for c in sc.controllers] == ([] if variant == "none" else ["ofo"])


@pytest.mark.parametrize("variant", ["none", "ofo"])
def test_ieee123_is_the_study_case(variant: str) -> None:
    loaded = _load(f"ieee123_ref_{variant}")
    sc = loaded.scenario
    assert sc.seed == 0  # the study's site seeds 0 / 17 / 34 / 51 are not a scenario field
    assert _sites(loaded) == {
        "z1_sw": ("8", 310, 180, {"Llama-3.1-8B": (120, 128)}),
        "z2_nw": ("23", 265, 208, {"Qwen3-30B-A3B": (80, 128)}),
        "z3_se": ("60", 295, 600, {"Llama-3.1-70B": (30, 128), "Llama-3.1-405B": (35, 128)}),
        "z4_ne": ("105", 325, 440, {"Qwen3-235B-A22B": (55, 128)}),
    }
    g = sc.grid
    assert g.feeder == "openg2g-ieee123"
    assert g.source_pu == 1.0
    # creg1a (ganged) -> reg1, creg2a -> reg2, creg3a/c -> reg3, creg4a/b/c -> reg4
    assert {k: v.taps for k, v in g.regulators.items()} == {
        "reg1": [9, 9, 9],
        "reg2": [5],
        "reg3": [5, 5],
        "reg4": [14, 1, 4],
    }
    assert [(pv.bus, pv.kw, pv.profile) for pv in g.pv] == [
        ("1", 999.9, "profiles/reference_pv0.csv"),
        ("48", 999.9, "profiles/reference_pv1.csv"),
        ("99", 999.9, "profiles/reference_pv2.csv"),
    ]
    assert g.extra_loads == []
    # the study's ReplicaSchedule ramps [t_start, t_end] -> target
    ramps = {
        (e.fields()["site"], e.fields()["model"]): (e.t_s, e.fields()["ramp_s"], e.fields()["replicas"])
        for e in sc.events
    }
    assert ramps == {
        ("z1_sw", "Llama-3.1-8B"): (500, 500, 180),
        ("z3_se", "Llama-3.1-70B"): (700, 400, 45),
        ("z3_se", "Llama-3.1-405B"): (700, 400, 52),
        ("z2_nw", "Qwen3-30B-A3B"): (1500, 1000, 104),
        ("z4_ne", "Qwen3-235B-A22B"): (2000, 500, 27),
    }
    # the ramps stay within each site's capacity
    for s in sc.datacenters:
        peak = {m.model: max(m.replicas, ramps.get((s.name, m.model), (0, 0, 0))[2]) for m in s.models}
        assert sum(peak[m.model] * m.gpus_per_replica for m in s.models) <= s.gpu_capacity


@pytest.mark.parametrize(
    ("name", "system", "buses", "bus_phases"),
    [("ieee34_ref_none", "ieee34", 27, 67), ("ieee123_ref_none", "ieee123", 122, 253)],
)
def test_monitored_set_is_the_studys(name: str, system: str, buses: int, bus_phases: int) -> None:
    loaded = _load(name)
    monitored = loaded.scenario.grid.monitored_buses
    assert monitored is not None and len(monitored) == len(set(monitored)) == buses
    grid = _grid(loaded)
    assert len(grid.bus_phases()) == bus_phases
    every_bus = set(grid.feeder.bus_phases)
    assert set(monitored) == every_bus - EXCLUDED[system]


def test_ofo_cases_differ_from_the_baselines_only_by_the_controller() -> None:
    for system in ("ieee34", "ieee123"):
        none, ofo = _load(f"{system}_ref_none").scenario, _load(f"{system}_ref_ofo").scenario
        keep = {"name", "description", "controllers"}
        assert none.model_dump(exclude=keep) == ofo.model_dump(exclude=keep)


def test_load_shifting_sites() -> None:
    for name in ("ieee123_loadshift_ofo", "ieee123_loadshift_ofo_shift"):
        loaded = _load(name)
        sites = _sites(loaded)
        assert {s: (v[0], v[1], v[2]) for s, v in sites.items()} == {
            "z1_sw": ("7", 210, 1092),
            "z2_nw": ("25", 175, 728),  # the study's bus 33 has phase a only; 25 is the nearest three-phase bus
            "z3_se": ("76", 215, 1768),
            "z4_ne": ("108", 235, 1300),
        }
        used = {s: sum(n * MODELS[m][0] for m, (n, _) in v[3].items()) for s, v in sites.items()}
        assert used == {"z1_sw": 840, "z2_nw": 680, "z3_se": 1360, "z4_ne": 1000}
        assert {b for v in sites.values() for _, b in v[3].values()} == {8}
        g = loaded.scenario.grid
        assert g.regulators["reg4"].taps == [13, 1, 4] and g.pv == [] and g.extra_loads == []
        assert [(e.t_s, e.fields()["taps"]) for e in loaded.scenario.events] == [(1800, [15, 1, 4])]
    kinds = [c.kind for c in _load("ieee123_loadshift_ofo_shift").scenario.controllers]
    assert kinds == ["ofo", "load_shift"]


def test_storage_cases() -> None:
    expected = {
        "bat_z1": ("8", 300, 500),
        "bat_z2": ("23", 300, 500),
        "bat_z3": ("60", 360, 600),
        "bat_z4": ("105", 420, 700),
    }
    kinds = {}
    for mode in ("idle", "qv", "pv"):
        sc = _load(f"ieee123_storage_ofo_{mode}").scenario
        assert {st.name: (st.bus, st.kw, st.kwh) for st in sc.grid.storage} == expected
        assert all((st.soc0, st.efficiency) == (0.5, 1.0) for st in sc.grid.storage)
        assert sc.datacenters[2].gpu_capacity == 460
        kinds[mode] = [c.kind for c in sc.controllers]
    assert kinds == {"idle": ["ofo"], "qv": ["ofo"] + ["storage_droop"] * 4, "pv": ["ofo"] + ["storage_droop"] * 4}


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_sweep_expands_and_its_corner_points_validate(name: str) -> None:
    sweep = load_sweep(SCENARIOS / f"{name}.yaml")
    points = expand_parameters(sweep.spec.parameters)
    assert len(points) == SWEEPS[name]
    assert len({tuple(point_overrides(p)) for p in points}) == len(points)  # no duplicate runs
    for point in (points[0], points[-1]):
        load_scenario(sweep.base_path, [*sweep.spec.set, *point_overrides(point)])


def test_controller_comparison_gives_the_tap_schedule_to_the_baseline_only() -> None:
    sweep = load_sweep(SCENARIOS / "sweep_ieee123_controllers.yaml")
    runs = [
        load_scenario(sweep.base_path, [*sweep.spec.set, *point_overrides(p)]).scenario
        for p in expand_parameters(sweep.spec.parameters)
    ]
    assert [[c.kind for c in sc.controllers] for sc in runs] == [[], ["rule_based"], ["ofo"]]
    assert [[e.command for e in sc.events].count("set_taps") for sc in runs] == [1, 0, 0]
    for sc in runs:
        assert {m.batch_size for s in sc.datacenters for m in s.models} == {8}
        assert sc.datacenters[2].gpu_capacity == 460
        assert ("z3_se", "Llama-3.1-405B") not in {(e.fields().get("site"), e.fields().get("model")) for e in sc.events}


@pytest.mark.slow
def test_ieee34_reference_case_runs(tmp_path: Path) -> None:
    from openg2g.scenario.run import run_scenario

    summary = run_scenario(
        SCENARIOS / "ieee34_ref_none.yaml",
        tmp_path,
        ["duration_s=20", "outputs.plots=false", "outputs.voltages=envelope"],
    ).summary
    assert summary["status"] == "complete" and summary["nonconverged_steps"] == 0
    assert 0.93 < summary["v_min_pu"] < summary["v_max_pu"] < 1.07

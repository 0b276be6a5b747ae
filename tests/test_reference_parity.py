"""Parity with the public OpenG2G study (arXiv 2605.05519, gpu2grid/openg2g 0.2.0) on its
headline IEEE 13 case: taps fixed at 14/6/15 for the hour (``ieee13_fixedtap_*``).

The study's published figures (its quickstart, ``run_ofo.py --system ieee13``): no control
31.28 pu.s of violation over 993.8 s, lowest voltage 0.9353 pu; OFO 0.0989 pu.s at 0.6 %
throughput loss and 1.11 % ITL misses (0.354 pu.s at +1.9 % when its code runs here). docs/reference-study.md explains the remaining differences.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from openg2g.scenario.run import run_scenario

pytestmark = pytest.mark.slow

STUDY_NONE = {"violation_integral_pu_s": 31.28, "violation_time_s": 993.8, "v_min_pu": 0.9353}
OPENDSS_CONVENTION = [
    f"{element}.load_model=opendss" for element in ("datacenters.0", "grid.pv.0", "grid.extra_loads.0")
]
"""Every element the study attaches is an OpenDSS model-1 load."""
FAST = ["outputs.plots=false", "outputs.voltages=envelope"]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("parity")


@pytest.fixture(scope="module")
def runs(out: Path) -> dict[str, dict[str, float]]:
    cases = {
        "none_opendss": ("ieee13_fixedtap_none", OPENDSS_CONVENTION),
        "none": ("ieee13_fixedtap_none", []),
        "ofo": ("ieee13_fixedtap_ofo", []),
    }
    return {key: run_scenario(name, Path(out) / key, [*FAST, *extra]).summary for key, (name, extra) in cases.items()}


def test_no_control_with_the_study_conventions_lands_on_its_figures(runs: dict[str, dict[str, float]]) -> None:
    got = runs["none_opendss"]
    assert got["violation_integral_pu_s"] == pytest.approx(STUDY_NONE["violation_integral_pu_s"], rel=0.05)
    assert got["v_min_pu"] == pytest.approx(STUDY_NONE["v_min_pu"], abs=0.002)
    assert got["violation_time_s"] == pytest.approx(STUDY_NONE["violation_time_s"], rel=0.02)


def test_constant_power_sits_deeper_than_model_one(runs: dict[str, dict[str, float]]) -> None:
    """Below 0.95 pu model 1 draws less than nominal; constant power does not."""
    assert runs["none"]["violation_integral_pu_s"] > runs["none_opendss"]["violation_integral_pu_s"]
    assert runs["none"]["v_min_pu"] < runs["none_opendss"]["v_min_pu"]


def test_ofo_leaves_less_than_the_studys_residual_at_more_throughput(
    runs: dict[str, dict[str, float]], out: Path
) -> None:
    """The study's OFO, its code run here, leaves 1.13% of its own no-control violation (0.354 of
    31.30 pu.s) at +1.9% throughput; ours must do as well against ours, each model's ITL misses
    within 5% of its tokens."""
    base, ofo = runs["none"], runs["ofo"]
    assert ofo["violation_integral_pu_s"] <= 0.0113 * base["violation_integral_pu_s"]
    assert ofo["mean_throughput_tok_s"] >= 1.019 * base["mean_throughput_tok_s"]
    models = pd.read_parquet(out / "ofo" / "models", columns=["model", "throughput_tok_s", "deadline_miss_fraction"])
    missed = (
        (models["throughput_tok_s"] * models["deadline_miss_fraction"]).groupby(models["model"], observed=True).sum()
    )
    assert (missed / models.groupby("model", observed=True)["throughput_tok_s"].sum()).max() <= 0.05


STUDY_FILES = Path(__file__).resolve().parents[1] / "scenarios" / "study"


@pytest.mark.parametrize(
    ("file", "study_pu_s"),
    [("ieee13_fixedtap_none", 31.30), ("ieee13_none", 21.67), ("ieee123_none", 46.62)],
)
def test_the_study_convention_files_land_within_2_percent(file: str, study_pu_s: float, tmp_path: Path) -> None:
    """``scenarios/study/``: model-1 loads, the phase-balanced pool of whole servers and 600 s
    templates; the study's no-control integrals as its code gives them on this machine
    (docs/reference-study.md). ieee34 (+3.4%) is listed there, not here."""
    got = run_scenario(str(STUDY_FILES / f"{file}.yaml"), tmp_path, FAST).summary
    assert got["violation_integral_pu_s"] == pytest.approx(study_pu_s, rel=0.02)

"""The transmission reference case (scenarios/transmission_four_campuses.yaml) on SimBench's
1-HV-urban net, and the message for a SimBench code when simbench is missing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

from openg2g.core.errors import FeederError
from openg2g.grid.nets import source as ppnets
from openg2g.scenario.run import run_scenario

HAS_SIMBENCH = importlib.util.find_spec("simbench") is not None


def test_a_simbench_code_without_simbench_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "simbench" else real(name, *a))
    monkeypatch.setattr(ppnets, "_simbench", lambda code: None)
    with pytest.raises(
        FeederError, match=r"'1-HV-urban--0-no_sw' looks like a SimBench code.*openg2g-cosim\[simbench\]"
    ):
        ppnets.load_net("1-HV-urban--0-no_sw")


@pytest.mark.slow  # reading the SimBench net takes ~10 s
@pytest.mark.skipif(not HAS_SIMBENCH, reason="simbench is not installed (pip install 'openg2g-cosim[simbench]')")
def test_four_campuses_run_behind_their_transformers(tmp_path: Path) -> None:
    result = run_scenario("transmission_four_campuses", tmp_path, overrides=["duration_s=3", "outputs.plots=false"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "complete" and summary == {**summary, **result.summary}
    branches = pd.read_parquet(tmp_path / "grid_branches")
    names = set(branches["branch"].astype(str))
    campuses = ["campus_a", "campus_b", "campus_c", "campus_d"]
    # the net's own three 220/110 kV transformers are 0-2; the campuses' are added after them
    site_trafos = {f"transformer.{i}" for i in (3, 4, 5, 6)}
    assert {n for n in names if n.startswith("transformer.")} == {f"transformer.{i}" for i in range(7)}
    dc = pd.read_parquet(tmp_path / "datacenter")
    assert sorted(dc["site"].astype(str).unique()) == campuses
    # each campus draws 10-40 MW (25,000 GPUs at 55% inference, 1.75 MW/phase of other load): its
    # 40 MVA transformer carries it without overload, and the 110 kV voltages stay in the band
    per_site_mw = dc.groupby("site", observed=True)[["p_a_w", "p_b_w", "p_c_w"]].mean().sum(axis=1) / 1e6
    assert ((per_site_mw > 10) & (per_site_mw < 40)).all(), per_site_mw
    site_loading = branches[branches["branch"].astype(str).isin(site_trafos)]["loading_pct"]
    assert 0 < site_loading.max() < 100
    assert 0.9 <= summary["v_min_pu"] and summary["v_max_pu"] <= 1.1

"""The bundled trace library: contents, metadata, stored curve fits, lookup errors and formats."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from openg2g.core.errors import TraceError
from openg2g.core.interfaces import StoredCurve
from openg2g.datacenter.library import TraceLibrary
from openg2g.datacenter.replay import ReplayDatacenter

from .conftest import REFERENCE, site_spec, synthetic_library


def test_bundled_library_holds_the_five_models(library: TraceLibrary) -> None:
    assert library.dt_s == pytest.approx(0.1)
    assert library.models() == sorted(m for m, *_ in REFERENCE)
    for model, gpus, *_ in REFERENCE:
        assert library.gpus(model) == (gpus,)
        batches = library.batch_sizes(model, gpus)
        assert {8, 16, 32, 64, 96, 128, 192, 256, 384, 512} <= set(batches)


def test_every_config_is_consistent(library: TraceLibrary) -> None:
    for c in library.configs():
        power = library.power(c.model, c.gpus, c.batch)
        assert power.size == c.samples
        assert not power.flags.writeable
        assert np.all(np.isfinite(power))
        assert 20 * c.gpus < power.min() and power.max() < 1200 * c.gpus
        assert c.mean_power_w == pytest.approx(power.mean(), rel=1e-6)
        assert c.itl is not None and c.median_itl_s is not None and c.p99_itl_s is not None
        assert c.itl.loc_s < c.median_itl_s < c.p99_itl_s
        assert c.itl.cdf(c.median_itl_s) == pytest.approx(0.5, abs=1e-6)
        assert c.throughput_tok_s is not None and c.throughput_tok_s > 0
        assert c.throughput_source in ("leaderboard", "itl_fit")


def test_mixture_moments_match_sampling(library: TraceLibrary) -> None:
    mix = library.config("Llama-3.1-70B", 4, 128).itl
    assert mix is not None
    rng = np.random.default_rng(0)
    n = 400_000
    samples = mix.sample_s(rng.random(n), rng.standard_normal(n))
    assert samples.mean() == pytest.approx(mix.mean_s(), rel=0.01)
    assert np.median(samples) == pytest.approx(mix.quantile_s(0.5), rel=0.01)
    # Time-weighted samples, weighted by their tokens (1 / ITL), give back the per-token mean.
    timed = mix.time_weighted_sample_s(rng.random(n), rng.standard_normal(n))
    assert n / np.sum(1.0 / timed) == pytest.approx(mix.mean_s(), rel=0.01)
    assert timed.mean() > mix.mean_s()


def test_unknown_configuration_names_valid_ones(library: TraceLibrary) -> None:
    with pytest.raises(TraceError, match="unknown model 'GPT-5'"):
        library.config("GPT-5", 1, 8)
    with pytest.raises(TraceError, match=r"measured: \[1\]"):
        library.config("Llama-3.1-8B", 2, 8)
    with pytest.raises(TraceError, match=r"batch size 100.*measured: \[8, 16"):
        library.power("Llama-3.1-8B", 1, 100)


def test_missing_or_corrupt_library_is_refused(tmp_path) -> None:
    with pytest.raises(TraceError, match="index.json: trace library file not found"):
        TraceLibrary.load(tmp_path)
    (tmp_path / "index.json").write_text("{not json")
    (tmp_path / "power.npz").write_bytes(b"")
    with pytest.raises(TraceError, match="malformed trace index"):
        TraceLibrary.load(tmp_path)


def test_stored_fits_reach_controllers_only_for_their_grid(library: TraceLibrary) -> None:
    grid = [8, 16, 32, 64, 128, 256, 512]
    site = ReplayDatacenter.from_spec(
        site_spec(
            [
                {"model": "Llama-3.1-8B", "gpus_per_replica": 1, "replicas": 8, "batch_size": 128, "batch_sizes": grid},
                {
                    "model": "Llama-3.1-70B",
                    "gpus_per_replica": 4,
                    "replicas": 2,
                    "batch_size": 8,
                    "batch_sizes": [8, 16],
                },
            ]
        ),
        library,
    )
    models = site.info().models
    assert models["Llama-3.1-8B"].curve_fits == library.curve_fits("Llama-3.1-8B", 1, tuple(grid))
    assert models["Llama-3.1-8B"].curve_fits is not None
    assert models["Llama-3.1-8B"].curve_fits.batch_sizes == tuple(grid)
    assert models["Llama-3.1-70B"].curve_fits is None  # no stored fit on that grid: controllers fit it


def _write_index(folder: Path, index: dict) -> None:
    (folder / "index.json").write_text(json.dumps(index))


def test_format_1_library_without_fits_still_loads(tmp_path: Path) -> None:
    lib = synthetic_library(tmp_path, {("M", 1, b): np.full(10, 100.0 + b) for b in (8, 16, 32, 64)})
    assert lib.index.format == "openg2g-traces/2" and lib.index.curve_fits == []
    index = json.loads((tmp_path / "index.json").read_text())
    index["format"] = "openg2g-traces/1"
    del index["curve_fits"]
    _write_index(tmp_path, index)
    old = TraceLibrary.load(tmp_path)
    assert old.index.format == "openg2g-traces/1"
    assert old.curve_fits("M", 1, (8, 16, 32, 64)) is None
    assert old.power("M", 1, 8)[0] == 108.0


LOGISTIC = {"logistic": [1.0, 2.0, 3.0, 4.0]}
LINE = {"logistic": None, "pchip": [[0.0], [0.0], [1.0], [108.0]]}  # the straight line through (3, 108), (4, 116)


@pytest.mark.parametrize(
    ("fits", "fmt", "match"),
    [
        ([{}], "openg2g-traces/1", "curve_fits need format openg2g-traces/2"),
        (
            [{"batch_sizes": [8, 16, 24], "power_w": LOGISTIC, "itl_s": LOGISTIC, "throughput_tok_s": LOGISTIC}],
            "openg2g-traces/2",
            r"curve_fits.0: M on 1 GPUs has no configuration at batch \[24\]",
        ),
        ([{"batch_sizes": [16, 8]}], "openg2g-traces/2", "strictly ascending"),
        ([{}, {}], "openg2g-traces/2", r"curve_fits.1: .* listed twice"),
        ([{"power_w": {"logistic": [1.0, "NaN", 1.0, 1.0]}}], "openg2g-traces/2", "must be finite"),
        ([{"power_w": {"logistic": [1.0, 1.0, 1.0, 1.0], "pchip": LINE["pchip"]}}], "openg2g-traces/2", "exactly one"),
        ([{"power_w": {"pchip": [[0.0], [1.0], [108.0]]}}], "openg2g-traces/2", "pchip needs 4 rows of 1"),
    ],
)
def test_bad_stored_fits_are_refused(tmp_path: Path, fits: list[dict], fmt: str, match: str) -> None:
    synthetic_library(tmp_path, {("M", 1, b): np.full(10, 100.0 + b) for b in (8, 16)})
    index = json.loads((tmp_path / "index.json").read_text())
    base = {"model": "M", "gpus": 1, "batch_sizes": [8, 16], "power_w": LINE, "itl_s": LINE, "throughput_tok_s": LINE}
    index["format"] = fmt
    index["curve_fits"] = [{**base, **f} for f in fits]
    _write_index(tmp_path, index)
    with pytest.raises(TraceError, match="(?s)index.json: malformed trace index: .*" + match):
        TraceLibrary.load(tmp_path)
    index["format"] = "openg2g-traces/2"
    index["curve_fits"] = [base]  # the same entry, valid
    _write_index(tmp_path, index)
    stored = TraceLibrary.load(tmp_path).curve_fits("M", 1, (8, 16))
    assert stored is not None and stored.power_w == StoredCurve(pchip=((0.0,), (0.0,), (1.0,), (108.0,)))


def test_a_library_is_read_again_only_when_its_files_change(tmp_path: Path) -> None:
    first = synthetic_library(tmp_path, {("M", 1, 8): np.full(10, 100.0)})
    assert TraceLibrary.load(tmp_path) is first  # unchanged files: the same immutable object
    second = synthetic_library(tmp_path, {("M", 1, 8): np.full(12, 200.0)})
    assert second is not first
    assert second.power("M", 1, 8).tolist() == [200.0] * 12
    assert first.power("M", 1, 8).tolist() == [100.0] * 10

"""The bundled trace library: contents, metadata and lookup errors."""

from __future__ import annotations

import numpy as np
import pytest

from openg2g.core.errors import TraceError
from openg2g.datacenter.library import TraceLibrary

from .conftest import REFERENCE


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

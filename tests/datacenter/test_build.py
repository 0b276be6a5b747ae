"""Building a library from ML.ENERGY-shaped data, with curve fits; the committed library is what the build makes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from openg2g.controllers.curves import LogisticCurve
from openg2g.core.errors import TraceError
from openg2g.core.interfaces import StoredCurve
from openg2g.core.paths import bundled_dir
from openg2g.datacenter.build import FIT_GRIDS, LEADERBOARD_FILES, build_library, fit_library
from openg2g.datacenter.fits import logistic
from openg2g.datacenter.library import TraceConfig, TraceLibrary
from tests.fit_noise import assert_same_predictions, library_curves

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
FIT = "0.005,0.9,0.1,0.01,0.1,0.5,0.05"


def _source(root: Path, power_w: float = 400.0) -> Path:
    traces = root / "mlenergy-h100-traces"
    (traces / "traces").mkdir(parents=True)
    rows = ["model_label,num_gpus,max_num_seqs,trace_file"]
    for batch in (8, 16):
        name = f"traces/Llama-3.1-8B_num_gpus_1_max_num_seqs_{batch}.csv"
        rows.append(f"Llama-3.1-8B,1,{batch},{name}")
        t = np.arange(100) * 0.1
        p = power_w + batch + 5 * np.sin(t)
        (traces / name).write_text("relative_time_s,power_total_W\n" + "".join(f"{a},{b}\n" for a, b in zip(t, p)))
    (traces / "traces_summary.csv").write_text("\n".join(rows) + "\n")
    header = "model_label,max_num_seqs,itl_dist,itl_mix_loc,itl_mix_pi_steady,itl_mix_sigma_steady,"
    header += "itl_mix_scale_steady,itl_mix_pi_stall,itl_mix_sigma_stall,itl_mix_scale_stall"
    fits = [header] + [f"Llama-3.1-8B,{b},lognormal_mixture_2,{FIT}" for b in (8, 16)]
    (traces / "latency_fits.csv").write_text("\n".join(fits) + "\n")
    board = root / "mlenergy-leaderboard"
    board.mkdir()
    entry = {
        "gpu_model": "H100",
        "num_gpus": 1,
        "max_num_seqs": 8,
        "avg_power_watts": 408.0,
        "output_throughput_tokens_per_sec": 500.0,
        "avg_batch_size": 8.0,
        "avg_output_len": 300.0,
        "median_itl_ms": 16.0,
        "p99_itl_ms": 40.0,
    }
    other = {**entry, "gpu_model": "B200", "avg_power_watts": 1.0}
    (board / LEADERBOARD_FILES["Llama-3.1-8B"]).write_text(json.dumps({"configurations": [entry, other]}))
    return root


def test_build_attaches_measurements(tmp_path: Path) -> None:
    configs = build_library(_source(tmp_path / "src"), tmp_path / "lib")
    lib = TraceLibrary.load(tmp_path / "lib")
    assert [c.batch for c in lib.configs()] == [8, 16] and len(configs) == 2
    b8, b16 = lib.config("Llama-3.1-8B", 1, 8), lib.config("Llama-3.1-8B", 1, 16)
    assert b8.throughput_source == "leaderboard" and b8.throughput_tok_s == 500.0
    assert b8.leaderboard_avg_power_w == 408.0 and b8.leaderboard_p99_itl_s == pytest.approx(0.040)
    assert b8.mean_power_w == pytest.approx(408.0, abs=1.0)
    # No leaderboard entry at 16: throughput from the ITL fit with batch 8's measured efficiency.
    assert b16.throughput_source == "itl_fit" and b16.leaderboard_avg_power_w is None
    assert b8.mean_itl_s is not None and b16.mean_itl_s is not None
    k = 500.0 * b8.mean_itl_s / 8.0
    assert b16.throughput_tok_s == pytest.approx(k * 16 / b16.mean_itl_s)
    assert b16.avg_output_len_tokens == 300.0
    assert lib.power("Llama-3.1-8B", 1, 16).size == 100
    text = (tmp_path / "lib" / "PROVENANCE.md").read_text()
    assert "Apache-2.0" in text and "latency_fits.csv" in text


def test_build_refuses_implausible_source(tmp_path: Path) -> None:
    src = _source(tmp_path / "src", power_w=5000.0)
    with pytest.raises(TraceError, match=r"max_num_seqs_8\.csv: row 2: .* per GPU, outside"):
        build_library(src, tmp_path / "lib")


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="ML.ENERGY source data not present (fresh clone)")
def test_committed_library_is_what_the_build_makes(tmp_path: Path) -> None:
    build_library(SHARED, tmp_path / "traces")
    stale = "is stale: run openg2g traces build --source ../shared/data --out traces"
    for name in ("power.npz", "PROVENANCE.md"):
        assert (tmp_path / "traces" / name).read_bytes() == (bundled_dir("traces") / name).read_bytes(), (
            f"traces/{name} {stale}"
        )
    built = json.loads((tmp_path / "traces" / "index.json").read_text())
    committed = json.loads((bundled_dir("traces") / "index.json").read_text())
    # the curve fits by what they predict, within the data's scatter (their parameters differ from
    # host to host: tests/fit_noise.py), the rest exactly
    fits_built, fits_committed = built.pop("curve_fits"), committed.pop("curve_fits")
    assert built == committed, f"traces/index.json {stale}"
    grids = [(f["model"], f["gpus"], tuple(f["batch_sizes"])) for f in fits_committed]
    assert [(f["model"], f["gpus"], tuple(f["batch_sizes"])) for f in fits_built] == grids, f"traces/index.json {stale}"
    ours, theirs = TraceLibrary.load(tmp_path / "traces"), TraceLibrary.load(bundled_dir("traces"))
    for model, gpus, batch_sizes in grids:
        x, ys, committed_curves = library_curves(theirs, model, gpus, batch_sizes)
        built_curves = library_curves(ours, model, gpus, batch_sizes)[2]
        for name, y in ys.items():
            where = f"traces/index.json curve_fits {model} {batch_sizes} {name}"
            assert_same_predictions(getattr(committed_curves, name), getattr(built_curves, name), x, y, where)


def test_build_stores_curve_fits_of_the_measured_sizes(tmp_path: Path) -> None:
    build_library(_source(tmp_path / "src"), tmp_path / "lib")
    lib = TraceLibrary.load(tmp_path / "lib")
    b8, b16 = (lib.config("Llama-3.1-8B", 1, b) for b in (8, 16))
    # two batch sizes are too few for a four-parameter logistic: the stored curves are the straight
    # lines through the two means (x = log2(batch) = 3, 4), as PCHIP cubics
    stored = lib.curve_fits("Llama-3.1-8B", 1, (8, 16))
    assert stored is not None
    for curve, y8, y16 in (
        (stored.power_w, b8.mean_power_w, b16.mean_power_w),
        (stored.itl_s, b8.mean_itl_s, b16.mean_itl_s),
        (stored.throughput_tok_s, b8.throughput_tok_s, b16.throughput_tok_s),
    ):
        assert y8 is not None and y16 is not None
        assert curve == StoredCurve(pchip=((0.0,), (0.0,), (y16 - y8,), (y8,)))


def _config(model: str, batch: int, power_w: float, itl_s: float | None, throughput: float | None) -> TraceConfig:
    return TraceConfig(
        model=model,
        gpus=1,
        batch=batch,
        samples=2,
        duration_s=0.2,
        mean_power_w=power_w,
        source="synthetic",
        mean_itl_s=itl_s,
        throughput_tok_s=throughput,
    )


def test_fit_library_fits_the_measured_sizes_and_the_scenario_grid() -> None:
    # exact logistics in x = log2(batch): (l_span, x0, k, b0) of power (W), ITL (s), throughput (tok/s)
    true = {
        "power_w": (400.0, 6.0, 1.0, 300.0),
        "itl_s": (0.05, 8.0, 1.5, 0.01),
        "throughput_tok_s": (5000.0, 6.0, 1.0, 100.0),
    }
    batches = (8, 16, 32, 64, 96, 128, 256, 512)
    x = np.log2(np.array(batches, dtype=float))
    p, itl, tput = (logistic(x, *true[name]) for name in ("power_w", "itl_s", "throughput_tok_s"))
    configs = [_config("M", b, float(p[i]), float(itl[i]), float(tput[i])) for i, b in enumerate(batches)]
    configs += [_config("N", b, 500.0, None, None) for b in FIT_GRIDS[0]]  # imported: no latency, no fit
    fits = fit_library(configs)
    assert [(f.model, f.batch_sizes) for f in fits] == [("M", batches), ("M", FIT_GRIDS[0])]
    for f in fits:
        grid = np.log2(np.array(f.batch_sizes, dtype=float))
        for name, params in true.items():
            fitted = getattr(f, name).logistic
            assert fitted is not None, (f.batch_sizes, name)
            # by what the fit predicts (its parameters' last digits vary from host to host):
            # exact points leave no scatter, so the two curves agree to the solver's own stop
            exact = LogisticCurve(*params)
            assert_same_predictions(exact, LogisticCurve(*fitted), grid, exact.value(grid), f"{f.batch_sizes} {name}")

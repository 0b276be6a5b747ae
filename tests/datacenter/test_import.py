"""Importing raw power logs: good logs are resampled to 0.1 s; bad ones are refused naming file and row."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import threading
import tracemalloc
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from openg2g.cli.main import main
from openg2g.core.errors import TraceError
from openg2g.datacenter import build
from openg2g.datacenter.build import fit_library, import_trace, resample, write_library
from openg2g.datacenter.library import TraceLibrary

from .conftest import synthetic_library

HEADER = "timestamp\trelative_time_s\tpower_total_W\tmax_num_seqs\tnum_gpus\tfolder_name\n"
_M_8_512 = ["--model", "M", "--gpus", "8", "--batch", "512"]


def _tsv(path: Path, rows: list[tuple[float, float]], gpus: int = 8, batch: int = 512) -> Path:
    lines = [f"1763561240\t{t}\t{p}\t{batch}\t{gpus}\trun" for t, p in rows]
    path.write_text(HEADER + "\n".join(lines) + "\n")
    return path


def _good_rows(n: int = 50) -> list[tuple[float, float]]:
    return [(0.06 + 0.1 * i, 4000.0 + 10 * (i % 7)) for i in range(n)]


def test_tsv_import_resamples_and_lists(tmp_path: Path) -> None:
    src = _tsv(tmp_path / "run.tsv", _good_rows())
    cfg = import_trace(src, tmp_path / "lib", "M", 8, 512)
    lib = TraceLibrary.load(tmp_path / "lib")
    power = lib.power("M", 8, 512)
    assert cfg.samples == power.size == 50
    assert power[0] == pytest.approx(4000.0)
    assert cfg.itl is None and cfg.source == "run.tsv"


def test_resample_interpolates_onto_the_grid() -> None:
    out = resample(np.array([5.0, 5.25, 5.5]), np.array([100.0, 200.0, 300.0]))
    np.testing.assert_allclose(out, [100.0, 140.0, 180.0, 220.0, 260.0, 300.0])


def test_nvidia_smi_import_sums_gpus(tmp_path: Path) -> None:
    lines = ["timestamp, power.draw [W]"]
    for i in range(30):
        stamp = f"2025/01/01 12:00:{i // 10:02d}.{(i % 10) * 100:03d}"
        lines += [f"{stamp}, 300.00 W", f"{stamp}, 310.50 W"]
    src = tmp_path / "smi.csv"
    src.write_text("\n".join(lines) + "\n")
    cfg = import_trace(src, tmp_path / "lib", "M", 2, 64, "nvidia-smi")
    assert cfg.mean_power_w == pytest.approx(610.5)
    assert cfg.samples == 30


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([*_good_rows(5), (0.6, float("nan")), *_good_rows(3)], r"row 7: power is not a finite number"),
        ([(0.0, 4000.0), (0.1, 4000.0), (0.05, 4000.0)], r"row 4: time 0.05 s does not increase"),
        ([(0.0, 4000.0), (0.1, 12000.0)], r"row 3: 12000.0 W over 8 GPUs is 1500.0 W per GPU"),
        ([(0.0, 4000.0), (0.1, 80.0)], r"row 3: .* outside the plausible 20-1200 W"),
    ],
)
def test_bad_tsv_is_refused_with_file_and_row(tmp_path: Path, rows: list[tuple[float, float]], match: str) -> None:
    src = _tsv(tmp_path / "bad.tsv", rows)
    with pytest.raises(TraceError, match=r"bad\.tsv: " + match):
        import_trace(src, tmp_path / "lib", "M", 8, 512)
    assert not (tmp_path / "lib").exists()


def test_gpu_count_must_match_the_log(tmp_path: Path) -> None:
    src = _tsv(tmp_path / "run.tsv", _good_rows(), gpus=8)
    with pytest.raises(TraceError, match=r"run\.tsv: row 2: num_gpus is 8, but --gpus 4"):
        import_trace(src, tmp_path / "lib", "M", 4, 512)
    smi = tmp_path / "smi.csv"
    smi.write_text("2025/01/01 12:00:00.000, 300 W\n2025/01/01 12:00:00.000, 300 W\n2025/01/01 12:00:00.100, 300 W\n")
    with pytest.raises(TraceError, match=r"smi\.csv: row 3: timestamp has 1 GPU readings, but --gpus 2"):
        import_trace(smi, tmp_path / "lib", "M", 2, 64, "nvidia-smi")
    smi.write_text("2025/01/01 12:00:00.000, 300 W\n2025/01/01 12:00:00.100, 5 W\n")
    with pytest.raises(TraceError, match=r"smi\.csv: row 2: 5.0 W over 1 GPUs"):
        import_trace(smi, tmp_path / "lib", "M", 1, 64, "nvidia-smi")


def test_cli_import_error_exits_2_with_one_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _tsv(tmp_path / "bad.tsv", [(0.0, 4000.0), (0.1, float("nan"))])
    code = main(
        [
            "traces",
            "import",
            str(src),
            "--library",
            str(tmp_path / "lib"),
            "--model",
            "M",
            "--gpus",
            "8",
            "--batch",
            "512",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "bad.tsv: row 3" in err


def test_cli_list_json_has_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["traces", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 50
    for key in (
        "model",
        "gpus",
        "batch",
        "mean_power_w",
        "median_itl_s",
        "p99_itl_s",
        "throughput_tok_s",
        "duration_s",
    ):
        assert key in rows[0]


def test_imported_trace_replays_without_latency_data(tmp_path: Path) -> None:
    from openg2g.datacenter import ReplayDatacenter

    from .conftest import site_spec

    src = _tsv(tmp_path / "run.tsv", _good_rows(200))
    import_trace(src, tmp_path / "lib", "M", 8, 512)
    lib = TraceLibrary.load(tmp_path / "lib")
    dc = ReplayDatacenter.from_spec(
        site_spec([{"model": "M", "gpus_per_replica": 8, "replicas": 3, "batch_size": 512}]), lib
    )
    state = dc.step(0.1, 0.1).models["M"]
    assert 3 * 4000 <= state.power_w <= 3 * 4060
    assert np.isnan(state.itl_s) and np.isnan(state.throughput_tok_s)
    assert "run.tsv" in (tmp_path / "lib" / "PROVENANCE.md").read_text()


def test_a_run_on_an_imported_trace_keeps_its_summary_with_the_unknown_figures_null(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trace has no ITL or throughput: the run completes and says which figures it lacks and why
    (its throughput used to be NaN, which summary.json cannot hold: rc 1 after every step)."""
    import_trace(_tsv(tmp_path / "run.tsv", _good_rows(200)), tmp_path / "lib", "M", 8, 512)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: imported\nduration_s: 5\ngrid: {feeder: openg2g-ieee13}\noutputs: {plots: false}\n"
        "datacenters:\n  - name: dc1\n    bus: '671'\n    traces: lib\n"
        "    models: [{model: M, gpus_per_replica: 8, replicas: 3, batch_size: 512}]\n"
    )
    assert main(["run", str(scenario), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["energy_mwh"] > 0
    assert summary["mean_throughput_tok_s"] is None and summary["itl_deadline_miss_fraction"] is None
    why = "no throughput or ITL data for M at site dc1 (a trace imported without latency metadata)"
    assert summary["unavailable_figures"] == {"mean_throughput_tok_s": why, "itl_deadline_miss_fraction": why}
    header, _, row = out.splitlines()[1:4]  # after the site's line
    cells = dict(zip(re.split(r"\s{2,}", header.strip()), row.split()))
    assert cells["throughput (tok/s)"] == cells["ITL misses (%)"] == "n/a"
    assert f"warning: mean_throughput_tok_s is not available (null in summary.json): {why}" in err


def test_library_files_are_byte_reproducible(tmp_path: Path) -> None:
    src = _tsv(tmp_path / "run.tsv", _good_rows())
    import_trace(src, tmp_path / "a", "M", 8, 512)
    import_trace(src, tmp_path / "b", "M", 8, 512)
    for name in ("index.json", "power.npz"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def _zeus(path: Path, start: str, rows: Sequence[tuple[int, float]]) -> Path:
    """A Zeus power monitor log: readings ``(ns after start, milliwatts)``; ``start`` whole seconds, UTC."""
    t0 = datetime.strptime(start, "%Y-%m-%d %H:%M:%S")
    lines = ["Time,Power"]
    for ns, mw in rows:
        stamp = (t0 + timedelta(seconds=ns // 1_000_000_000)).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"{stamp}.{ns % 1_000_000_000:09d},{mw:.0f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_zeus_log_is_read_in_milliwatts(tmp_path: Path) -> None:
    # one GPU ramping 200 -> 400 W over 2 s, read every 50 ms, across a minute boundary
    rows = [(50_000_000 * i, 200_000 + 5_000 * i) for i in range(41)]
    src = _zeus(tmp_path / "gpu0.csv", "2022-07-13 02:07:59", rows)
    cfg = import_trace([src], tmp_path / "lib", "M", 1, 64, "zeus")
    assert cfg.samples == 21 and cfg.duration_s == pytest.approx(2.1)
    assert cfg.mean_power_w == pytest.approx(300.0, rel=1e-9)
    power = TraceLibrary.load(tmp_path / "lib").power("M", 1, 64)
    assert power[0] == pytest.approx(200.0) and power[-1] == pytest.approx(400.0)


def test_zeus_logs_of_two_gpus_are_summed_over_their_common_span(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gpu0 = _zeus(tmp_path / "gpu0.csv", "2022-07-13 02:07:36", [(100_000_000 * i, 250_000) for i in range(31)])
    # polled by another thread: readings 55 ms later, from 0.55 s to 2.55 s
    gpu1 = _zeus(
        tmp_path / "gpu1.csv", "2022-07-13 02:07:36", [(550_000_000 + 100_000_000 * i, 350_000) for i in range(21)]
    )
    args = ["traces", "import", str(gpu0), str(gpu1), "--format", "zeus", "--library", str(tmp_path / "lib")]
    assert main([*args, "--model", "M", "--gpus", "2", "--batch", "64"]) == 0
    assert "gpu0.csv" in capsys.readouterr().out
    cfg = TraceLibrary.load(tmp_path / "lib").config("M", 2, 64)
    assert cfg.samples == 21  # the 2.0 s both logs cover
    assert cfg.mean_power_w == pytest.approx(600.0, rel=1e-12)
    assert cfg.source == "gpu0.csv, gpu1.csv"


def test_bad_zeus_logs_are_refused_with_file_and_row(tmp_path: Path) -> None:
    good = [(100_000_000 * i, 300_000) for i in range(10)]
    src = _zeus(tmp_path / "z.csv", "2022-07-13 02:07:36", good)
    src.write_text(src.read_text().replace("Time,Power", "timestamp,power"))
    with pytest.raises(TraceError, match=r"z\.csv: row 1: expected the Zeus header 'Time,Power'"):
        import_trace([src], tmp_path / "lib", "M", 1, 64, "zeus")
    src = _zeus(tmp_path / "z.csv", "2022-07-13 02:07:36", good)
    src.write_text(src.read_text() + "2022-07-13 02:07:37.1,abc\n")
    with pytest.raises(TraceError, match=r"z\.csv: row 12: expected 'YYYY-MM-DD HH:MM:SS.fffffffff,<milliwatts>'"):
        import_trace([src], tmp_path / "lib", "M", 1, 64, "zeus")
    src = _zeus(tmp_path / "z.csv", "2022-07-13 02:07:36", [(0, 300_000), (100_000_000, 5_000)])
    with pytest.raises(TraceError, match=r"z\.csv: row 3: 5.0 W over 1 GPUs is 5.0 W per GPU, outside"):
        import_trace([src], tmp_path / "lib", "M", 1, 64, "zeus")
    src = _zeus(tmp_path / "z.csv", "2022-07-13 02:07:36", good)
    with pytest.raises(TraceError, match=r"format zeus takes one log per GPU \(--gpus 2\), got 1"):
        import_trace([src], tmp_path / "lib", "M", 2, 64, "zeus")
    late = _zeus(tmp_path / "late.csv", "2022-07-13 02:08:36", good)
    with pytest.raises(TraceError, match=r"late\.csv: the GPUs' logs do not overlap in time"):
        import_trace([src, late], tmp_path / "lib", "M", 2, 64, "zeus")
    assert not (tmp_path / "lib").exists()


def test_a_log_spanning_a_billion_seconds_is_refused(tmp_path: Path) -> None:
    # resampled to 0.1 s this would be 1e10 samples (40 GB): refused before anything is allocated
    src = _tsv(tmp_path / "long.tsv", [(0.0, 4000.0), (1e9, 4000.0)])
    with pytest.raises(
        TraceError, match=r"long\.tsv: rows 2-3 span 1e\+09 s, longer than the 86400 s a trace may last"
    ):
        import_trace(src, tmp_path / "lib", "M", 8, 512)
    zeus = tmp_path / "z.csv"
    zeus.write_text("Time,Power\n1990-07-13 02:07:36.000000000,300000\n2022-07-13 02:07:36.000000000,300000\n")
    with pytest.raises(TraceError, match=r"z\.csv: rows 2-3 span 1\.00984e\+09 s, longer than the 86400 s"):
        import_trace([zeus], tmp_path / "lib", "M", 1, 64, "zeus")
    assert not (tmp_path / "lib").exists()


class _Fifo:
    """A named pipe fed from a thread with the chunks of ``chunks`` (an endless stream, as
    ``/dev/zero`` or a log still being written is) until the reader closes it; ``written`` counts
    the bytes the reader took (a pipe holds at most 64 KiB that no one read)."""

    def __init__(self, path: Path, chunks: Iterator[bytes]):
        os.mkfifo(path)
        self.path = path
        self.written = 0
        self._thread = threading.Thread(target=self._feed, args=(chunks,), daemon=True)
        self._thread.start()

    def _feed(self, chunks: Iterator[bytes]) -> None:
        fd = os.open(self.path, os.O_WRONLY)  # waits for the reader
        try:
            for chunk in chunks:
                self.written += os.write(fd, chunk)
        except BrokenPipeError:  # the reader stopped: what this test wants
            pass
        finally:
            os.close(fd)

    def join(self) -> None:
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the reader never stopped reading"


def _rows_forever(step_s: float, header: bool = True) -> Iterator[bytes]:
    """TSV rows at ``step_s`` apart, 1,000 a chunk, without end (but for a million: a reader that
    reads to the end must end too, for the test to fail rather than hang before the fix)."""
    if header:
        yield HEADER.encode()
    for start in range(0, 1_000_000, 1000):
        yield "".join(
            f"1763561240\t{step_s * i:.3f}\t4000.0\t512\t8\trun\n" for i in range(start, start + 1000)
        ).encode()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_stream_without_line_ends_is_refused_at_its_first_row_in_bounded_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log like /dev/zero: NUL bytes without a line end. It used to be read whole before any check
    (memory grew without bound); now its first row is refused once past the longest line a log may
    have, having read 4 KiB of it."""
    fifo = _Fifo(tmp_path / "zero", itertools.repeat(b"\0" * 65536, 1024))  # 64 MiB, if it were read whole
    tracemalloc.start()
    try:
        code = main(["traces", "import", str(fifo.path), "--library", str(tmp_path / "lib"), *_M_8_512])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    fifo.join()
    assert code == 2
    assert capsys.readouterr().err == (
        f"error: {fifo.path}: row 1: longer than 4,096 bytes, the longest line a log may have; is it a text log?\n"
    )
    assert fifo.written < 1 << 20 and peak < 4 << 20
    assert not (tmp_path / "lib").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_log_with_too_many_rows_is_refused_at_the_limit_without_reading_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "MAX_LOG_ROWS", 5000)  # 8.64 million: too slow to write for a test
    fifo = _Fifo(tmp_path / "rows.tsv", _rows_forever(0.001))
    with pytest.raises(
        TraceError,
        match=rf"^{re.escape(str(fifo.path))}: more than 5,000 rows, the most a log may have \(a day of readings every "
        r"10 ms\); is it one replica's power log\?$",
    ):
        import_trace(fifo.path, tmp_path / "lib", "M", 8, 512)
    fifo.join()
    assert fifo.written < 5000 * 40 + (1 << 20)  # the limit's rows, what the pipe held, one chunk


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_log_is_refused_at_the_row_that_passes_a_day_and_at_its_size_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = _Fifo(tmp_path / "slow.tsv", _rows_forever(1000.0))  # a row every 1,000 s: row 89 is at 87,000 s
    with pytest.raises(
        TraceError, match=r"slow\.tsv: rows 2-89 span 87000 s, longer than the 86400 s a trace may last"
    ):
        import_trace(fifo.path, tmp_path / "lib", "M", 8, 512)
    fifo.join()
    monkeypatch.setattr(build, "MAX_LOG_BYTES", 100_000)
    fifo = _Fifo(tmp_path / "big.tsv", _rows_forever(0.001))
    with pytest.raises(TraceError, match=r"big\.tsv: row \d+: larger than 100,000 bytes, the most a log may hold"):
        import_trace(fifo.path, tmp_path / "lib", "M", 8, 512)
    fifo.join()
    assert fifo.written < 100_000 + (1 << 20)


def test_an_imported_logs_hash_is_that_of_its_bytes(tmp_path: Path) -> None:
    src = _tsv(tmp_path / "run.tsv", _good_rows())
    assert (
        import_trace(src, tmp_path / "lib", "M", 8, 512).source_sha256 == hashlib.sha256(src.read_bytes()).hexdigest()
    )


@pytest.mark.slow
def test_import_drops_the_stored_fits_of_the_imported_model_only(tmp_path: Path) -> None:
    grid = (8, 16, 32, 64, 128, 256, 512)
    lib = synthetic_library(tmp_path / "lib", {(m, 8, b): np.full(20, 3000.0 + b) for m in ("M", "N") for b in grid})
    configs = lib.configs()
    arrays = {c.key: lib.power(c.model, c.gpus, c.batch) for c in configs}
    write_library(tmp_path / "lib", configs, arrays, fit_library(configs))
    before = TraceLibrary.load(tmp_path / "lib")
    assert before.curve_fits("M", 8, grid) is not None and before.curve_fits("N", 8, grid) is not None
    import_trace(_tsv(tmp_path / "run.tsv", _good_rows()), tmp_path / "lib", "M", 8, 512)
    after = TraceLibrary.load(tmp_path / "lib")
    assert after.curve_fits("M", 8, grid) is None  # M's means changed: controllers refit it
    assert after.curve_fits("N", 8, grid) == before.curve_fits("N", 8, grid)

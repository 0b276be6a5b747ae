"""Build the trace library from the public ML.ENERGY data, and import raw power logs into a library.

``openg2g traces build --source DATA --out traces`` calls :func:`build_library`:

1. For each row of ``mlenergy-h100-traces/traces_summary.csv`` read the (model, GPUs, max_num_seqs)
   power timeline (``relative_time_s, power_total_W``), check it (:func:`check_power`) and resample
   it onto a 0.1 s grid starting at 0 s by linear interpolation (:func:`resample`); store float32.
2. Attach the two-component lognormal ITL mixture of ``latency_fits.csv`` for (model, max_num_seqs)
   and derive its mean, median and p99 per-token ITL.
3. Attach the ML.ENERGY Leaderboard H100 entry of the same model, num_gpus and max_num_seqs
   (``mlenergy-leaderboard/<repo>__lm-arena-chat.json``, model files in :data:`LEADERBOARD_FILES`):
   output throughput, avg_power_watts, median/p99 ITL, avg_batch_size, avg_output_len. When the
   leaderboard holds two entries for one configuration (repeated runs), the one whose
   avg_power_watts is closest to the trace mean is used. Configurations without an entry get
   throughput ``k * batch / mean_ITL`` from their own ITL fit (``throughput_source = "itl_fit"``),
   where ``k = throughput * mean_ITL / avg_batch_size`` of the largest leaderboard-measured
   batch of the same model and GPUs (k < 1: time spent in prefill and scheduling); their mean
   output length is taken from that same entry.
4. Fit the controllers' curves (:mod:`openg2g.datacenter.fits`) of each (model, GPUs) on its
   measured batch sizes and on each grid of :data:`FIT_GRIDS` it was measured at, and store them
   in ``index.json`` (:class:`~openg2g.datacenter.library.StoredFits`).

:func:`import_trace` reads a raw log (``tsv``: the benchmark's raw timeline format;
``nvidia-smi``: ``nvidia-smi --query-gpu=timestamp,power.draw --format=csv``; ``zeus``: the Zeus
power monitor's ``Time,Power`` CSV, one per GPU, power in mW), checks and resamples it the same
way and adds it to a library folder (creating it if needed).
"""

from __future__ import annotations

import calendar
import csv
import functools
import hashlib
import io
import itertools
import json
import math
import zipfile
from array import array
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

import numpy as np

from openg2g.core.atomic import write_json_atomic, write_text_atomic
from openg2g.core.errors import TraceError
from openg2g.datacenter.fits import fit_model
from openg2g.datacenter.library import (
    FORMAT,
    INDEX_FILE,
    POWER_FILE,
    ItlMixture,
    LibraryIndex,
    StoredFits,
    TraceConfig,
    power_key,
)

__all__ = [
    "DT_S",
    "FIT_GRIDS",
    "LEADERBOARD_FILES",
    "MAX_LINE_BYTES",
    "MAX_LOG_BYTES",
    "MAX_LOG_ROWS",
    "MAX_TRACE_S",
    "MAX_W_PER_GPU",
    "MIN_W_PER_GPU",
    "build_library",
    "check_power",
    "check_span",
    "fit_library",
    "import_trace",
    "read_nvidia_smi",
    "read_tsv",
    "read_zeus",
    "resample",
    "write_library",
]

DT_S = 0.1
"""Sample period of every library trace (s)."""

MIN_W_PER_GPU = 20.0
"""Lowest plausible board power of one H100-class GPU (W): below idle (~60-70 W) means a bad reading."""

MAX_W_PER_GPU = 1200.0
"""Highest plausible board power of one GPU (W): above any current board limit (H100 SXM 700 W, B200 1000 W)."""

FIT_GRIDS: tuple[tuple[int, ...], ...] = ((8, 16, 32, 64, 128, 256, 512),)
"""Batch-size grids, besides each model's measured sizes, whose curve fits the library stores:
the bundled scenarios restrict every model to the powers of two from 8 to 512."""

MAX_TRACE_S = 86_400.0
"""Longest timeline a library trace may hold (s): one day, 864,000 samples at 0.1 s (3.5 MB). The
measured traces last 2-75 minutes; a longer span means a wrong timestamp or unit, and resampling it
would allocate ``span / 0.1 s`` samples."""

MAX_LOG_BYTES = 1 << 30
"""Largest raw log :func:`import_trace` reads (bytes, 1 GiB): a day of readings every 10 ms is
~0.5 GB of text. Checked as the log is read, so a stream without end (``/dev/zero``) is refused
before it fills the memory."""

MAX_LOG_ROWS = 8_640_000
"""Most lines a raw log may have: one day (:data:`MAX_TRACE_S`) of readings every 10 ms, ten times
the 100 ms at which nvidia-smi and Zeus usually log (8 GPUs' nvidia-smi lines at 100 ms are 6.9
million a day). Held as two float64 columns, that many samples take 140 MB."""

MAX_LINE_BYTES = 4096
"""Longest line of a raw log (bytes, its end included): a row is a few numbers and names."""

LEADERBOARD_FILES: dict[str, str] = {
    "Llama-3.1-8B": "meta-llama__Llama-3.1-8B-Instruct__lm-arena-chat.json",
    "Llama-3.1-70B": "meta-llama__Llama-3.1-70B-Instruct__lm-arena-chat.json",
    "Llama-3.1-405B": "meta-llama__Llama-3.1-405B-Instruct-FP8__lm-arena-chat.json",
    "Qwen3-30B-A3B": "Qwen__Qwen3-30B-A3B-Instruct-2507__lm-arena-chat.json",
    "Qwen3-235B-A22B": "Qwen__Qwen3-235B-A22B-Instruct-2507__lm-arena-chat.json",
}
"""Trace model label -> leaderboard file of the same checkpoint (405B traces were run in FP8)."""

_DESCRIPTION = (
    "Per-replica GPU power of LLM inference (vLLM, H100 SXM, lm-arena-chat) from the ML.ENERGY "
    "Benchmark v3 and Leaderboard (Apache-2.0); see PROVENANCE.md."
)


def check_power(t_s: np.ndarray, power_w: np.ndarray, gpus: int, file: str, first_row: int = 2) -> None:
    """Refuse a power timeline that is not a plausible measurement.

    :param t_s: sample times (s).
    :param power_w: summed power of ``gpus`` GPUs at each time (W).
    :param gpus: GPUs the samples sum over.
    :param file: file name for messages.
    :param first_row: file row number of sample 0 (1-based, header counted), for messages.
    :raises TraceError: naming the file and row of the first bad sample, or a span over
        :data:`MAX_TRACE_S`.
    """
    if t_s.size < 2:
        raise TraceError(f"{file}: needs at least 2 samples, got {t_s.size}")
    for name, arr in (("time", t_s), ("power", power_w)):
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise TraceError(f"{file}: row {first_row + bad[0]}: {name} is not a finite number")
    back = np.flatnonzero(np.diff(t_s) <= 0)
    if back.size:
        i = back[0] + 1
        raise TraceError(f"{file}: row {first_row + i}: time {t_s[i]} s does not increase (previous {t_s[i - 1]} s)")
    check_span(float(t_s[-1] - t_s[0]), file, first_row, first_row + t_s.size - 1)
    per_gpu = power_w / gpus
    bad = np.flatnonzero((per_gpu < MIN_W_PER_GPU) | (per_gpu > MAX_W_PER_GPU))
    if bad.size:
        i = bad[0]
        raise TraceError(
            f"{file}: row {first_row + i}: {power_w[i]:.1f} W over {gpus} GPUs is {per_gpu[i]:.1f} W per GPU, "
            f"outside the plausible {MIN_W_PER_GPU:.0f}-{MAX_W_PER_GPU:.0f} W"
        )


def check_span(span_s: float, file: str, first_row: int, last_row: int) -> None:
    """Refuse samples from file row ``first_row`` to ``last_row`` that span ``span_s`` (s) over
    :data:`MAX_TRACE_S` (the readers call it at every row, so a log is refused where it passes a day).

    :raises TraceError: naming the file, the rows and the span.
    """
    if span_s > MAX_TRACE_S:
        raise TraceError(
            f"{file}: rows {first_row}-{last_row} span {span_s:.6g} s, longer than the "
            f"{MAX_TRACE_S:.0f} s a trace may last; is a timestamp wrong or in other units?"
        )


class _LogLines:
    """The lines of a raw log, read one at a time and refused as soon as the log passes
    :data:`MAX_LINE_BYTES`, :data:`MAX_LOG_ROWS` or :data:`MAX_LOG_BYTES`: memory stays bounded
    whatever the file (a FIFO, a device, a log gigabytes long).

    :param path: the log.
    :param digest: a SHA-256 fed the log's bytes as they are read (one digest over several logs
        hashes them concatenated in the order read).
    """

    def __init__(self, path: Path, digest: hashlib._Hash | None = None):
        self.path = path
        self.digest = digest

    def __iter__(self) -> Iterator[tuple[int, str]]:
        """``(row, text)`` of each line, rows from 1, the line end removed.

        :raises TraceError: the file cannot be read, a line is not UTF-8 text, or a limit is
            passed (naming the file, the row and the limit).
        """
        path, size = self.path, 0
        try:
            with path.open("rb") as fh:
                for row in itertools.count(1):
                    raw = fh.readline(MAX_LINE_BYTES + 1)
                    if not raw:
                        return
                    if len(raw) > MAX_LINE_BYTES:
                        raise TraceError(
                            f"{path}: row {row}: longer than {MAX_LINE_BYTES:,} bytes, the longest line a log "
                            "may have; is it a text log?"
                        )
                    if row > MAX_LOG_ROWS:
                        raise TraceError(
                            f"{path}: more than {MAX_LOG_ROWS:,} rows, the most a log may have (a day of readings "
                            "every 10 ms); is it one replica's power log?"
                        )
                    size += len(raw)
                    if size > MAX_LOG_BYTES:
                        raise TraceError(
                            f"{path}: row {row}: larger than {MAX_LOG_BYTES:,} bytes, the most a log may hold; "
                            "is it one replica's power log?"
                        )
                    if self.digest is not None:
                        self.digest.update(raw)
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise TraceError(f"{path}: row {row}: unreadable: not UTF-8 text ({exc.reason})") from None
                    yield row, text.rstrip("\r\n")
        except OSError as exc:
            raise TraceError(f"{path}: unreadable: {exc}") from None


def resample(t_s: np.ndarray, power_w: np.ndarray, dt_s: float = DT_S) -> np.ndarray:
    """Linear interpolation of a timeline onto ``0, dt_s, 2 dt_s, ...`` relative to its first sample.

    :return: float32 power (W), covering the span of ``t_s``.
    """
    rel = t_s - t_s[0]
    n = math.floor(rel[-1] / dt_s + 1e-6) + 1
    grid = np.arange(n) * dt_s
    return np.interp(grid, rel, power_w).astype(np.float32)


def _source_csv(path: Path, gpus: int) -> np.ndarray:
    try:
        with path.open(newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader)
            if header[:2] != ["relative_time_s", "power_total_W"]:
                raise TraceError(f"{path}: expected header relative_time_s,power_total_W, got {header}")
            rows = [(float(r[0]), float(r[1])) for r in reader]
    except (OSError, ValueError, IndexError, StopIteration) as exc:
        raise TraceError(f"{path}: unreadable power timeline: {exc}") from None
    arr = np.array(rows, dtype=np.float64)
    check_power(arr[:, 0], arr[:, 1], gpus, str(path))
    return resample(arr[:, 0], arr[:, 1])


def _leaderboard(source: Path, models: set[str]) -> dict[tuple[str, int, int], list[dict]]:
    out: dict[tuple[str, int, int], list[dict]] = {}
    for model in sorted(models & set(LEADERBOARD_FILES)):
        path = source / "mlenergy-leaderboard" / LEADERBOARD_FILES[model]
        try:
            data = json.loads(path.read_text())
            for c in data["configurations"]:
                if c["gpu_model"] == "H100":
                    out.setdefault((model, int(c["num_gpus"]), int(c["max_num_seqs"])), []).append(c)
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise TraceError(f"{path}: unreadable leaderboard file: {exc!r}") from None
    return out


def _mixture(row: dict[str, str]) -> ItlMixture:
    return ItlMixture(
        loc_s=float(row["itl_mix_loc"]),
        weight=(float(row["itl_mix_pi_steady"]), float(row["itl_mix_pi_stall"])),
        sigma=(float(row["itl_mix_sigma_steady"]), float(row["itl_mix_sigma_stall"])),
        scale_s=(float(row["itl_mix_scale_steady"]), float(row["itl_mix_scale_stall"])),
    )


def build_library(source: Path, out: Path) -> list[TraceConfig]:
    """Build the library folder ``out`` from the ML.ENERGY data folder ``source``.

    :param source: folder holding ``mlenergy-h100-traces/`` and ``mlenergy-leaderboard/``.
    :param out: library folder to write (``index.json``, ``power.npz``); created if needed.
    :return: the configurations written.
    :raises TraceError: a source file is missing, malformed or implausible.
    """
    traces_dir = source / "mlenergy-h100-traces"
    summary = traces_dir / "traces_summary.csv"
    fits_file = traces_dir / "latency_fits.csv"
    try:
        with summary.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        with fits_file.open(newline="") as fh:
            fits = {(r["model_label"], int(r["max_num_seqs"])): r for r in csv.DictReader(fh)}
    except OSError as exc:
        raise TraceError(f"cannot read the ML.ENERGY trace index: {exc}") from None
    board = _leaderboard(source, {r["model_label"] for r in rows})
    configs: list[TraceConfig] = []
    arrays: dict[str, np.ndarray] = {}
    efficiency: dict[tuple[str, int], tuple[int, float, float]] = {}  # (model, gpus) -> (batch, k, output len)
    pending: list[tuple[dict, ItlMixture, np.ndarray]] = []
    digests: dict[str, str] = {}
    for row in rows:
        model, gpus, batch = row["model_label"], int(row["num_gpus"]), int(row["max_num_seqs"])
        rel = row["trace_file"]
        power = _source_csv(traces_dir / rel, gpus)
        mean_w = float(power.astype(np.float64).mean())
        fit = fits.get((model, batch))
        if fit is None:
            raise TraceError(f"{fits_file}: no ITL fit for {model} at max_num_seqs {batch}")
        mix = _mixture(fit)
        entries = board.get((model, gpus, batch), [])
        entry = min(entries, key=lambda c: abs(c["avg_power_watts"] - mean_w)) if entries else None
        if entry is None:
            pending.append((row, mix, power))
            continue
        throughput, running = float(entry["output_throughput_tokens_per_sec"]), float(entry["avg_batch_size"])
        k = throughput * mix.mean_s() / running
        if batch > efficiency.get((model, gpus), (0, 0.0, 0.0))[0]:
            efficiency[(model, gpus)] = (batch, k, float(entry["avg_output_len"]))
        configs.append(
            _config(row, power, mix, entry, throughput, "leaderboard", running, float(entry["avg_output_len"]))
        )
        digests[configs[-1].key] = _sha256(traces_dir / row["trace_file"])
        arrays[configs[-1].key] = power
    for row, mix, power in pending:
        model, gpus, batch = row["model_label"], int(row["num_gpus"]), int(row["max_num_seqs"])
        if (model, gpus) not in efficiency:
            raise TraceError(f"no leaderboard H100 entry at all for {model} on {gpus} GPUs")
        _, k, output_len = efficiency[(model, gpus)]
        throughput = k * batch / mix.mean_s()
        configs.append(_config(row, power, mix, None, throughput, "itl_fit", float(batch), output_len))
        digests[configs[-1].key] = _sha256(traces_dir / row["trace_file"])
        arrays[configs[-1].key] = power
    configs = [c.model_copy(update={"source_sha256": digests[c.key]}) for c in configs]
    write_library(out, configs, arrays, fit_library(configs))
    used = sorted({c.model for c in configs} & set(LEADERBOARD_FILES))
    inputs = [summary, fits_file, *(source / "mlenergy-leaderboard" / LEADERBOARD_FILES[m] for m in used)]
    write_text_atomic(
        out / "PROVENANCE.md", _provenance(configs, {f.relative_to(source).as_posix(): _sha256(f) for f in inputs})
    )
    return configs


def _sha256(*paths: Path) -> str:
    """SHA-256 of the files' bytes, concatenated in the order given."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _provenance(configs: Sequence[TraceConfig], inputs: dict[str, str]) -> str:
    """The library's PROVENANCE.md: sources, licence, transformation, per-configuration cross-check."""
    lines = [
        "# Provenance of the bundled trace library",
        "",
        "Generated by `openg2g traces build --source <data> --out traces` (`openg2g/datacenter/build.py`);",
        "do not edit by hand.",
        "",
        "## Sources",
        "",
        "- **ML.ENERGY Benchmark v3** GPU power timelines of LLM inference served with vLLM on NVIDIA H100 SXM",
        "  GPUs, task `lm-arena-chat`, one run per (model, GPUs, max_num_seqs), 0.1 s samples of the summed",
        "  board power of one replica's GPUs (`mlenergy-h100-traces/traces/*.csv`), and the benchmark's",
        "  two-component lognormal fits of inter-token latency (`mlenergy-h100-traces/latency_fits.csv`).",
        "- **ML.ENERGY Leaderboard** per-configuration summaries (`mlenergy-leaderboard/*.json`, snapshot",
        "  2026-02-16): H100 entries for output throughput, avg power, ITL percentiles, average running",
        "  batch and output length. Llama-3.1-405B traces were run in FP8 and are matched to the",
        "  `Llama-3.1-405B-Instruct-FP8` entries; the other models to their BF16 Instruct entries.",
        "- Licence: Apache-2.0 (both). The library is a derived work: no source file is copied.",
        "",
        "Input files (SHA-256):",
        "",
        *(f"- `{name}`: `{digest}`" for name, digest in inputs.items()),
        "",
        "Each trace's own source file and SHA-256 are in `index.json` (`source`, `source_sha256`).",
        "",
        "## Transformation",
        "",
        "1. Each timeline is checked (finite values, strictly increasing time, 20-1200 W per GPU) and",
        "   resampled by linear interpolation onto a 0.1 s grid starting at its first sample; stored as",
        "   float32 in `power.npz` under `<model>__g<gpus>__b<batch>`. Nothing is trimmed or smoothed.",
        "2. The ITL mixture of the same (model, max_num_seqs) is stored as is; its mean, median and p99",
        "   per-token ITL are computed from the mixture (median and p99 by bisection on its CDF).",
        "3. Throughput, running batch, output length and the leaderboard's avg power and median/p99 ITL",
        "   come from the leaderboard H100 entry with the same model, num_gpus and max_num_seqs. Where the",
        "   leaderboard repeats a configuration, the entry whose avg_power_watts is closest to the trace",
        "   mean is used. Configurations with no entry (`itl_fit`) get throughput",
        "   `k * batch / mean_ITL`, `k` being the measured `throughput * mean_ITL / avg_batch` of the",
        "   largest leaderboard batch of that model (prefill/scheduling overhead), and that entry's output",
        "   length.",
        "4. The controllers' curves of mean power, ITL and throughput against log2(batch) (a logistic,",
        "   or the PCHIP cubic through the means where no logistic fits) are fitted per (model, GPUs) on",
        "   its measured batch sizes and on the bundled scenarios' grid (8-512, powers of two) by",
        "   `openg2g.datacenter.fits` and stored in `index.json` (`curve_fits`), so that runs need not",
        "   fit them; a model on another grid or with imported traces is fitted at run time.",
        "",
        "At run time the replay backend closes each trace into a loop with a 5 s linear cross-fade",
        "(`openg2g.datacenter.replay.loop_trace`) that keeps its mean; the stored data are unchanged.",
        "",
        "## Per-configuration summary",
        "",
        "| model | GPUs | batch | samples | mean power (W) | leaderboard power (W) | diff (%) | throughput (tok/s) | source |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in sorted(configs, key=lambda c: (c.model, c.gpus, c.batch)):
        lb = c.leaderboard_avg_power_w
        diff = "-" if lb is None else f"{100 * (c.mean_power_w / lb - 1):+.1f}"
        lines.append(
            f"| {c.model} | {c.gpus} | {c.batch} | {c.samples} | {c.mean_power_w:.1f} | "
            f"{'-' if lb is None else f'{lb:.1f}'} | {diff} | {c.throughput_tok_s:,.0f} | {c.throughput_source} |"
        )
    lines += [
        "",
        "The traces of Qwen3-235B-A22B at max_num_seqs 128-256 draw 6-9 % less than the leaderboard's",
        "summary of the same configuration (their ITLs are also lower); every other configuration with",
        "a leaderboard entry agrees within 5 %. The library keeps the measured traces as they are.",
        "",
    ]
    return "\n".join(lines)


def _config(
    row: dict[str, str],
    power: np.ndarray,
    mix: ItlMixture,
    entry: dict | None,
    throughput: float,
    t_src: Literal["leaderboard", "itl_fit"],
    running: float,
    output_len: float,
) -> TraceConfig:
    model, gpus, batch = row["model_label"], int(row["num_gpus"]), int(row["max_num_seqs"])
    return TraceConfig(
        model=model,
        gpus=gpus,
        batch=batch,
        samples=power.size,
        duration_s=round(power.size * DT_S, 6),
        mean_power_w=float(power.astype(np.float64).mean()),
        source=f"mlenergy-h100-traces/{row['trace_file']}",
        itl=mix,
        mean_itl_s=mix.mean_s(),
        median_itl_s=mix.quantile_s(0.5),
        p99_itl_s=mix.quantile_s(0.99),
        throughput_tok_s=throughput,
        throughput_source=t_src,
        running_seqs=running,
        avg_output_len_tokens=output_len,
        leaderboard_avg_power_w=float(entry["avg_power_watts"]) if entry else None,
        leaderboard_median_itl_s=float(entry["median_itl_ms"]) / 1e3 if entry else None,
        leaderboard_p99_itl_s=float(entry["p99_itl_ms"]) / 1e3 if entry else None,
    )


def fit_library(configs: Sequence[TraceConfig]) -> list[StoredFits]:
    """Curves of each (model, GPUs) on its measured batch sizes and on each of :data:`FIT_GRIDS` it
    was measured at; none for a (model, GPUs) with one batch size or a configuration lacking ITL or
    throughput."""
    by_model: dict[tuple[str, int], dict[int, TraceConfig]] = {}
    for c in configs:
        by_model.setdefault((c.model, c.gpus), {})[c.batch] = c
    out = []
    for (model, gpus), by_batch in sorted(by_model.items()):
        measured = tuple(sorted(by_batch))
        grids = [measured, *(g for g in FIT_GRIDS if g != measured and set(g) <= set(measured))]
        for grid in grids:
            cfgs = [by_batch[b] for b in grid]
            itl = [c.mean_itl_s for c in cfgs if c.mean_itl_s is not None]
            throughput = [c.throughput_tok_s for c in cfgs if c.throughput_tok_s is not None]
            if len(grid) < 2 or len(itl) < len(grid) or len(throughput) < len(grid):
                continue
            out.append(StoredFits.of(model, gpus, fit_model(grid, [c.mean_power_w for c in cfgs], itl, throughput)))
    return out


def write_library(
    out: Path, configs: Sequence[TraceConfig], arrays: dict[str, np.ndarray], fits: Sequence[StoredFits] = ()
) -> None:
    """Write ``index.json`` (with ``fits``) and ``power.npz`` (float32, compressed) into folder ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    ordered = sorted(configs, key=lambda c: (c.model, c.gpus, c.batch))
    index = LibraryIndex(
        format=FORMAT, dt_s=DT_S, description=_DESCRIPTION, configs=list(ordered), curve_fits=list(fits)
    )
    write_json_atomic(out / INDEX_FILE, index.model_dump(mode="json"), indent=1)
    _save_npz(out / POWER_FILE, {c.key: np.asarray(arrays[c.key], dtype=np.float32) for c in ordered})


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like ``np.savez_compressed`` but byte-reproducible (fixed zip timestamps), so rebuilds diff clean."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, arr in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=False)
            zf.writestr(info, buf.getvalue())


def read_tsv(path: Path, gpus: int, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Read a raw benchmark timeline (tab-separated, header ``timestamp relative_time_s power_total_W
    max_num_seqs num_gpus ...``); every row's num_gpus and max_num_seqs must equal ``gpus``/``batch``.

    :return: times (s) and summed power (W), checked by :func:`check_power`.
    :raises TraceError: naming the file and row of the first problem, or the limit
        (:data:`MAX_LOG_ROWS`, ...) a log passes, as soon as it is read.
    """
    return _read_tsv(_LogLines(path), gpus, batch)


def _read_tsv(log: _LogLines, gpus: int, batch: int) -> tuple[np.ndarray, np.ndarray]:
    path = log.path
    lines = iter(log)
    first = next(lines, None)
    if first is None:
        raise TraceError(f"{path}: empty file")
    header = first[1].split("\t")
    need = ("relative_time_s", "power_total_W")
    if any(h not in header for h in need):
        raise TraceError(f"{path}: row 1: header must contain {list(need)}, got {header}")
    col = {h: i for i, h in enumerate(header)}
    t, p = array("d"), array("d")
    for row_no, line in lines:
        if not line.strip():
            continue
        cells = line.split("\t")
        try:
            t.append(float(cells[col["relative_time_s"]]))
            p.append(float(cells[col["power_total_W"]]))
            for name, expected in (("num_gpus", gpus), ("max_num_seqs", batch)):
                if name in col and int(float(cells[col[name]])) != expected:
                    raise TraceError(
                        f"{path}: row {row_no}: {name} is {cells[col[name]]}, but --{_flag(name)} {expected}"
                    )
        except (ValueError, IndexError):
            raise TraceError(f"{path}: row {row_no}: cannot read numbers from {line[:80]!r}") from None
        check_span(t[-1] - t[0], str(path), 2, row_no)
    t_s, p_w = np.array(t), np.array(p)
    check_power(t_s, p_w, gpus, str(path))
    return t_s, p_w


def _flag(column: str) -> str:
    return {"num_gpus": "gpus", "max_num_seqs": "batch"}[column]


def _parse_time(text: str) -> float:
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(text, fmt).timestamp()
        except ValueError:
            continue
    return float(text)


def read_nvidia_smi(path: Path, gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """Read an ``nvidia-smi --query-gpu=timestamp,power.draw --format=csv`` log.

    nvidia-smi writes one line per GPU per query, all with the query's timestamp; lines with the
    same timestamp are summed, and each timestamp must have exactly ``gpus`` lines.

    :return: times (s, from the first timestamp) and summed power (W), checked.
    :raises TraceError: naming the file and row of the first problem, or the limit
        (:data:`MAX_LOG_ROWS`, ...) a log passes, as soon as it is read.
    """
    return _read_nvidia_smi(_LogLines(path), gpus)


def _read_nvidia_smi(log: _LogLines, gpus: int) -> tuple[np.ndarray, np.ndarray]:
    path = log.path
    # per timestamp: its time (s), its first row, how many GPU readings and their sum (W)
    times, first_rows, counts, sums = array("d"), array("q"), array("q"), array("d")
    last_text = None

    def check_readings() -> None:
        if counts and counts[-1] != gpus:
            raise TraceError(
                f"{path}: row {first_rows[-1]}: timestamp has {counts[-1]} GPU readings, but --gpus {gpus}"
            )

    for row_no, line in log:
        if not line.strip() or line.lower().startswith("timestamp"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 2:
            raise TraceError(f"{path}: row {row_no}: expected 'timestamp, power.draw', got {line[:80]!r}")
        try:
            watts = float(cells[1].removesuffix("W").strip())
            if cells[0] != last_text:
                time_s = _parse_time(cells[0])
                check_readings()
                times.append(time_s)
                first_rows.append(row_no)
                counts.append(0)
                sums.append(0.0)
                last_text = cells[0]
        except ValueError:
            raise TraceError(f"{path}: row {row_no}: cannot read timestamp or watts from {line[:80]!r}") from None
        counts[-1] += 1
        sums[-1] += watts
        check_span(times[-1] - times[0], str(path), first_rows[0], row_no)
    if not times:
        raise TraceError(f"{path}: no samples")
    check_readings()
    t_s, p_w = np.array(times), np.array(sums)
    try:
        check_power(t_s, p_w, gpus, str(path), first_row=0)
    except TraceError as exc:
        # Map the sample index back to the file row of that timestamp's first line.
        msg = str(exc)
        if ": row " in msg:
            head, rest = msg.split(": row ", 1)
            idx_text, tail = rest.split(":", 1)
            raise TraceError(f"{head}: row {first_rows[int(idx_text)]}:{tail}") from None
        raise
    return t_s - t_s[0], p_w


@functools.lru_cache(maxsize=4096)
def _utc_seconds(text: str) -> int:
    """Whole seconds since the epoch of ``YYYY-MM-DD HH:MM:SS`` in UTC (cached: ~10 readings share one)."""
    return calendar.timegm(datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timetuple())


def _read_zeus_log(log: _LogLines) -> tuple[np.ndarray, np.ndarray]:
    """Times (ns since the epoch, int64) and power (W) of one Zeus log, checked as one GPU."""
    path = log.path
    lines = iter(log)
    first = next(lines, (1, ""))[1]
    if [c.strip() for c in first.split(",")][:2] != ["Time", "Power"]:
        raise TraceError(f"{path}: row 1: expected the Zeus header 'Time,Power', got {first[:80]!r}")
    t_ns, p_mw = array("q"), array("d")
    for row_no, line in lines:
        cells = line.split(",")
        try:
            whole, _, frac = cells[0].strip().partition(".")
            if len(frac) > 9 or not (frac.isdigit() or frac == ""):
                raise ValueError(frac)
            t_ns.append(_utc_seconds(whole) * 1_000_000_000 + int(frac.ljust(9, "0")))
            p_mw.append(float(cells[1]))
        except (ValueError, IndexError):
            raise TraceError(
                f"{path}: row {row_no}: expected 'YYYY-MM-DD HH:MM:SS.fffffffff,<milliwatts>', got {line[:80]!r}"
            ) from None
        check_span((t_ns[-1] - t_ns[0]) / 1e9, str(path), 2, row_no)
    t = np.array(t_ns, dtype=np.int64)
    p_w = np.array(p_mw) / 1000.0
    check_power((t - t[0]) / 1e9 if t.size else t.astype(float), p_w, 1, str(path))
    return t, p_w


def read_zeus(paths: Sequence[Path]) -> tuple[np.ndarray, np.ndarray]:
    """Read the Zeus power monitor's logs of one replica, one log per GPU, and sum them.

    Zeus's monitor (``zeus_monitor LOGFILE DURATION SLEEP_MS GPU_IDX``) writes a CSV with header
    ``Time,Power`` and one row per reading: ``Time`` the wall-clock time in UTC as
    ``YYYY-MM-DD HH:MM:SS.fffffffff`` (up to nanoseconds), ``Power`` NVML's power reading of that
    GPU in **milliwatts** (``nvmlDeviceGetPowerUsage``). Each GPU is polled by its own monitor at
    its own instants, so the logs are interpolated linearly onto the union of their times within
    the span all of them cover, and summed there.

    :param paths: one log per GPU of the replica.
    :return: times (s, from the start of the common span) and summed power (W).
    :raises TraceError: naming the file and row of the first problem, the limit
        (:data:`MAX_LOG_ROWS`, ...) a log passes as soon as it is read, or logs that do not overlap.
    """
    return _read_zeus([_LogLines(p) for p in paths])


def _read_zeus(logs_in: Sequence[_LogLines]) -> tuple[np.ndarray, np.ndarray]:
    paths = [log.path for log in logs_in]
    logs = [_read_zeus_log(log) for log in logs_in]
    start, end = max(t[0] for t, _ in logs), min(t[-1] for t, _ in logs)
    if end <= start:
        names = ", ".join(str(p) for p in paths)
        raise TraceError(f"{names}: the GPUs' logs do not overlap in time, so they cannot be summed")
    grid = np.unique(np.concatenate([t[(t >= start) & (t <= end)] for t, _ in logs]))
    t_s = (grid - start) / 1e9
    total = np.zeros(grid.size)
    for t, p_w in logs:
        total += np.interp(t_s, (t - start) / 1e9, p_w)
    return t_s, total


def import_trace(
    file: Path | Sequence[Path],
    library: Path,
    model: str,
    gpus: int,
    batch: int,
    fmt: Literal["tsv", "nvidia-smi", "zeus"] = "tsv",
) -> TraceConfig:
    """Check, resample to 0.1 s and add one replica's raw power log to the library folder ``library``.

    An existing configuration with the same (model, gpus, batch) has its power replaced and keeps
    its latency and throughput metadata; a new one has none (its ITL and throughput are unknown).
    The library's curve fits of that (model, gpus) are dropped: controllers refit it at run time.

    :param file: the log; for ``zeus`` one log per GPU (``gpus`` of them), see :func:`read_zeus`.
    :raises TraceError: unreadable or implausible log, or an unreadable existing library.
    """
    if gpus <= 0 or batch <= 0:
        raise TraceError(f"--gpus and --batch must be positive, got {gpus} and {batch}")
    files = [file] if isinstance(file, Path) else list(file)
    wanted = gpus if fmt == "zeus" else 1
    if len(files) != wanted:
        per = f"one log per GPU (--gpus {gpus})" if fmt == "zeus" else "one log"
        raise TraceError(f"format {fmt} takes {per}, got {len(files)}: {[str(f) for f in files]}")
    digest = hashlib.sha256()  # of the bytes as read: a log is read once (it may be a pipe)
    logs = [_LogLines(f, digest) for f in files]
    if fmt == "tsv":
        t_s, p_w = _read_tsv(logs[0], gpus, batch)
    elif fmt == "nvidia-smi":
        t_s, p_w = _read_nvidia_smi(logs[0], gpus)
    elif fmt == "zeus":
        t_s, p_w = _read_zeus(logs)
    else:
        raise TraceError(f"unknown format {fmt!r}; valid: ['tsv', 'nvidia-smi', 'zeus']")
    power = resample(t_s, p_w)
    names = ", ".join(f.name for f in files)
    if power.size < 2:
        raise TraceError(f"{names}: spans {t_s[-1] - t_s[0]:.3f} s, shorter than two {DT_S} s samples")
    configs: dict[str, TraceConfig] = {}
    arrays: dict[str, np.ndarray] = {}
    fits: list[StoredFits] = []
    if (library / INDEX_FILE).exists():
        from openg2g.datacenter.library import TraceLibrary

        lib = TraceLibrary.load(library)
        for c in lib.configs():
            configs[c.key] = c
            arrays[c.key] = lib.power(c.model, c.gpus, c.batch)
        # the new trace changes its model's means: controllers refit that model at run time
        fits = [f for f in lib.index.curve_fits if (f.model, f.gpus) != (model, gpus)]
    key = power_key(model, gpus, batch)
    fields = {
        "model": model,
        "gpus": gpus,
        "batch": batch,
        "samples": power.size,
        "duration_s": round(power.size * DT_S, 6),
        "mean_power_w": float(power.astype(np.float64).mean()),
        "source": names,
        "source_sha256": digest.hexdigest(),
    }
    old = configs.get(key)
    cfg = old.model_copy(update=fields) if old is not None else TraceConfig.model_validate(fields)
    configs[key] = cfg
    arrays[key] = power
    write_library(library, list(configs.values()), arrays, fits)
    note = (
        f"- `{names}` (SHA-256 `{fields['source_sha256']}`, format {fmt}) imported as {model} on {gpus} GPUs "
        f"at batch {batch} by `openg2g traces import`: checked, resampled to {DT_S} s; "
        f"{'latency metadata kept from the replaced trace' if old is not None else 'no latency metadata'}.\n"
    )
    prov = library / "PROVENANCE.md"
    head = "" if prov.exists() else "# Provenance of this trace library\n\n## Imported logs\n\n"
    if prov.exists() and "## Imported logs" not in prov.read_text():
        head = "\n## Imported logs\n\n"
    with prov.open("a") as fh:
        fh.write(head + note)
    return cfg

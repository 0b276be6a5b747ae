"""The meters of GPU power: NVML on this machine, a zeusd daemon, a meter's growing log file.

Each is a :class:`~openg2g.datacenter.live.power.PowerSource`; :func:`power_source` builds one
from a scenario's ``power:`` mapping. The meter libraries (``nvidia-ml-py``, ``zeus``) are
imported when a meter opens, so the platform runs without them (``pip install
'openg2g-cosim[live]'`` installs nvidia-ml-py; zeus is installed on its own, ``pip install zeus``,
as its ``amdsmi`` stops Ray from starting on a machine without AMD's library).
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from openg2g.datacenter.live.power import PowerSource, PowerSourceError, gpu_list

__all__ = ["FilePower", "NvmlPower", "ZeusdPower", "power_source"]

FIRST_SAMPLE_S = 5.0
"""How long :meth:`ZeusdPower.open` waits for zeusd's first sample of every GPU (s)."""


@dataclass
class _NvmlGpu:
    id: str
    handle: Any
    energy: bool  # whether the GPU has the energy counter
    last: tuple[float, int] | None = None  # (t monotonic s, counter mJ) of the last reading


class NvmlPower(PowerSource):
    """The GPUs of this machine through NVML (the ``nvidia-ml-py`` package).

    GPU ids are NVML indices (``"0"``, ``"1"``, ...) or UUIDs (``"GPU-..."``). Where the GPU has
    the total-energy counter (Volta and newer), each poll's sample is the exact average power since
    the previous poll, ``(E_k - E_{k-1}) / (t_k - t_{k-1})`` from the counter (mJ), stamped at
    ``t_{k-1}`` so that the held signal integrates to the energy measured; the first poll only
    reads the counter. Older GPUs give NVML's power reading (mW) at each poll, which the driver
    may average over its own window. :attr:`description` says which each GPU uses.
    """

    def __init__(self) -> None:
        self.description = "NVML on this machine"
        self._nvml: Any = None
        self._gpus: list[_NvmlGpu] = []

    def open(self, gpus: Sequence[str]) -> None:
        try:
            import pynvml
        except ImportError:
            raise PowerSourceError(
                f"{self.description}: cannot read {gpu_list(gpus)}: the nvidia-ml-py package is not installed "
                "(pip install nvidia-ml-py, or pip install 'openg2g-cosim[live]')"
            ) from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            no_driver = exc.value in (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
            why = "no NVIDIA driver was found" if no_driver else "NVML did not start"
            raise PowerSourceError(
                f"{self.description}: cannot read {gpu_list(gpus)}: {why} (nvmlInit: {exc})"
            ) from None
        self._nvml = pynvml
        try:
            self._gpus = [self._gpu(gpu) for gpu in gpus]
        except PowerSourceError:
            self.close()
            raise
        energy = [g.id for g in self._gpus if g.energy]
        reading = [g.id for g in self._gpus if not g.energy]
        ways = ([f"energy counter: {gpu_list(energy)}"] if energy else []) + (
            [f"power reading: {gpu_list(reading)}"] if reading else []
        )
        self.description = f"NVML on this machine ({'; '.join(ways)})"

    def _gpu(self, gpu: str) -> _NvmlGpu:
        """The handle of one GPU, and whether it has the energy counter."""
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(int(gpu)) if gpu.isdigit() else nvml.nvmlDeviceGetHandleByUUID(gpu)
        except nvml.NVMLError as exc:
            count = nvml.nvmlDeviceGetCount()
            raise PowerSourceError(
                f"{self.description}: no GPU {gpu} ({exc}); this machine has {count} GPU(s), "
                f"indices 0 to {count - 1} or their UUIDs (nvidia-smi -L)"
            ) from None
        try:
            nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            return _NvmlGpu(gpu, handle, energy=True)
        except nvml.NVMLError as exc:
            if exc.value != nvml.NVML_ERROR_NOT_SUPPORTED:
                raise PowerSourceError(f"{self.description}: GPU {gpu}: reading its energy failed: {exc}") from None
        try:
            nvml.nvmlDeviceGetPowerUsage(handle)
        except nvml.NVMLError as exc:
            raise PowerSourceError(f"{self.description}: GPU {gpu}: reading its power failed: {exc}") from None
        return _NvmlGpu(gpu, handle, energy=False)

    def poll(self) -> list[tuple[str, float, float]]:
        nvml = self._nvml
        samples = []
        for gpu in self._gpus:
            try:
                value = (nvml.nvmlDeviceGetTotalEnergyConsumption if gpu.energy else nvml.nvmlDeviceGetPowerUsage)(
                    gpu.handle
                )
            except nvml.NVMLError as exc:
                raise PowerSourceError(f"{self.description}: GPU {gpu.id}: reading power failed: {exc}") from None
            t = time.monotonic()
            if not gpu.energy:
                samples.append((gpu.id, t, value / 1000.0))
                continue
            if gpu.last is not None:
                t_prev, energy_prev_mj = gpu.last
                if value < energy_prev_mj:
                    raise PowerSourceError(
                        f"{self.description}: GPU {gpu.id}: the energy counter went back from {energy_prev_mj} "
                        f"to {value} mJ (driver reloaded?)"
                    )
                if t <= t_prev:  # no time between two readings: wait for the next poll
                    continue
                samples.append((gpu.id, t_prev, (value - energy_prev_mj) / 1000.0 / (t - t_prev)))
            gpu.last = (t, value)
        return samples

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None
            self._gpus = []


class ZeusdPower(PowerSource):
    """GPU power streamed by a zeusd daemon, through the ``zeus`` package's
    ``PowerStreamingClient`` (``pip install zeus``).

    GPU ids are zeusd's GPU indices (``"0"``, ``"1"``, ...). A token for a daemon that requires one
    is read from ``ZEUSD_TOKEN``. The client keeps the daemon's latest reading of each GPU under
    one timestamp per daemon (its newest GPU's, moved onto this machine's clock by the client); each
    poll that finds a newer timestamp gives every GPU's reading at that time, on
    :func:`time.monotonic`.

    :param url: the daemon's ``host:port`` or ``http://host:port``.
    :raises PowerSourceError: ``url`` is not of that form.
    """

    def __init__(self, url: str):
        host_port = url.removeprefix("http://").rstrip("/")
        host, _, port = host_port.rpartition(":")
        self.description = f"zeusd at http://{host_port}"
        if not (host and port.isdigit()) or "/" in host_port:
            raise PowerSourceError(f"zeusd at {url}: the url must be host:port or http://host:port")
        self._host_port = host_port
        self._client: Any = None
        self._gpus: list[int] = []
        self._last_s = -math.inf  # the client's timestamp of the readings last given (Unix s)
        self._last_t = -math.inf  # the monotonic time they were given at

    def open(self, gpus: Sequence[str]) -> None:
        not_index = [gpu for gpu in gpus if not gpu.isdigit()]
        if not_index:
            raise PowerSourceError(f"{self.description}: {gpu_list(not_index)}: zeusd names GPUs by index (0, 1, ...)")
        try:
            from zeus.monitor.power_streaming import PowerStreamingClient
            from zeus.utils.zeusd import ZeusdConfig
        except ImportError:
            raise PowerSourceError(
                f"{self.description}: cannot read {gpu_list(gpus)}: the zeus package is not installed (pip install zeus)"
            ) from None
        self._gpus = [int(gpu) for gpu in gpus]
        config = ZeusdConfig(
            host_port=self._host_port, token=os.environ.get("ZEUSD_TOKEN"), gpu_indices=self._gpus, cpu_indices=[]
        )
        try:
            self._client = PowerStreamingClient([config])
        except Exception as exc:  # noqa: BLE001 - zeus's errors, ValueError for absent GPUs, httpx's: a refusal
            raise PowerSourceError(f"{self.description}: cannot read {gpu_list(gpus)}: {exc}") from None
        # discovery checked the indices; a sample of each shows the stream works
        deadline = time.monotonic() + FIRST_SAMPLE_S
        while True:
            readings = self._client.get_power().get(self._host_port)
            silent = [str(i) for i in self._gpus if readings is None or i not in readings.gpu_power_w]
            if not silent:
                return
            if time.monotonic() > deadline:
                self.close()
                raise PowerSourceError(
                    f"{self.description}: no power sample from {gpu_list(silent)} within {FIRST_SAMPLE_S:g} s "
                    "(does the token have the gpu-read scope?)"
                )
            time.sleep(0.05)

    def poll(self) -> list[tuple[str, float, float]]:
        readings = self._client.get_power().get(self._host_port)
        if readings is None or readings.timestamp_s <= self._last_s:
            return []
        self._last_s = readings.timestamp_s
        now = time.monotonic()
        # Unix time onto the monotonic clock; a step of the wall clock must not move a sample back
        # before the last one nor into the future
        t = min(max(readings.timestamp_s - (time.time() - now), self._last_t), now)
        self._last_t = t
        return [(str(i), t, readings.gpu_power_w[i]) for i in self._gpus if i in readings.gpu_power_w]

    def close(self) -> None:
        if self._client is not None:
            self._client.stop()
            self._client = None


class FilePower(PowerSource):
    """A meter's CSV log, read as it grows.

    The header row names ``time_s`` (seconds from any origin, non-decreasing down the file) and
    either ``gpu`` and ``power_w`` (long format: one GPU per row; rows of other GPUs are skipped)
    or one column per GPU id (wide format, e.g. ``time_s,0,1``; other columns are skipped). Each
    poll reads the lines completed since the last; a partial last line waits for the next poll.

    **Time.** The file's times are moved onto :func:`time.monotonic` by one offset, set at the
    first poll that reads rows: the newest row read then is taken as written at that moment, so the
    rows already in the file at open lie in the past and later rows follow on the file's own clock.

    :param path: the file.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.description = f"power file {self.path}"
        self._file: BinaryIO | None = None
        self._columns: dict[str, int] = {}
        self._long = False
        self._gpus: tuple[str, ...] = ()
        self._pending = b""  # the partial line after the last newline
        self._line = 0  # the lines consumed, header included
        self._t_file = -math.inf  # time_s of the last row
        self._offset_s: float | None = None  # monotonic time minus file time

    def open(self, gpus: Sequence[str]) -> None:
        try:
            file: BinaryIO = self.path.open("rb")
        except FileNotFoundError:
            raise PowerSourceError(f"{self.description}: does not exist, so {gpu_list(gpus)} cannot be read") from None
        except OSError as exc:
            raise PowerSourceError(f"{self.description}: cannot be opened ({exc.strerror})") from None
        try:
            self._header(file.readline(), gpus)
        except PowerSourceError:
            file.close()
            raise
        self._file = file
        self._gpus = tuple(gpus)
        self._line = 1

    def _header(self, line: bytes, gpus: Sequence[str]) -> None:
        if not line.endswith(b"\n"):
            raise PowerSourceError(
                f"{self.description}: has no header row yet (time_s and gpu, power_w, or a column per GPU id)"
            )
        try:
            names = [name.strip() for name in next(csv.reader([line.decode("utf-8-sig").rstrip("\r\n")]))]
        except UnicodeDecodeError:
            raise PowerSourceError(f"{self.description}, line 1: the header is not UTF-8 text") from None
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise PowerSourceError(f"{self.description}, line 1: column(s) {', '.join(repeated)} appear twice")
        if "time_s" not in names:
            raise PowerSourceError(f"{self.description}, line 1: no time_s column (the header has {', '.join(names)})")
        self._columns = {name: i for i, name in enumerate(names)}
        self._long = "gpu" in names and "power_w" in names
        missing = [] if self._long else [gpu for gpu in gpus if gpu not in self._columns]
        if missing:
            raise PowerSourceError(
                f"{self.description}: no column for {gpu_list(missing)} (the header has {', '.join(names)}; "
                "a wide file needs a column per GPU id, a long one gpu and power_w)"
            )

    def poll(self) -> list[tuple[str, float, float]]:
        file = self._file
        if file is None:
            raise PowerSourceError(f"{self.description}: polled before open()")
        if os.fstat(file.fileno()).st_size < file.tell():
            raise PowerSourceError(f"{self.description}: the file shrank (truncated or rewritten while read)")
        chunk = file.read()
        if not chunk:
            return []
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        rows: list[tuple[str, float, float]] = []
        for line in lines:
            self._line += 1
            rows.extend(self._row(line))
        if not rows:
            return []
        if self._offset_s is None:
            self._offset_s = time.monotonic() - self._t_file
        offset_s = self._offset_s
        return [(gpu, t + offset_s, power_w) for gpu, t, power_w in rows]

    def _row(self, line: bytes) -> list[tuple[str, float, float]]:
        """One line's samples on the file's clock; none for a blank line or another GPU's row."""
        try:
            text = line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError:
            raise PowerSourceError(f"{self.description}, line {self._line}: not UTF-8 text") from None
        if not text.strip():
            return []
        fields = next(csv.reader([text]))
        if len(fields) != len(self._columns):
            raise PowerSourceError(
                f"{self.description}, line {self._line}: {len(fields)} fields, the header has {len(self._columns)}"
            )
        t = self._number(fields, "time_s")
        if t < self._t_file:
            raise PowerSourceError(
                f"{self.description}, line {self._line}, field time_s: {t:g} is earlier than the row before ({self._t_file:g})"
            )
        self._t_file = t
        if self._long:
            gpu = fields[self._columns["gpu"]].strip()
            return [(gpu, t, self._power(fields, "power_w"))] if gpu in self._gpus else []
        return [(gpu, t, self._power(fields, gpu)) for gpu in self._gpus]

    def _number(self, fields: list[str], column: str) -> float:
        text = fields[self._columns[column]].strip()
        where = f"{self.description}, line {self._line}, field {column}"
        try:
            value = float(text)
        except ValueError:
            raise PowerSourceError(f"{where}: {text!r} is not a number") from None
        if not math.isfinite(value):
            raise PowerSourceError(f"{where}: {text!r} is not finite")
        return value

    def _power(self, fields: list[str], column: str) -> float:
        power_w = self._number(fields, column)
        if power_w < 0:
            raise PowerSourceError(f"{self.description}, line {self._line}, field {column}: {power_w:g} W is negative")
        return power_w

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _text(spec: Mapping[str, Any], key: str) -> str:
    value = spec[key]
    if not isinstance(value, (str, os.PathLike)):
        raise PowerSourceError(f"power: {key} must be text, got {value!r}")
    return os.fspath(value)


def _file(spec: Mapping[str, Any], base_dir: Path) -> PowerSource:
    path = Path(_text(spec, "path"))
    return FilePower(path if path.is_absolute() else base_dir / path)


# source name -> (the keys it takes besides `source`, its builder from the mapping and base folder)
_SOURCES: dict[str, tuple[tuple[str, ...], Callable[[Mapping[str, Any], Path], PowerSource]]] = {
    "file": (("path",), _file),
    "nvml": ((), lambda spec, base_dir: NvmlPower()),
    "zeusd": (("url",), lambda spec, base_dir: ZeusdPower(_text(spec, "url"))),
}


def power_source(spec: Mapping[str, Any], base_dir: Path) -> PowerSource:
    """The meter a scenario's ``power:`` mapping names.

    ``{source: nvml}``, ``{source: zeusd, url: host:port}`` or ``{source: file, path: ...}``, a
    relative ``path`` being relative to ``base_dir`` (the scenario's folder).

    :raises PowerSourceError: an unknown source (the message lists the known ones), a missing or
        unknown key, or a malformed url.
    """
    name = spec.get("source")
    if not isinstance(name, str) or name not in _SOURCES:
        raise PowerSourceError(f"power: unknown source {name!r}; the known sources are {', '.join(sorted(_SOURCES))}")
    keys, build = _SOURCES[name]
    unknown = sorted(set(spec) - {"source", *keys})
    if unknown:
        takes = f"takes only {', '.join(keys)}" if keys else "takes no other key"
        raise PowerSourceError(f"power: source {name} {takes}, not {', '.join(unknown)}")
    missing = [key for key in keys if key not in spec]
    if missing:
        raise PowerSourceError(f"power: source {name} needs {', '.join(missing)}")
    return build(spec, base_dir)

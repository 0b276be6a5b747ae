"""Measured GPU power: the meter interface, the samples a run keeps and the thread that reads them.

A :class:`PowerSource` is a meter (NVML, zeusd, a growing log file: :mod:`.meters`) that hands out
samples ``(gpu id, t, power)`` with ``t`` in :func:`time.monotonic` seconds and power in W. A
:class:`PowerSampler` polls one source in a daemon thread into a :class:`PowerHistory`, which keeps
the last ``horizon_s`` seconds of each GPU.

**The signal.** A GPU's power is the sample-and-hold signal of its samples: sample ``(t_i, P_i)``
holds from ``t_i`` until the next sample, the last one holds on, and before the first sample the
first one's value holds. The average over ``[t0, t1]`` is that signal's integral divided by
``t1 - t0``; a meter that stamps each interval's average power at the interval's start (NVML's
energy counter) therefore gives energies that are exact over its polling intervals.

**Failure.** The sampler never lets a meter fail quietly: the first error in the thread is kept and
raised by :meth:`PowerSampler.check`, as is a GPU that has had no new sample for ``stale_s``
seconds (a meter that stopped, a log no longer written).
"""

from __future__ import annotations

import math
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Sequence

from openg2g.core.errors import G2GError

__all__ = ["PowerHistory", "PowerSampler", "PowerSource", "PowerSourceError"]


class PowerSourceError(G2GError):
    """A power meter cannot be opened or read, or stopped; the message names the meter, the GPU(s)
    and what is wrong."""


def gpu_list(gpus: Sequence[str]) -> str:
    """GPU ids for a message: ``"GPU 0"``, ``"GPUs 0, 1"``."""
    return ("GPU " if len(gpus) == 1 else "GPUs ") + ", ".join(gpus)


class PowerSource(ABC):
    """A meter of GPU power. Sample times are :func:`time.monotonic` seconds, powers W."""

    description: str
    """The meter in words, for messages: ``"NVML on this machine"``, ``"power file /x/y.csv"``."""

    @abstractmethod
    def open(self, gpus: Sequence[str]) -> None:
        """Check that every GPU id in ``gpus`` can be read now and prepare to read them.

        :raises PowerSourceError: the meter, or one of the GPUs, cannot be read (a clear refusal).
        """

    @abstractmethod
    def poll(self) -> list[tuple[str, float, float]]:
        """The samples since the last poll, oldest first per GPU: ``(gpu id, t monotonic s, power W)``.

        :raises PowerSourceError: the meter could not be read.
        """

    def close(self) -> None:
        """Release the meter (by default: nothing)."""


class PowerHistory:
    """Per-GPU samples kept for ``horizon_s`` seconds before each GPU's latest (thread-safe).

    One deque per GPU, cut at the front as samples arrive; the sample holding at the horizon is
    kept, so every window that starts within the horizon is exact.

    :param gpus: the GPU ids.
    :param horizon_s: how far back from its latest sample a GPU's samples are kept (s).
    """

    def __init__(self, gpus: Sequence[str], horizon_s: float = 600.0):
        if not horizon_s > 0:
            raise ValueError(f"horizon_s must be > 0, got {horizon_s}")
        self.gpus = tuple(gpus)
        self.horizon_s = horizon_s
        self._samples: dict[str, deque[tuple[float, float]]] = {gpu: deque() for gpu in self.gpus}
        # GPUs that lost samples to the horizon: before their first kept sample nothing is known
        self._cut: set[str] = set()
        self._lock = threading.Lock()

    def add(self, gpu: str, t: float, power_w: float) -> None:
        """Append a sample: power ``power_w`` (W) from time ``t`` (monotonic s) on.

        :raises PowerSourceError: an unknown GPU, a non-finite value, or a sample earlier than the
            GPU's last.
        """
        samples = self._series(gpu)
        if not (math.isfinite(t) and math.isfinite(power_w)):
            raise PowerSourceError(f"GPU {gpu}: sample ({t} s, {power_w} W) is not finite")
        with self._lock:
            if samples and t < samples[-1][0]:
                raise PowerSourceError(
                    f"GPU {gpu}: sample at {t:.6f} s is earlier than the last one, at {samples[-1][0]:.6f} s"
                )
            samples.append((t, power_w))
            cutoff = t - self.horizon_s
            while len(samples) >= 2 and samples[1][0] <= cutoff:
                samples.popleft()
                self._cut.add(gpu)

    def mean_w(self, gpu: str, t0: float, t1: float) -> float:
        """The time-average power over ``[t0, t1]`` (W) of the sample-and-hold signal.

        Each sample holds until the next; before the first sample, the first sample's value.
        ``t0 == t1`` gives the value held at ``t0``.

        :raises PowerSourceError: the GPU has no sample at all, or the window starts before the
            samples kept (``horizon_s``).
        :raises ValueError: ``t1 < t0``.
        """
        if t1 < t0:
            raise ValueError(f"window [{t0}, {t1}] ends before it starts")
        if t1 == t0:
            return self.at_w(gpu, t0)
        with self._lock:
            window = self._from(gpu, t0)
        energy_j = 0.0
        for i, (t_i, p_i) in enumerate(window):
            start = t0 if i == 0 else t_i
            end = min(window[i + 1][0], t1) if i + 1 < len(window) else t1
            if end > start:
                energy_j += p_i * (end - start)
        return energy_j / (t1 - t0)

    def at_w(self, gpu: str, t: float) -> float:
        """The power held at ``t`` (W): the last sample at or before ``t``, else the first sample.

        :raises PowerSourceError: as :meth:`mean_w`.
        """
        with self._lock:
            return self._from(gpu, t)[0][1]

    def latest(self, gpu: str) -> tuple[float, float] | None:
        """``(t monotonic s, power W)`` of the GPU's last sample; ``None`` before its first."""
        samples = self._series(gpu)
        with self._lock:
            return samples[-1] if samples else None

    def _series(self, gpu: str) -> deque[tuple[float, float]]:
        try:
            return self._samples[gpu]
        except KeyError:
            raise PowerSourceError(f"GPU {gpu} is not metered; the metered GPUs are {', '.join(self.gpus)}") from None

    def _from(self, gpu: str, t: float) -> list[tuple[float, float]]:
        """The samples from the one holding at ``t`` on, oldest first (the caller holds the lock)."""
        samples = self._series(gpu)
        if not samples:
            raise PowerSourceError(f"GPU {gpu} has no power sample yet")
        # from the newest back: the windows a run asks for are recent
        found: list[tuple[float, float]] = []
        for sample in reversed(samples):
            found.append(sample)
            if sample[0] <= t:
                break
        else:
            if gpu in self._cut:
                raise PowerSourceError(
                    f"GPU {gpu}: no power kept for {t:.3f} s; the samples kept start at {samples[0][0]:.3f} s "
                    f"(horizon_s = {self.horizon_s:g} s)"
                )
        found.reverse()
        return found


class PowerSampler:
    """Polls a :class:`PowerSource` every ``interval_s`` seconds in a daemon thread into
    :attr:`history`.

    The first error in the thread ends the polling and is raised by :meth:`check` (a
    :class:`PowerSourceError` naming the source); :meth:`check` also raises when a GPU has had no
    new sample for ``stale_s`` seconds, counted from :meth:`start` before its first sample.

    :param source: the meter.
    :param gpus: the GPU ids to read.
    :param interval_s: time between polls (s).
    :param stale_s: the longest a GPU may go without a new sample (s).
    :param horizon_s: how long the history keeps samples (s).
    """

    def __init__(
        self,
        source: PowerSource,
        gpus: Sequence[str],
        interval_s: float = 0.1,
        stale_s: float = 5.0,
        horizon_s: float = 600.0,
    ):
        if not gpus:
            raise ValueError("a PowerSampler needs at least one GPU")
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"GPU ids repeat: {', '.join(gpus)}")
        if not (interval_s > 0 and stale_s > 0):
            raise ValueError(f"interval_s and stale_s must be > 0, got {interval_s} and {stale_s}")
        self.source = source
        self.gpus = tuple(gpus)
        self.interval_s = interval_s
        self.stale_s = stale_s
        self.history = PowerHistory(self.gpus, horizon_s)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._stopped = False
        self._started_at = 0.0
        self._error: PowerSourceError | None = None

    def start(self) -> None:
        """Open the source (a refusal is raised here, before any thread runs), then start polling.

        :raises PowerSourceError: the source refuses the GPUs.
        :raises RuntimeError: the sampler was started or stopped before.
        """
        if self._thread is not None or self._stopped:
            raise RuntimeError("a PowerSampler starts once")
        self.source.open(self.gpus)
        self._started_at = time.monotonic()
        self._thread = threading.Thread(
            target=self._run, name=f"power sampler ({self.source.description})", daemon=True
        )
        self._thread.start()

    def check(self) -> None:
        """Raise what went wrong with the meter, if anything did.

        :raises PowerSourceError: the thread's first error, or the GPUs without a new sample for
            ``stale_s`` seconds.
        :raises RuntimeError: the sampler was not started.
        """
        if self._thread is None:
            raise RuntimeError("check() before start()")
        if self._error is not None:
            raise self._error
        now = time.monotonic()
        stale = []
        for gpu in self.gpus:
            latest = self.history.latest(gpu)
            since = latest[0] if latest is not None else self._started_at
            if now - since > self.stale_s:
                stale.append(gpu)
        if stale:
            raise PowerSourceError(
                f"{self.source.description}: no new power sample from {gpu_list(stale)} for more than "
                f"{self.stale_s:g} s (stale_s): the meter stopped"
            )

    def stop(self) -> None:
        """Stop polling, wait for the thread to end and close the source; a second call does nothing."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.source.close()

    def _run(self) -> None:
        description = self.source.description
        due = time.monotonic()
        while True:
            try:
                samples = self.source.poll()
            except PowerSourceError as exc:  # a source's own errors name it
                self._error = exc
                return
            except Exception as exc:  # noqa: BLE001 - a meter's library may raise anything; check() must hear of it
                self._error = PowerSourceError(f"{description}: reading power failed: {type(exc).__name__}: {exc}")
                self._error.__cause__ = exc
                return
            for gpu, t, power_w in samples:
                try:
                    self.history.add(gpu, t, power_w)
                except PowerSourceError as exc:
                    self._error = PowerSourceError(f"{description}: {exc}")
                    return
            # a late poll (a slow meter) moves the schedule rather than bursting to catch up
            due = max(due + self.interval_s, time.monotonic())
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return

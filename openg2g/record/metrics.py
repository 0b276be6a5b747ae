"""Run-level figures accumulated step by step (constant memory), reported in ``summary.json``.

Definitions (``dt`` is the component's own period):

- violation integral (pu.s) = sum over grid steps and monitored bus-phases of
  ``max(0, v_min - v) + max(0, v - v_max)`` times ``dt`` (also reported split into its
  under-voltage and over-voltage parts);
- time in violation (s) = sum of ``dt`` over grid steps where any bus-phase is outside limits;
- Vmin, Vmax (pu) = the lowest and highest monitored voltage, with the bus-phase where each
  occurs (the earliest step, then the first bus-phase in the grid's order, on a tie);
- energy (MWh) = sum over datacenter steps and sites of facility power times ``dt``;
- mean throughput (tok/s) = time mean of the summed output throughput of all sites;
- ITL deadline miss fraction = missed tokens / all tokens, tokens = throughput x ``dt``;
- unsupplied time (s, per site) = datacenter steps during which the site's bus had no supply,
  times ``dt``. Such steps add no energy and no tokens: the mean throughput counts them as 0 tok/s,
  the ITL deadline miss fraction leaves them out (neither missed nor met);
- batch changes = number of times any (site, model) batch size changed between samples; a
  reversal is a change opposite in direction to the model's previous one; the most changes (or
  reversals) per minute = the largest number of one model's changes (reversals) at times within
  less than 60 s of each other (``[t, t + 60)``), over the run's models and windows: a model that
  alternates 32 <-> 8 every second shows 60 changes and 59 reversals a minute;
- tap changes = regulator tap operations: per bank and phase, the number of steps the tap moved
  between consecutive grid steps (a move from 10 to 16 on one phase counts 6, as six operations
  of a step-by-step regulator; the taps in force at the start count nothing).
- branch loading (%) of a line or transformer at a grid step = the largest current of its
  conductors as a percentage of that conductor's normal rating (:mod:`openg2g.grid.feeder.branches`);
  max loading = its largest value over branches and steps, with the branch where it occurs (the
  earliest step, then the first branch in feeder order, on a tie);
- overload integral (%.s) = sum over grid steps and branches of ``max(0, loading - 100)`` times
  ``dt``: a branch at 130% for 10 s adds 300 %.s, two branches at 110% for 10 s add 200 %.s.

With a metrics start time ``start_s`` > 0 (the scenario's ``outputs.metrics_start_s``, e.g. a
study's settling window) the voltage and branch figures above (violation integrals, time in
violation, Vmin, Vmax, max loading, overload integral) count only the grid steps at
``t_s >= start_s``; the step counts, tap changes and datacenter figures count the whole run, and
the summary reports ``metrics_start_s``. With ``start_s = 0`` (the default) every step counts and
the summary has no such key.

Grid steps that did not converge (kept, with ``grid.on_nonconvergence: flag``) have no voltages:
they are counted in ``nonconverged_steps`` and add nothing to the violation integral, the time in
violation, Vmin or Vmax, which then describe the converged steps only. ``openg2g run`` and
``compare`` show the count beside them whenever it is not zero.

A model whose trace has no latency data (imported by ``openg2g traces import`` without it) serves
an unknown (NaN) throughput: the mean throughput and the ITL deadline miss fraction are then
``None``, and ``unavailable_figures`` names them, with the models that lack the data.
"""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from openg2g.core.minute import in_last_minute
from openg2g.core.state import BranchSet, DatacenterSeries, GridState
from openg2g.engine.recording import Recorder

__all__ = ["MetricsRecorder", "RunMetrics", "violation_pu"]

_Figure = float | int | str | dict[str, float] | dict[str, str] | dict[str, dict[str, int]] | None
"""One entry of :meth:`RunMetrics.summary`: a number, a name, or a dict of them per site, model or figure."""


def violation_pu(v_pu: np.ndarray, v_min_pu: float, v_max_pu: float) -> np.ndarray:
    """Per-bus-phase distance outside ``[v_min_pu, v_max_pu]`` (pu, 0 inside); NaN counts as 0."""
    return _violations(v_pu, v_min_pu, v_max_pu)[0]


def _violations(v_pu: np.ndarray, v_min_pu: float, v_max_pu: float) -> tuple[np.ndarray, np.ndarray, bool]:
    """:func:`violation_pu`, its under-voltage part, and whether every voltage is finite."""
    below = np.maximum(v_min_pu - v_pu, 0.0)
    total = below + np.maximum(v_pu - v_max_pu, 0.0)
    if np.isfinite(total).all():  # nan_to_num would change nothing, at ten times the cost
        return total, below, True
    return _finite(total), _finite(below), False


def _finite(x: np.ndarray) -> np.ndarray:
    """``x`` with NaN as 0 (and infinities as the largest floats): a step that did not converge adds nothing."""
    return np.nan_to_num(x, nan=0.0)


def _counted(recent_s: collections.deque[float], t_s: float) -> int:
    """Add an event at ``t_s`` (s, not before the last one) to ``recent_s``: the events in the
    minute up to it, itself included (:func:`openg2g.core.minute.in_last_minute`)."""
    recent_s.append(t_s)
    return in_last_minute(recent_s, t_s)


class RunMetrics:
    """Accumulates the summary figures of one run.

    :param v_min_pu: lower voltage limit (pu).
    :param v_max_pu: upper voltage limit (pu).
    :param branch_names: the grid's branches (:class:`~openg2g.core.state.BranchSet` names),
        ``None`` for a grid that reports none (the loading figures are then ``None``).
    :param bus_phases: the monitored bus-phases, in the order of the voltages given; ``None``
        leaves the bus-phases of Vmin and Vmax unnamed.
    :param start_s: first grid time (s) counted in the voltage and branch figures (see above).
    """

    def __init__(
        self,
        v_min_pu: float,
        v_max_pu: float,
        branch_names: tuple[str, ...] | None = None,
        bus_phases: tuple[str, ...] | None = None,
        start_s: float = 0.0,
    ):
        if not (math.isfinite(start_s) and start_s >= 0):
            raise ValueError(f"start_s must be >= 0 s, got {start_s}")
        self.v_min_pu = v_min_pu
        self.v_max_pu = v_max_pu
        self.branch_names = branch_names
        self.bus_phases = bus_phases
        self.start_s = start_s
        self.max_loading_pct = -np.inf
        self.max_loading_branch: str | None = None
        self.overload_integral_pct_s = 0.0
        self.violation_integral_pu_s = 0.0
        self.undervoltage_integral_pu_s = 0.0
        self.overvoltage_integral_pu_s = 0.0
        self.violation_time_s = 0.0
        self.v_lo_pu = np.inf
        self.v_hi_pu = -np.inf
        self.v_lo_at: str | None = None
        self.v_hi_at: str | None = None
        self.grid_steps = 0
        self.nonconverged_steps = 0
        self.energy_j = 0.0
        self.throughput_time_tok = 0.0
        self.datacenter_time_s = 0.0
        self.tokens = 0.0
        self.missed_tokens = 0.0
        self.n_batch_changes = 0
        # (site, model) pairs whose throughput is NaN: no latency data to serve from
        self._without_throughput: set[tuple[str, str]] = set()
        # per site, steps without supply per step length (s): steps x dt, as the run's steps vary
        self._unsupplied_steps: dict[str, dict[float, int]] = {}
        self._last_batch: dict[tuple[str, str], int] = {}
        self._batch_changes: dict[tuple[str, str], int] = {}
        self._batch_reversals: dict[tuple[str, str], int] = {}
        self._last_direction: dict[tuple[str, str], int] = {}
        self._recent_changes_s: dict[tuple[str, str], collections.deque[float]] = {}
        self._recent_reversals_s: dict[tuple[str, str], collections.deque[float]] = {}
        self._max_changes_per_min: dict[tuple[str, str], int] = {}
        self.max_batch_reversals_per_min = 0
        self.n_tap_changes = 0
        self._last_taps: Mapping[str, Sequence[int]] | None = None

    def _uncounted(self, t_s: Sequence[float] | None, steps: int) -> int:
        """How many leading steps of a block fall before ``start_s`` (times ascending)."""
        if self.start_s == 0:
            return 0
        if t_s is None or len(t_s) != steps:
            raise ValueError(f"with start_s = {self.start_s} s, give the time of each of the {steps} steps")
        return int(np.searchsorted(np.asarray(t_s, dtype=float), self.start_s, side="left"))

    def add_grid_block(
        self, v_pu: np.ndarray, converged: np.ndarray, dt_s: float, t_s: Sequence[float] | None = None
    ) -> np.ndarray:
        """Account consecutive grid steps; returns their per-bus-phase violations (pu) for recording.

        :param v_pu: voltages per step and bus-phase (pu), shape ``(steps, n_bus_phases)``.
        :param converged: per step, whether its power flow converged.
        :param t_s: per step, its time (s, ascending); needed only with ``start_s`` > 0.

        Sums run step by step in time order, so any split of a run into blocks gives the same
        floats.
        """
        self.grid_steps += len(v_pu)
        self.nonconverged_steps += len(converged) - int(np.count_nonzero(converged))
        violation, below, finite = _violations(v_pu, self.v_min_pu, self.v_max_pu)
        skip = self._uncounted(t_s, len(v_pu))
        totals = violation[skip:].sum(axis=1).tolist()
        unders = below[skip:].sum(axis=1).tolist()
        for total, under in zip(totals, unders):
            self.violation_integral_pu_s += total * dt_s
            self.undervoltage_integral_pu_s += under * dt_s
            self.overvoltage_integral_pu_s += (total - under) * dt_s
            if total > 0:
                self.violation_time_s += dt_s
        counted = v_pu[skip:]
        if len(counted) and (finite or np.isfinite(counted).any()):
            # divmod: np.unravel_index of a 2-D shape, without its call
            lo = divmod(int(np.argmin(counted) if finite else np.nanargmin(counted)), counted.shape[1])
            hi = divmod(int(np.argmax(counted) if finite else np.nanargmax(counted)), counted.shape[1])
            if counted[lo] < self.v_lo_pu:
                self.v_lo_pu, self.v_lo_at = float(counted[lo]), self._bus_phase(int(lo[1]))
            if counted[hi] > self.v_hi_pu:
                self.v_hi_pu, self.v_hi_at = float(counted[hi]), self._bus_phase(int(hi[1]))
        return violation

    def _bus_phase(self, index: int) -> str | None:
        return self.bus_phases[index] if self.bus_phases is not None else None

    def add_taps(self, taps: Sequence[Mapping[str, Sequence[int]]]) -> None:
        """Count tap operations over consecutive grid steps.

        :param taps: per grid step, regulator bank name -> tap step per phase in force.
        """
        for current in taps:
            last = self._last_taps
            if last is not None and current is not last:
                for bank, steps in current.items():
                    before = last.get(bank, steps)
                    self.n_tap_changes += sum(abs(a - b) for a, b in zip(steps, before))
            self._last_taps = current

    def add_branch_block(self, loading_pct: np.ndarray, dt_s: float, t_s: Sequence[float] | None = None) -> None:
        """Account the branch loading of consecutive grid steps.

        :param loading_pct: loading per step and branch (%), shape ``(steps, n_branches)``; a step
            that did not converge is a row of NaN and adds nothing.
        :param t_s: per step, its time (s, ascending); needed only with ``start_s`` > 0.

        Sums run step by step in time order, so any split of a run into blocks gives the same floats.
        """
        loading_pct = loading_pct[self._uncounted(t_s, len(loading_pct)) :]
        excess = np.maximum(loading_pct - 100.0, 0.0)
        finite = bool(np.isfinite(excess).all())
        for pct in (excess if finite else _finite(excess)).sum(axis=1).tolist():
            self.overload_integral_pct_s += pct * dt_s
        if self.branch_names is not None and len(loading_pct) and (finite or np.isfinite(loading_pct).any()):
            at = np.argmax(loading_pct) if finite else np.nanargmax(loading_pct)
            step, branch = divmod(int(at), loading_pct.shape[1])
            if loading_pct[step, branch] > self.max_loading_pct:
                self.max_loading_pct = float(loading_pct[step, branch])
                self.max_loading_branch = self.branch_names[branch]

    def add_datacenter_block(self, block: Sequence[DatacenterSeries], dt_s: float) -> None:
        """Account consecutive datacenter steps of all sites (one series per site, same times).

        Sums run step by step in time order, then site and model order, so any split of a run
        into blocks gives the same floats. A grid without sites draws nothing to account.
        """
        if not block:
            return
        for series in block:
            cut = len(series) - int(np.count_nonzero(series.supplied))
            steps = self._unsupplied_steps.setdefault(series.site, {})
            steps[dt_s] = steps.get(dt_s, 0) + cut
        # in Python floats: the products and sums are the IEEE operations numpy would do, in the
        # same order, without an array call per quantity for the few steps of a block
        for powers in zip(*[series.power_w.tolist() for series in block]):
            for power_w in powers:
                self.energy_j += power_w * dt_s
        models = [(series.site, m) for series in block for m in series.models.values()]
        throughputs = [m.throughput_tok_s.tolist() for _, m in models]
        misses = [m.deadline_miss_fraction.tolist() for _, m in models]
        for step_throughputs, step_misses in zip(zip(*throughputs), zip(*misses)):
            total = 0.0
            for throughput, miss in zip(step_throughputs, step_misses):
                tokens = throughput * dt_s
                self.tokens += tokens
                self.missed_tokens += miss * tokens
                total += throughput
            self.throughput_time_tok += total * dt_s
            self.datacenter_time_s += dt_s
        if math.isnan(self.throughput_time_tok):
            # a model without latency data (a trace imported without it) serves NaN tok/s: name it,
            # once its NaN has made the throughput and the miss fraction figures that cannot be had
            self._without_throughput.update((site, m.model) for site, m in models if np.isnan(m.throughput_tok_s).any())
        if not models:  # no model serves: the steps still count in the time the mean throughput divides by
            for _ in range(len(block[0])):
                self.datacenter_time_s += dt_s
        for site, m in models:
            batches = m.batch_size.tolist()
            key = (site, m.model)
            last = self._last_batch.get(key)
            if batches.count(batches[0]) < len(batches) or last not in (None, batches[0]):
                previous = ([last] if last is not None else []) + batches
                self.n_batch_changes += self._count_batch_changes(key, previous, block[0].t_s.tolist())
            self._last_batch[key] = batches[-1]

    def _count_batch_changes(self, key: tuple[str, str], batches: list[int], times_s: list[float]) -> int:
        """Count one model's batch changes and direction reversals over consecutive steps; returns
        the changes.

        :param batches: the batch size in force at each step, led by the one before the block when
            there was one, so that ``batches[-k]`` is in force at ``times_s[-k]`` (s).
        """
        changes = 0
        offset = len(times_s) - len(batches)
        for i, (before, after) in enumerate(itertools.pairwise(batches), start=1):
            if before == after:
                continue
            changes += 1
            t_s = times_s[offset + i]
            in_minute = _counted(self._recent_changes_s.setdefault(key, collections.deque()), t_s)
            self._max_changes_per_min[key] = max(self._max_changes_per_min.get(key, 0), in_minute)
            direction = 1 if after > before else -1
            if self._last_direction.get(key, direction) != direction:
                self._count_reversal(key, t_s)
            self._last_direction[key] = direction
        self._batch_changes[key] = self._batch_changes.get(key, 0) + changes
        return changes

    def _count_reversal(self, key: tuple[str, str], t_s: float) -> None:
        """A change opposite to the model's previous one at ``t_s`` (s); keeps the largest number of
        one model's reversals within any 60 s."""
        self._batch_reversals[key] = self._batch_reversals.get(key, 0) + 1
        in_minute = _counted(self._recent_reversals_s.setdefault(key, collections.deque()), t_s)
        self.max_batch_reversals_per_min = max(self.max_batch_reversals_per_min, in_minute)

    @property
    def max_batch_changes_per_min(self) -> int:
        """The most changes of one model's batch at times within less than 60 s of each other."""
        return max(self._max_changes_per_min.values(), default=0)

    def _by_site(self, counts: Mapping[tuple[str, str], int]) -> dict[str, dict[str, int]]:
        """``{site: {model: count}}`` for every model accounted, 0 where none were counted."""
        out: dict[str, dict[str, int]] = {}
        for site, model in self._last_batch:
            out.setdefault(site, {})[model] = counts.get((site, model), 0)
        return out

    def unavailable(self) -> dict[str, str]:
        """The figures that cannot be computed from what the run served -> why; ``{}`` for most runs.

        A model whose trace carries no latency data (``openg2g traces import`` without an ITL fit
        or a throughput) serves an unknown throughput, so the run's mean throughput and ITL
        deadline miss fraction are unknown too.
        """
        if not self._without_throughput:
            return {}
        names = ", ".join(f"{model} at site {site}" for site, model in sorted(self._without_throughput))
        why = f"no throughput or ITL data for {names} (a trace imported without latency metadata)"
        return {"mean_throughput_tok_s": why, "itl_deadline_miss_fraction": why}

    def summary(self) -> dict[str, _Figure]:
        """The figures as a dict with unit-suffixed keys, flat but for ``site_unsupplied_s``
        (site -> seconds without supply, 0 for a site that never lost it) and the batch counts per
        model (site -> model -> count): ``batch_changes_by_model``, ``batch_reversals_by_model``
        (changes opposite in direction to the model's previous one) and
        ``max_batch_changes_per_min_by_model`` (the most changes within any 60 s), with
        ``n_batch_reversals`` the reversals of all models, ``max_batch_changes_per_min`` and
        ``max_batch_reversals_per_min`` the most changes and reversals of one model within any 60 s;
        ``metrics_start_s`` only when > 0; ``unavailable_figures`` (figure -> why, the figure
        ``None``) only when :meth:`unavailable` names any."""
        unavailable = self.unavailable()
        figures: dict[str, _Figure] = {
            "violation_integral_pu_s": self.violation_integral_pu_s,
            "undervoltage_integral_pu_s": self.undervoltage_integral_pu_s,
            "overvoltage_integral_pu_s": self.overvoltage_integral_pu_s,
            "violation_time_s": self.violation_time_s,
            "v_min_pu": self.v_lo_pu if self.grid_steps and np.isfinite(self.v_lo_pu) else None,
            "v_max_pu": self.v_hi_pu if self.grid_steps and np.isfinite(self.v_hi_pu) else None,
            "v_min_bus_phase": self.v_lo_at,
            "v_max_bus_phase": self.v_hi_at,
            "energy_mwh": self.energy_j / 3.6e9,
            "site_unsupplied_s": {
                site: sum(n * dt_s for dt_s, n in steps.items()) for site, steps in self._unsupplied_steps.items()
            },
            "mean_throughput_tok_s": self.throughput_time_tok / self.datacenter_time_s
            if self.datacenter_time_s
            else 0.0,
            "itl_deadline_miss_fraction": self.missed_tokens / self.tokens if self.tokens else 0.0,
            "n_batch_changes": self.n_batch_changes,
            "batch_changes_by_model": self._by_site(self._batch_changes),
            "batch_reversals_by_model": self._by_site(self._batch_reversals),
            "n_batch_reversals": sum(self._batch_reversals.values()),
            "max_batch_changes_per_min": self.max_batch_changes_per_min,
            "max_batch_changes_per_min_by_model": self._by_site(self._max_changes_per_min),
            "max_batch_reversals_per_min": self.max_batch_reversals_per_min,
            "n_tap_changes": self.n_tap_changes,
            "grid_steps": self.grid_steps,
            "nonconverged_steps": self.nonconverged_steps,
            "max_loading_pct": self.max_loading_pct if np.isfinite(self.max_loading_pct) else None,
            "max_loading_branch": self.max_loading_branch,
            "overload_integral_pct_s": self.overload_integral_pct_s if self.branch_names is not None else None,
        }
        if self.start_s:
            figures["metrics_start_s"] = self.start_s
        if unavailable:
            figures.update(dict.fromkeys(unavailable))
            figures["unavailable_figures"] = unavailable
        return figures


class MetricsRecorder(Recorder):
    """Keeps a run's :class:`RunMetrics` (a new one at every start) and adds its figures, with
    where the branch ratings come from, to the run's summary.

    :param start_s: first grid time counted in the voltage and branch figures (s).
    :param rated_branches: the branches whose ratings the scenario sets (``grid.branch_ratings``;
        :meth:`BranchSet.rating_sources`), to name the source of the most loaded branch's rating.
    """

    def __init__(self, start_s: float = 0.0, rated_branches: Collection[str] = ()):
        super().__init__()
        self.start_s = start_s
        self.rated_branches = tuple(rated_branches)
        self.metrics: RunMetrics | None = None
        self._branches: BranchSet | None = None

    def _on_start(self) -> None:
        sim = self.sim
        assert sim is not None
        self._branches = sim.grid.branches()
        self.metrics = RunMetrics(
            sim.v_min_pu,
            sim.v_max_pu,
            self._branches.names if self._branches is not None else None,
            tuple(sim.grid.bus_phases()),
            self.start_s,
        )

    def _on_datacenter_block(self, block: Sequence[DatacenterSeries], dt_s: float) -> None:
        assert self.metrics is not None
        self.metrics.add_datacenter_block(block, dt_s)

    def _on_grid_block(self, states: Sequence[GridState], v_pu: np.ndarray, dt_s: float) -> None:
        metrics = self.metrics
        assert metrics is not None
        times = [s.t_s for s in states]
        metrics.add_grid_block(v_pu, np.array([s.converged for s in states]), dt_s, times)
        metrics.add_taps([s.taps for s in states])
        if self._branches is not None:
            rows = [s.branch_loading_pct for s in states]
            if any(row is None for row in rows):
                nan = np.full(len(self._branches.names), np.nan)  # a state without branch results
                rows = [nan if row is None else row for row in rows]
            metrics.add_branch_block(np.array(rows), dt_s, times)

    def figures(self) -> dict[str, Any]:
        """:meth:`RunMetrics.summary`, and for a grid that reports branches ``max_loading_rating``
        (the source of the most loaded branch's rating) and ``branch_rating_sources`` (branches
        per source); nothing before the first start."""
        if self.metrics is None:
            return {}
        figures: dict[str, Any] = dict(self.metrics.summary())
        if self._branches is not None:
            sources = self._branches.rating_sources(self.rated_branches)
            by_name = dict(zip(self._branches.names, sources))
            worst = self.metrics.max_loading_branch
            figures["max_loading_rating"] = by_name.get(worst) if worst is not None else None
            figures["branch_rating_sources"] = {s: sources.count(s) for s in ("file", "default", "scenario")}
        return figures

"""Run-level figures accumulated step by step (constant memory), reported in ``summary.json``.

Definitions (``dt`` is the component's own period):

- violation integral (pu.s) = sum over grid steps and monitored bus-phases of
  ``max(0, v_min - v) + max(0, v - v_max)`` times ``dt`` (also reported split into its
  under-voltage and over-voltage parts);
- time in violation (s) = sum of ``dt`` over grid steps where any bus-phase is outside limits;
- energy (MWh) = sum over datacenter steps and sites of facility power times ``dt``;
- mean throughput (tok/s) = time mean of the summed output throughput of all sites;
- ITL deadline miss fraction = missed tokens / all tokens, tokens = throughput x ``dt``;
- batch changes = number of times any (site, model) batch size changed between samples.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from openg2g.core.state import DatacenterState, GridState

__all__ = ["RunMetrics", "violation_pu"]


def violation_pu(v_pu: np.ndarray, v_min_pu: float, v_max_pu: float) -> np.ndarray:
    """Per-bus-phase distance outside ``[v_min_pu, v_max_pu]`` (pu, 0 inside); NaN counts as 0."""
    below = np.maximum(v_min_pu - v_pu, 0.0)
    above = np.maximum(v_pu - v_max_pu, 0.0)
    return np.nan_to_num(below + above, nan=0.0)


class RunMetrics:
    """Accumulates the summary figures of one run."""

    def __init__(self, v_min_pu: float, v_max_pu: float):
        self.v_min_pu = v_min_pu
        self.v_max_pu = v_max_pu
        self.violation_integral_pu_s = 0.0
        self.undervoltage_integral_pu_s = 0.0
        self.overvoltage_integral_pu_s = 0.0
        self.violation_time_s = 0.0
        self.v_lo_pu = np.inf
        self.v_hi_pu = -np.inf
        self.grid_steps = 0
        self.nonconverged_steps = 0
        self.energy_j = 0.0
        self.throughput_time_tok = 0.0
        self.datacenter_time_s = 0.0
        self.tokens = 0.0
        self.missed_tokens = 0.0
        self.n_batch_changes = 0
        self._last_batch: dict[tuple[str, str], int] = {}

    def add_grid(self, state: GridState, dt_s: float) -> np.ndarray:
        """Account one grid step; returns its per-bus-phase violation (pu) for recording."""
        self.grid_steps += 1
        if not state.converged:
            self.nonconverged_steps += 1
        below = np.nan_to_num(np.maximum(self.v_min_pu - state.v_pu, 0.0), nan=0.0)
        violation = violation_pu(state.v_pu, self.v_min_pu, self.v_max_pu)
        total = float(violation.sum())
        under = float(below.sum())
        self.violation_integral_pu_s += total * dt_s
        self.undervoltage_integral_pu_s += under * dt_s
        self.overvoltage_integral_pu_s += (total - under) * dt_s
        if total > 0:
            self.violation_time_s += dt_s
        if np.isfinite(state.v_pu).any():
            self.v_lo_pu = min(self.v_lo_pu, float(np.nanmin(state.v_pu)))
            self.v_hi_pu = max(self.v_hi_pu, float(np.nanmax(state.v_pu)))
        return violation

    def add_datacenters(self, states: Mapping[str, DatacenterState], dt_s: float) -> None:
        """Account one datacenter step over all sites."""
        throughput = 0.0
        for site, state in states.items():
            self.energy_j += state.power_w * dt_s
            for model, m in state.models.items():
                throughput += m.throughput_tok_s
                tokens = m.throughput_tok_s * dt_s
                self.tokens += tokens
                self.missed_tokens += m.deadline_miss_fraction * tokens
                key = (site, model)
                last = self._last_batch.get(key)
                if last is not None and last != m.batch_size:
                    self.n_batch_changes += 1
                self._last_batch[key] = m.batch_size
        self.throughput_time_tok += throughput * dt_s
        self.datacenter_time_s += dt_s

    def summary(self) -> dict[str, float | int | None]:
        """The figures as a flat dict with unit-suffixed keys."""
        return {
            "violation_integral_pu_s": self.violation_integral_pu_s,
            "undervoltage_integral_pu_s": self.undervoltage_integral_pu_s,
            "overvoltage_integral_pu_s": self.overvoltage_integral_pu_s,
            "violation_time_s": self.violation_time_s,
            "v_min_pu": self.v_lo_pu if self.grid_steps and np.isfinite(self.v_lo_pu) else None,
            "v_max_pu": self.v_hi_pu if self.grid_steps and np.isfinite(self.v_hi_pu) else None,
            "energy_mwh": self.energy_j / 3.6e9,
            "mean_throughput_tok_s": self.throughput_time_tok / self.datacenter_time_s if self.datacenter_time_s else 0.0,
            "itl_deadline_miss_fraction": self.missed_tokens / self.tokens if self.tokens else 0.0,
            "n_batch_changes": self.n_batch_changes,
            "grid_steps": self.grid_steps,
            "nonconverged_steps": self.nonconverged_steps,
        }

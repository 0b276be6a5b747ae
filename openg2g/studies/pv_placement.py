"""PV placement: where to build PV plants on a feeder, and how big, by a MILP on linearized voltages.

The counterpart of the public OpenG2G study's PV location and capacity optimization (arXiv
2605.05519; gpu2grid/openg2g 0.2.0), solved with HiGHS (:func:`scipy.optimize.milp`).

**Operating points.** The base scenario runs once without controllers (``runs/no_pv``); its
duration ``D`` stands for one representative day. Operating point ``k = 0 .. K-1`` is the grid
step nearest ``(k + 1/2) D / K``; it stands for hour ``h_k = 24 t_k / D`` and for ``dh = 24 / K``
hours of the day. Its PV availability ``a_k`` (fraction of the rated kW) is the study's
``pv_shape`` at ``h_k``, its energy value ``p_k`` the ``energy_value_per_kwh`` at ``h_k``.

**Linearization.** At each operating point the exact phase-frame solver
(:class:`~openg2g.grid.feeder.backend.FeederGrid`) solves the feeder again with the datacenter power the
run recorded (over the grid solve's own aggregation window), the scenario's events up to ``t_k``
and the regulator taps the run had in force. It gives ``v_ref[k, i]`` for every monitored
bus-phase ``i`` and ``H[k, i, b]``, the change of ``v[k, i]`` per kW of a balanced unity-power-
factor injection at candidate bus ``b`` (``-voltage_sensitivity(b)`` summed over the phases,
times 1000 / 3). Linearizing at every operating point, rather than at one representative
instant, keeps each point's base voltage exact (the datacenter load, events and taps differ
between points) and its sensitivity local, for ``K x B`` small sensitivity solves. Regulators
are held at the run's taps: tap moves the PV would cause are not foreseen (validation shows them).

**MILP.** With ``x_b`` binary (a plant at ``b``), ``s_b`` its size (kW AC), and slacks
``u_ki, l_ki >= 0`` (pu above ``v_max`` and below ``v_min``)::

    minimize    (c_kw - E) sum_b s_b + c_site sum_b x_b + sum_k w_k sum_i (u_ki + l_ki)
    subject to  s_min x_b <= s_b <= s_max x_b,    sum_b x_b <= n_pv,    sum_b s_b <= S_max,
                sum_{b in zone z} x_b <= m         (optional, per regulator zone)
                v_ki = v_ref[k, i] + a_k sum_b H[k, i, b] (s_b - s0_b)
                v_ki <= v_max + u_ki,    v_ki >= v_min - l_ki

where ``E = days * sum_k a_k p_k dh`` is the annual value of one kW installed, ``w_k = days *
c_viol * dh`` the annual penalty of one pu at one bus-phase during point ``k``, and ``s0`` the
plan the model is linearized at (none in round 1). A voltage row that no feasible plan can push
past its limit is left out (exact: its largest reach is a greedy knapsack over the candidates).
Each further round re-linearizes at the previous round's plan (``v_ref`` then holds the exact
voltages with that plan built) and solves again; rounds stop early when the plan repeats.

**Validation.** The base scenario runs again with the plan's plants in ``grid.pv`` (the planned
kW, profile = the PV shape over the run's time; ``runs/plan``). Both runs' violation figures are
reported, and at each operating point the linear prediction is compared with the run's voltages.

Differences from the public study: one representative day instead of five weighted seasonal
ones; no curtailment and no tap co-optimization variables (the validation run cannot carry them
out); the violation penalty is per pu-h (the public study charges 5000 per pu per 15-min step,
i.e. 20000 per pu-h). A ``set_pv_scale`` event without a ``pv`` name scales the planned plants
too, in the validation run and in the model alike.

``OUT/``
  ``pv_placement.parquet``     one row per candidate: zone, chosen, kW, sensitivities, linear hosting
  ``operating_points.parquet`` one row per operating point: hour, availability, price, load,
                               voltage extremes without PV, with the plan (linear and validated)
  ``plan.json``                the plan, objective terms, solver status and gap, every round
  ``validation.parquet``       one row per validation run (no_pv, plan) with its figures
  ``pv_profile_<hash>.csv``    the plants' profile over the run's time (``t_s, scale``)
  ``pv_placement.png``         the plan on the feeder map, plants sized by kW
  ``pv_placement_voltages.png`` voltage extremes per operating point
  ``runs/no_pv/``, ``runs/plan/`` the runs' outputs
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError

from openg2g.core.atomic import write_json_atomic, write_text_atomic
from openg2g.core.commands import SetPVScale, SetRegulatorMode, SetTaps, is_datacenter_command
from openg2g.core.errors import FeederError, G2GError
from openg2g.core.progress import progress_bar
from openg2g.core.state import DatacenterState
from openg2g.grid.feeder.library import Feeder
from openg2g.grid.feeder.model import FeederModel
from openg2g.scenario.events import build_event_command
from openg2g.scenario.loader import LoadedScenario, load_scenario
from openg2g.scenario.schema import Periods, PVSpec
from openg2g.studies.common import BaseScenario, Topology, make_task
from openg2g.studies.spec import PVPlacementSpec
from openg2g.sweep.engines import Engine
from openg2g.sweep.runner import execute_tasks, results_table, write_parquet_atomic
from openg2g.sweep.spec import SweepError
from openg2g.sweep.tasks import COMPLETE, RunTask

__all__ = [
    "PLAN_PV_PREFIX",
    "UPSTREAM_ZONE",
    "OperatingPoints",
    "PVPlacementResult",
    "PlacementProblem",
    "PlacementSolution",
    "candidate_buses",
    "check_study",
    "output_fraction",
    "pick_operating_points",
    "plan_profile",
    "primary_kv",
    "regulator_zones",
    "run_pv_placement",
    "solve_placement",
]

PLAN_PV_PREFIX = "pv_plan_"
"""Name prefix of the planned plants in ``grid.pv`` (``pv_plan_<bus>``)."""

UPSTREAM_ZONE = "substation"
"""Zone of the buses upstream of every regulator bank."""

_SAME_PLAN_FRACTION = 1e-3
"""Plans whose sizes differ by at most this fraction of ``max_kw_per_site`` count as the same."""

_BUILT_KW = 1e-6
"""A plant smaller than this (kW) is not built (the solver may open a site at 0 kW when it is free)."""


# --------------------------------------------------------------------------------- candidates
def primary_kv(feeder: Feeder) -> float:
    """The feeder's primary voltage (kV line to line): the most common base voltage of the
    three-phase buses off the source side (24.9 kV on IEEE 34, 4.16 kV on IEEE 13)."""
    skip = set(feeder.source_side_buses)
    kvs = [
        round(kv, 6)
        for bus, kv in feeder.model.bus_kv.items()
        if bus not in skip and len(feeder.bus_phases.get(bus, ())) == 3
    ]
    if not kvs:
        raise FeederError(f"feeder {feeder.name} has no three-phase bus off the source side")
    return Counter(kvs).most_common(1)[0][0]


def regulator_zones(model: FeederModel) -> dict[str, str]:
    """Bus -> the regulator bank that feeds it (the last one on its path from the source), or
    :data:`UPSTREAM_ZONE` for buses upstream of every bank."""
    links: dict[str, list[tuple[str, str | None]]] = {}
    for ln in model.lines:
        if ln.in_service:
            links.setdefault(ln.bus1, []).append((ln.bus2, None))
            links.setdefault(ln.bus2, []).append((ln.bus1, None))
    for t in model.transformers:
        a, b = t.windings[0].bus, t.windings[1].bus
        links.setdefault(a, []).append((b, t.bank))
        links.setdefault(b, []).append((a, None))
    zone = {model.source.bus: UPSTREAM_ZONE}
    queue = deque([model.source.bus])
    while queue:
        bus = queue.popleft()
        for nb, bank in links.get(bus, ()):
            if nb not in zone:
                zone[nb] = bank or zone[bus]
                queue.append(nb)
    return zone


def candidate_buses(spec: PVPlacementSpec, feeder: Feeder) -> list[str]:
    """The study's candidate buses (feeder spelling), without the excluded ones.

    ``three_phase`` is every three-phase bus at the primary voltage (:func:`primary_kv`) off the
    source side, in the feeder's order.
    """
    excluded = {b.lower() for b in spec.exclude}
    if isinstance(spec.candidates, list):
        buses = [b.lower() for b in spec.candidates]
    else:
        kv = primary_kv(feeder)
        skip = set(feeder.source_side_buses)
        buses = [
            b
            for b, ph in feeder.bus_phases.items()
            if len(ph) == 3 and b not in skip and round(feeder.model.bus_kv[b], 6) == kv
        ]
    return [b for b in buses if b not in excluded]


def _load_base_feeder(base: BaseScenario) -> Feeder:
    from openg2g.grid.feeder.library import load_feeder, resolve_feeder

    return load_feeder(resolve_feeder(base.feeder, base.path.parent))


def check_study(spec: PVPlacementSpec, base: BaseScenario) -> list[tuple[str, str]]:
    """Problems of a study on its base scenario, as ``(field, message)``.

    Checks: the run has at least ``operating_points`` grid steps, the feeder loads, every
    candidate and excluded bus exists, candidates have phases a, b and c, and some candidate is
    left after the exclusions.
    """
    problems: list[tuple[str, str]] = []
    try:
        grid_s = Periods.model_validate(base.data.get("periods") or {}).grid_s
        steps = base.duration_s // grid_s
    except (ValidationError, ValueError):
        steps = None  # a bad duration or period: the scenario's own validation reports it, with the run
    if steps is not None and steps < spec.operating_points:
        why = f"the base run has {steps} grid steps ({float(base.duration_s):g} s at {float(grid_s):g} s)"
        problems.append(("operating_points", f"{spec.operating_points} points need as many grid steps; {why}"))
    try:
        feeder = _load_base_feeder(base)
    except FeederError as exc:
        return [*problems, ("base", f"cannot load the base scenario's feeder {base.feeder!r}: {exc}")]
    three = [b for b, ph in feeder.bus_phases.items() if len(ph) == 3]
    for i, bus in enumerate(spec.exclude):
        if bus.lower() not in feeder.bus_phases:
            problems.append((f"exclude.{i}", f"unknown bus {bus!r} on feeder {feeder.name}"))
    if isinstance(spec.candidates, list):
        for i, bus in enumerate(spec.candidates):
            phases = feeder.bus_phases.get(bus.lower())
            if phases is None:
                problems.append(
                    (f"candidates.{i}", f"unknown bus {bus!r} on feeder {feeder.name}; three-phase buses: {three}")
                )
            elif len(phases) != 3:
                problems.append(
                    (f"candidates.{i}", f"bus {bus!r} has phases {''.join(phases)}; a plant needs phases a, b, c")
                )
    bus_problems = any(field.startswith(("candidates", "exclude")) for field, _ in problems)
    if not bus_problems and not candidate_buses(spec, feeder):
        problems.append(("candidates", f"no candidate bus left on feeder {feeder.name} after the exclusions"))
    return problems


# --------------------------------------------------------------------------------- the MILP
@dataclass(frozen=True)
class PlacementProblem:
    """The MILP's data, free of any feeder (see the module docstring for the formulation).

    Voltage model: ``v[k, i] = v_fixed_pu[k, i] + sum_b dv_pu_per_kw[k, i, b] * kw[b]``.

    :param candidates: candidate buses, in column order.
    :param v_fixed_pu: voltage at operating point ``k``, bus-phase ``i`` without new PV (pu), (K, I).
    :param dv_pu_per_kw: voltage change per kW installed at each candidate (pu/kW), (K, I, B);
        the PV availability of the point is already in it.
    :param v_min_pu: lower voltage limit (pu).
    :param v_max_pu: upper voltage limit (pu).
    :param penalty_per_pu: annual penalty of one pu outside the limits at one bus-phase during
        each operating point, (K,).
    :param value_per_kw: annual value of the output of one kW installed.
    :param cost_per_kw: annualized investment per kW installed.
    :param cost_per_site: annualized fixed cost per plant built.
    :param n_max: most plants.
    :param max_kw_per_site: largest plant (kW).
    :param min_kw_per_site: smallest plant (kW).
    :param max_total_kw: most kW over all plants; None = no cap.
    :param zones: candidate indices per zone, each limited to ``max_per_zone`` plants.
    :param max_per_zone: most plants per zone; None = no limit.
    """

    candidates: tuple[str, ...]
    v_fixed_pu: np.ndarray
    dv_pu_per_kw: np.ndarray
    v_min_pu: float
    v_max_pu: float
    penalty_per_pu: np.ndarray
    value_per_kw: float
    cost_per_kw: float
    cost_per_site: float
    n_max: int
    max_kw_per_site: float
    min_kw_per_site: float = 0.0
    max_total_kw: float | None = None
    zones: tuple[tuple[int, ...], ...] = ()
    max_per_zone: int | None = None

    def __post_init__(self) -> None:
        k, i = self.v_fixed_pu.shape
        if self.dv_pu_per_kw.shape != (k, i, len(self.candidates)) or self.penalty_per_pu.shape != (k,):
            raise ValueError(
                f"shapes disagree: v_fixed_pu {self.v_fixed_pu.shape}, dv_pu_per_kw {self.dv_pu_per_kw.shape}, "
                f"penalty_per_pu {self.penalty_per_pu.shape}, {len(self.candidates)} candidates"
            )

    def voltages(self, kw: np.ndarray) -> np.ndarray:
        """Linear voltages (pu) with ``kw`` installed per candidate, (K, I)."""
        return self.v_fixed_pu + self.dv_pu_per_kw @ np.asarray(kw, dtype=float)

    def penalty(self, kw: np.ndarray) -> float:
        """Annual voltage penalty with ``kw`` installed."""
        v = self.voltages(kw)
        outside = np.maximum(v - self.v_max_pu, 0.0) + np.maximum(self.v_min_pu - v, 0.0)
        return float(self.penalty_per_pu @ outside.sum(axis=1))

    def reach_pu(self) -> tuple[np.ndarray, np.ndarray]:
        """Lowest and highest voltage change any feasible plan can cause at each row, (K, I) each.

        The bound relaxes the zones and the binaries: the ``n_max`` largest coefficients of one
        sign, filled greedily with ``max_kw_per_site`` each within ``max_total_kw``.
        """
        b = len(self.candidates)
        total = float("inf") if self.max_total_kw is None else self.max_total_kw
        j = np.arange(b)
        caps = np.where(j < self.n_max, np.clip(total - j * self.max_kw_per_site, 0.0, self.max_kw_per_site), 0.0)
        up = -np.sort(-np.maximum(self.dv_pu_per_kw, 0.0), axis=2) @ caps
        down = np.sort(np.minimum(self.dv_pu_per_kw, 0.0), axis=2) @ caps
        return down, up


@dataclass(frozen=True)
class PlacementSolution:
    """A solved :class:`PlacementProblem`.

    :param status: ``optimal`` (within ``mip_gap``) or ``time_limit`` (the best plan found).
    :param message: the solver's message.
    :param built: a plant at each candidate.
    :param kw: plant size per candidate (kW; 0 where none is built).
    :param objective: annual cost of the plan (investment + site cost - energy value + penalty).
    :param investment: annualized investment.
    :param site_cost: annual fixed cost of the plants.
    :param energy_value: annual value of the plants' output.
    :param penalty: annual voltage penalty (linear model).
    :param mip_gap: relative gap between the plan and the solver's bound when it stopped.
    :param solve_time_s: wall time of the solve (s).
    :param n_variables: MILP variables.
    :param n_constraints: MILP constraints.
    :param n_voltage_rows: voltage rows kept (the others can never bind).
    """

    status: str
    message: str
    built: np.ndarray
    kw: np.ndarray
    objective: float
    investment: float
    site_cost: float
    energy_value: float
    penalty: float
    mip_gap: float
    solve_time_s: float
    n_variables: int
    n_constraints: int
    n_voltage_rows: int


_MILP_STATUS = {0: "optimal", 1: "time_limit"}


def _constraint_rows(p: PlacementProblem, over: np.ndarray, under: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray]:
    """The MILP's rows over ``[x (nb), s (nb, MW), slacks (one per voltage row)]``: size within
    ``[smin x_b, smax x_b]``, the plant count (overall and per zone), the total size, and one row per
    bus-phase that can leave its band (``over``/``under``: ``(bus-phase, operating point)`` pairs).

    :return: ``(A as CSR, lower, upper)``.
    """
    from scipy import sparse

    nb = len(p.candidates)
    n_rows = len(over) + len(under)
    n_var = 2 * nb + n_rows
    smax, smin = p.max_kw_per_site / 1000.0, p.min_kw_per_site / 1000.0
    x_cols, s_cols = np.arange(nb), nb + np.arange(nb)
    eye = sparse.identity(nb, format="csr")
    zeros_slack = sparse.csr_matrix((nb, n_rows))
    blocks = [sparse.hstack([-smax * eye, eye, zeros_slack])]  # s_b <= smax x_b
    lower, upper = [np.full(nb, -np.inf)], [np.zeros(nb)]
    if smin > 0:
        blocks.append(sparse.hstack([-smin * eye, eye, zeros_slack]))  # s_b >= smin x_b
        lower.append(np.zeros(nb))
        upper.append(np.full(nb, np.inf))
    count_rows = [(x_cols, float(p.n_max))]
    count_rows += [(np.asarray(z, dtype=int), float(p.max_per_zone)) for z in p.zones if p.max_per_zone is not None]
    if p.max_total_kw is not None:
        count_rows.append((s_cols, p.max_total_kw / 1000.0))
    for cols, limit in count_rows:
        row = np.zeros((1, n_var))
        row[0, cols] = 1.0
        blocks.append(sparse.csr_matrix(row))
        lower.append(np.array([-np.inf]))
        upper.append(np.array([limit]))
    if n_rows:
        at = np.vstack([over, under])
        sign = np.concatenate([-np.ones(len(over)), np.ones(len(under))])  # -u above v_max, +l below v_min
        coefficients = sparse.csr_matrix(p.dv_pu_per_kw[at[:, 0], at[:, 1]] * 1000.0)  # pu per MW
        blocks.append(sparse.hstack([sparse.csr_matrix((n_rows, nb)), coefficients, sparse.diags(sign)]))
        v0 = p.v_fixed_pu[at[:, 0], at[:, 1]]
        lower.append(np.concatenate([np.full(len(over), -np.inf), p.v_min_pu - v0[len(over) :]]))
        upper.append(np.concatenate([p.v_max_pu - v0[: len(over)], np.full(len(under), np.inf)]))
    return sparse.vstack(blocks, format="csr"), np.concatenate(lower), np.concatenate(upper)


def solve_placement(
    problem: PlacementProblem, *, time_limit_s: float = 300.0, mip_gap: float = 1e-4
) -> PlacementSolution:
    """Solve the placement MILP with HiGHS.

    :raises G2GError: the solver stopped without a plan (the problem itself is always feasible:
        building nothing is a plan).
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    p = problem
    nb = len(p.candidates)
    # Sizes are MW inside the solve: voltage coefficients then sit near 1e-2 pu, well clear of
    # HiGHS's 1e-7 feasibility tolerance (per kW they would be near 1e-5).
    smax = p.max_kw_per_site / 1000.0
    down, up = p.reach_pu()
    over = np.argwhere(p.v_fixed_pu + up > p.v_max_pu)
    under = np.argwhere(p.v_fixed_pu + down < p.v_min_pu)
    n_rows = len(over) + len(under)
    n_var = 2 * nb + n_rows
    cost = np.concatenate(
        [
            np.full(nb, p.cost_per_site),
            np.full(nb, (p.cost_per_kw - p.value_per_kw) * 1000.0),
            p.penalty_per_pu[over[:, 0]],
            p.penalty_per_pu[under[:, 0]],
        ]
    )
    x_cols, s_cols = np.arange(nb), nb + np.arange(nb)
    a, lower, upper = _constraint_rows(p, over, under)
    bounds = Bounds(np.zeros(n_var), np.concatenate([np.ones(nb), np.full(nb, smax), np.full(n_rows, np.inf)]))
    integrality = np.concatenate([np.ones(nb), np.zeros(nb + n_rows)])
    start = time.perf_counter()
    res = milp(
        cost,
        integrality=integrality,
        bounds=bounds,
        constraints=LinearConstraint(a, lower, upper),
        options={"time_limit": time_limit_s, "mip_rel_gap": mip_gap, "disp": False},
    )
    elapsed = time.perf_counter() - start
    if res.x is None or res.status not in _MILP_STATUS:
        raise G2GError(f"the placement MILP stopped without a plan: {res.message} (status {res.status})")
    kw = np.clip(res.x[s_cols], 0.0, smax) * 1000.0
    built = (res.x[x_cols] > 0.5) & (kw > _BUILT_KW)
    kw = np.where(built, kw, 0.0)
    investment = p.cost_per_kw * float(kw.sum())
    site_cost = p.cost_per_site * int(built.sum())
    energy_value = p.value_per_kw * float(kw.sum())
    penalty = p.penalty(kw)
    gap = getattr(res, "mip_gap", None)
    return PlacementSolution(
        status=_MILP_STATUS[res.status],
        message=str(res.message),
        built=built,
        kw=kw,
        objective=investment + site_cost - energy_value + penalty,
        investment=investment,
        site_cost=site_cost,
        energy_value=energy_value,
        penalty=penalty,
        mip_gap=float("nan") if gap is None else float(gap),
        solve_time_s=elapsed,
        n_variables=n_var,
        n_constraints=a.shape[0],
        n_voltage_rows=n_rows,
    )


# --------------------------------------------------------------------------------- operating points
@dataclass(frozen=True)
class OperatingPoints:
    """The instants of the base run the model is linearized at (see the module docstring).

    :param t_s: scenario time of each point (s), a grid step of the run.
    :param hour: hour of the representative day each point stands for (h).
    :param availability: output of the planned plants at each point (fraction of their kW).
    :param price_per_kwh: value of a kWh of PV output at each point.
    :param hours_per_point: hours of the day each point stands for (h).
    """

    t_s: np.ndarray
    hour: np.ndarray
    availability: np.ndarray
    price_per_kwh: np.ndarray
    hours_per_point: float

    def value_per_kw_year(self, days_per_year: float) -> float:
        """Annual value of the output of one kW installed."""
        return days_per_year * float(self.availability @ self.price_per_kwh) * self.hours_per_point

    def energy_kwh_per_kw_year(self, days_per_year: float) -> float:
        """Annual output of one kW installed (kWh)."""
        return days_per_year * float(self.availability.sum()) * self.hours_per_point


def pick_operating_points(grid_t_s: np.ndarray, duration_s: float, n: int) -> np.ndarray:
    """The ``n`` grid steps nearest ``(k + 1/2) duration_s / n`` (s), ascending.

    :raises SweepError: fewer distinct grid steps than ``n``.
    """
    steps = np.unique(np.asarray(grid_t_s, dtype=float))
    targets = (np.arange(n) + 0.5) * duration_s / n
    nearest = np.abs(steps[None, :] - targets[:, None]).argmin(axis=1)
    picked = np.unique(steps[nearest])
    if len(picked) < n:
        raise SweepError(
            [
                (
                    "operating_points",
                    f"{n} points need {n} distinct grid steps; the run has {len(steps)} over {duration_s:g} s",
                )
            ]
        )
    return picked


def plan_profile(spec: PVPlacementSpec, duration_s: float, points_t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The planned plants' profile over the run, ``(t_s, scale)``: the PV shape every 15 minutes
    of the represented day and at each operating point (so the run's output there is exact)."""
    t = np.union1d(np.linspace(0.0, duration_s, 97), points_t_s)
    return t, spec.pv_shape.availability(24.0 * t / duration_s)


def _all_pv_scales(loaded: LoadedScenario) -> list[tuple[float, float]]:
    """``(t_s, scale)`` of the scenario's ``set_pv_scale`` events that name no PV (they scale
    every plant, the planned ones too), in time order."""
    out = []
    for e in sorted(loaded.scenario.events, key=lambda e: e.t_s):
        if e.command == "set_pv_scale" and e.fields().get("pv") is None:
            out.append((float(e.t_s), float(e.fields()["scale"])))
    return out


def output_fraction(
    t_s: np.ndarray, profile: tuple[np.ndarray, np.ndarray], overrides: Sequence[tuple[float, float]]
) -> np.ndarray:
    """The planned plants' output (fraction of kW) at ``t_s`` as the run draws it: the profile,
    replaced by the last all-PV ``set_pv_scale`` event at or before each time."""
    scale = np.interp(np.asarray(t_s, dtype=float), *profile)
    for t_event, value in overrides:
        scale = np.where(np.asarray(t_s) >= t_event, value, scale)
    return scale


# --------------------------------------------------------------------------------- the feeder at the points
def _window_loads(
    table: pd.DataFrame, t_s: float, grid_s: float, dc_s: float, aggregation: str
) -> dict[str, DatacenterState]:
    """What the run's grid solve at ``t_s`` drew from each site: the site samples in
    ``(t_s - grid_s, t_s]``, averaged (``mean``) or the last one (``last``)."""
    eps = 1e-6 * dc_s
    rows = table[(table["t_s"] > t_s - grid_s + eps) & (table["t_s"] <= t_s + eps)]
    loads: dict[str, DatacenterState] = {}
    p_cols, q_cols = ["p_a_w", "p_b_w", "p_c_w"], ["q_a_var", "q_b_var", "q_c_var"]
    for site, group in rows.groupby("site", observed=True, sort=False):
        pick = group if aggregation == "mean" else group.tail(1)
        loads[str(site)] = DatacenterState(
            site=str(site),
            t_s=t_s,
            p_w=pick[p_cols].to_numpy().mean(axis=0),
            q_var=pick[q_cols].to_numpy().mean(axis=0),
            models={},
        )
    return loads


def _voltages_at(run_dir: Path, t_s: np.ndarray, bus_phases: Sequence[str]) -> np.ndarray:
    """A run's voltages (pu) at the grid steps ``t_s``, (K, I) in ``bus_phases`` order."""
    table = pd.read_parquet(run_dir / "grid_voltages", filters=[("t_s", "in", [float(t) for t in t_s])])
    wide = table.pivot_table(index="t_s", columns="bus_phase", values="v_pu", observed=True)
    return wide.reindex(index=t_s, columns=list(bus_phases)).to_numpy(dtype=float)


class _FeederAtPoints:
    """The base run's feeder solved again at the operating points, with planned plants added.

    Each candidate gets a plant of ``rating_kw`` whose scale sets its output; the sites are drawn
    as the run recorded them.
    """

    def __init__(
        self, loaded: LoadedScenario, run_dir: Path, t_s: np.ndarray, candidates: Sequence[str], rating_kw: float
    ) -> None:
        from openg2g.grid.feeder.backend import FeederGrid

        sc = loaded.scenario
        self.names = [PLAN_PV_PREFIX + b for b in candidates]
        plants = [
            PVSpec.model_validate({"name": n, "bus": b, "kw": rating_kw, "scale": 0.0})
            for n, b in zip(self.names, candidates)
        ]
        # Unity power factor at the sites: voltage_sensitivity lets Q follow P at the power factor
        # of a site on the bus, and a plant injects P alone. The sites' recorded Q is drawn as is.
        sites = [s.model_copy(update={"power_factor": 1.0}) for s in sc.datacenters]
        self.grid = FeederGrid.from_spec(
            sc.grid.model_copy(update={"pv": [*sc.grid.pv, *plants]}), sites, loaded.base_dir
        )
        self.bus_phases = self.grid.bus_phases()
        self.rating_kw = rating_kw
        self.t_s = t_s
        dc = pd.read_parquet(run_dir / "datacenter")
        grid_s, dc_s = float(sc.periods.grid_s), float(sc.periods.datacenter_s)
        self.loads = [_window_loads(dc, float(t), grid_s, dc_s, sc.grid.load_aggregation) for t in t_s]
        self.dc_power_kw = np.array([sum(s.power_w for s in ld.values()) / 1000.0 for ld in self.loads])
        taps = pd.read_parquet(run_dir / "grid").drop_duplicates("t_s").set_index("t_s").loc[t_s]
        self.taps = [
            {
                bank: tuple(int(row[f"tap_{bank}_{phase}"]) for phase in info.phases)
                for bank, info in self.grid.regulators().items()
            }
            for _, row in taps.iterrows()
        ]
        self.events = [
            (float(e.t_s), command)
            for e in sorted(sc.events, key=lambda e: e.t_s)
            if not is_datacenter_command(command := build_event_command(e.command, e.fields()))
        ]

    def _walk(self, output_kw: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """Put the feeder in each operating point's state and solve it; yields ``(k, v_pu)``.

        :param output_kw: planned plants' output (kW) per point and candidate, (K, B).
        :raises G2GError: the feeder does not converge at a point.
        """
        grid = self.grid
        grid.reset(0)
        pending = deque(self.events)
        for k, t in enumerate(self.t_s):
            while pending and pending[0][0] <= t:
                grid.apply(pending.popleft()[1], t)
            for bank, taps in self.taps[k].items():
                grid.apply(SetRegulatorMode(bank, "fixed"), t)
                grid.apply(SetTaps(bank, taps), t)
            for name, kw in zip(self.names, output_kw[k]):
                grid.apply(SetPVScale(scale=min(max(kw / self.rating_kw, 0.0), 1.0), pv=name), t)
            state = grid.solve(float(t), self.loads[k], 0.0)
            if not state.converged:
                raise G2GError(f"the feeder does not converge at operating point t={t:g} s with the plan's output")
            yield k, np.asarray(state.v_pu)

    def solve(self, output_kw: np.ndarray) -> np.ndarray:
        """Voltages (pu) at each point with the plants' ``output_kw`` (K, B), (K, I)."""
        return np.array([v for _, v in self._walk(output_kw)])

    def linearize(
        self, output_kw: np.ndarray, candidates: Sequence[str], bar: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Voltages (pu, (K, I)) and their change per kW of output at each candidate (pu/kW,
        (K, I, B)) at each point with the plants' ``output_kw`` (K, B); ``bar`` counts points."""
        v = np.empty((len(self.t_s), len(self.bus_phases)))
        h = np.empty((len(self.t_s), len(self.bus_phases), len(candidates)))
        for k, v_k in self._walk(output_kw):
            v[k] = v_k
            for j, bus in enumerate(candidates):
                # per-phase dV/dP of power drawn (pu/W); a plant of P kW injects P/3 kW per phase
                h[k, :, j] = -self.grid.voltage_sensitivity(bus).sum(axis=1) * 1000.0 / 3.0
            if bar is not None:
                bar.update(1)
        return v, h


# --------------------------------------------------------------------------------- the study
@dataclass(frozen=True)
class PVPlacementResult:
    """What :func:`run_pv_placement` returns (the tables it writes).

    :param candidates: one row per candidate (``pv_placement.parquet``).
    :param points: one row per operating point (``operating_points.parquet``).
    :param plan: the ``plan.json`` contents.
    :param validation: one row per validation run (``validation.parquet``).
    """

    candidates: pd.DataFrame
    points: pd.DataFrame
    plan: dict[str, Any]
    validation: pd.DataFrame


@dataclass
class _Round:
    """One linearize-and-solve round."""

    number: int
    reference_kw: np.ndarray
    problem: PlacementProblem
    solution: PlacementSolution
    error_pu: float = float("nan")  # largest |linear - nonlinear| at the round's plan


def _problem(
    spec: PVPlacementSpec,
    points: OperatingPoints,
    v_ref: np.ndarray,
    h: np.ndarray,
    reference_kw: np.ndarray,
    candidates: Sequence[str],
    zones: Mapping[str, str],
    limits: tuple[float, float],
) -> PlacementProblem:
    """The MILP linearized at ``reference_kw`` installed (``v_ref``, ``h`` from there)."""
    dv = points.availability[:, None, None] * h
    groups: dict[str, list[int]] = {}
    for j, bus in enumerate(candidates):
        groups.setdefault(zones.get(bus, UPSTREAM_ZONE), []).append(j)
    return PlacementProblem(
        candidates=tuple(candidates),
        v_fixed_pu=v_ref - dv @ reference_kw,
        dv_pu_per_kw=dv,
        v_min_pu=limits[0],
        v_max_pu=limits[1],
        penalty_per_pu=np.full(
            len(points.t_s), spec.days_per_year * spec.violation_cost_per_pu_h * points.hours_per_point
        ),
        value_per_kw=points.value_per_kw_year(spec.days_per_year),
        cost_per_kw=spec.cost_per_kw_year,
        cost_per_site=spec.cost_per_site_year,
        n_max=spec.n_pv,
        max_kw_per_site=spec.max_kw_per_site,
        min_kw_per_site=spec.min_kw_per_site,
        max_total_kw=spec.max_total_kw,
        zones=tuple(tuple(g) for g in groups.values()),
        max_per_zone=spec.max_per_regulator_zone,
    )


def _say(progress: bool, message: str) -> None:
    if progress:
        print(message, file=sys.stderr)


def _optimize(
    spec: PVPlacementSpec,
    points: OperatingPoints,
    feeder: _FeederAtPoints,
    candidates: Sequence[str],
    zones: Mapping[str, str],
    limits: tuple[float, float],
    progress: bool,
) -> tuple[list[_Round], np.ndarray, np.ndarray]:
    """Linearize and solve, round after round (see the module docstring).

    :return: the rounds, the round-1 sensitivities (pu/kW, (K, I, B)) and the nonlinear
        voltages with the final plan (pu, (K, I)).
    """
    a = points.availability
    reference = np.zeros(len(candidates))
    rounds: list[_Round] = []
    h_first = np.empty(0)
    for number in range(1, spec.linearization_rounds + 1):
        with progress_bar(
            progress, total=len(points.t_s), desc=f"{spec.name}: linearizing, round {number}", unit="point"
        ) as bar:
            v_ref, h = feeder.linearize(np.outer(a, reference), candidates, bar)
        if number == 1:
            h_first = h
        else:
            previous = rounds[-1]
            previous.error_pu = float(np.abs(previous.problem.voltages(previous.solution.kw) - v_ref).max())
        problem = _problem(spec, points, v_ref, h, reference, candidates, zones, limits)
        solution = solve_placement(problem, time_limit_s=spec.time_limit_s, mip_gap=spec.mip_gap)
        rounds.append(_Round(number, reference, problem, solution))
        _say(progress, f"round {number}: {solution.status}, {_describe(candidates, solution.kw)}")
        same = number > 1 and np.allclose(solution.kw, reference, atol=_SAME_PLAN_FRACTION * spec.max_kw_per_site)
        reference = solution.kw
        if same:
            break
    final = rounds[-1]
    v_plan = feeder.solve(np.outer(a, final.solution.kw))
    final.error_pu = float(np.abs(final.problem.voltages(final.solution.kw) - v_plan).max())
    return rounds, h_first, v_plan


def _describe(candidates: Sequence[str], kw: np.ndarray) -> str:
    built = [f"{b} {k:,.0f} kW" for b, k in zip(candidates, kw) if k > 0]
    return ", ".join(built) or "no plant"


def _candidate_table(
    candidates: Sequence[str],
    zones: Mapping[str, str],
    solution: PlacementSolution,
    first: PlacementProblem,
    h_first: np.ndarray,
    bus_phases: Sequence[str],
    max_kw_per_site: float,
) -> pd.DataFrame:
    """One row per candidate: zone, plan, sensitivities and linear hosting capacity."""
    rows = []
    for j, bus in enumerate(candidates):
        own = [i for i, bp in enumerate(bus_phases) if bp.rsplit(".", 1)[0] == bus]
        g = first.dv_pu_per_kw[:, :, j]
        rising = (g > 0) & (first.v_fixed_pu <= first.v_max_pu)
        room = np.where(rising, (first.v_max_pu - first.v_fixed_pu) / np.where(rising, g, 1.0), np.inf)
        rows.append(
            {
                "bus": bus,
                "zone": zones.get(bus, UPSTREAM_ZONE),
                "chosen": bool(solution.built[j]),
                "kw": float(solution.kw[j]),
                "dv_self_pu_per_mw": float(h_first[:, own, j].mean() * 1000.0) if own else float("nan"),
                "dv_max_pu_per_mw": float(h_first[:, :, j].max(axis=1).mean() * 1000.0),
                "linear_hosting_kw": float(min(room.min(initial=np.inf), max_kw_per_site)),
            }
        )
    return pd.DataFrame(rows)


def _extremes(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row lowest and highest finite voltage (NaN for a row without any)."""
    finite = np.isfinite(v).any(axis=1)
    lo = np.full(len(v), np.nan)
    hi = np.full(len(v), np.nan)
    lo[finite] = np.nanmin(v[finite], axis=1)
    hi[finite] = np.nanmax(v[finite], axis=1)
    return lo, hi


def _points_table(
    points: OperatingPoints,
    dc_power_kw: np.ndarray,
    v_no_pv: np.ndarray,
    v_linear: np.ndarray,
    v_run: np.ndarray | None,
) -> pd.DataFrame:
    """One row per operating point: inputs, and voltage extremes without PV and with the plan."""
    table = pd.DataFrame(
        {
            "t_s": points.t_s,
            "hour": points.hour,
            "availability": points.availability,
            "price_per_kwh": points.price_per_kwh,
            "dc_power_kw": dc_power_kw,
        }
    )
    for label, v in (("no_pv", v_no_pv), ("plan_linear", v_linear), ("plan_run", v_run)):
        if v is not None:
            table[f"v_min_{label}_pu"], table[f"v_max_{label}_pu"] = _extremes(v)
    if v_run is not None:
        table["max_error_pu"] = np.nanmax(np.abs(v_linear - v_run), axis=1)
    return table


def _num(x: float) -> float | None:
    """A float for JSON (NaN becomes null)."""
    return None if x is None or not np.isfinite(x) else float(x)


def _write_profile(out: Path, profile: tuple[np.ndarray, np.ndarray]) -> Path:
    """Write the plants' profile CSV, named by its content (a changed profile is a changed run)."""
    text = "t_s,scale\n" + "".join(f"{float(t)!r},{float(s)!r}\n" for t, s in zip(*profile))
    path = (out / f"pv_profile_{hashlib.sha256(text.encode()).hexdigest()[:8]}.csv").resolve()
    if not path.exists():
        write_text_atomic(path, text)
    return path


def run_pv_placement(
    base: BaseScenario,
    spec: PVPlacementSpec,
    out_dir: Path,
    engine: Engine,
    *,
    topology: Topology | None = None,
    progress: bool = False,
) -> PVPlacementResult:
    """Run (or resume) a PV placement study and write its tables and plots.

    :param base: base scenario with the study's fixed overrides.
    :param spec: the study, as :func:`~openg2g.studies.load.load_study` returns it (CSV path resolved).
    :param topology: the feeder's topology, for the map.
    :raises SweepError: the run without PV does not complete, too many operating points for the
        run, or the base scenario already has a plant named like a planned one.
    :raises G2GError: the feeder does not converge at an operating point, or the MILP finds no plan.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    feeder = _load_base_feeder(base)
    candidates = candidate_buses(spec, feeder)
    zones = regulator_zones(feeder.model)
    base_pv = _base_plants(base, candidates)
    runs_dir = out / "runs"
    settings: dict[str, Any] = {"controllers": [], "events": base.events_within(), "outputs.voltages": "all"}
    tasks = [make_task(base, "no_pv", 0, {"case": "no_pv", "pv_kw": 0.0}, settings, runs_dir)]
    with engine:
        records, reused = execute_tasks(tasks, engine, progress=progress, desc=f"{spec.name}: run without PV")
        record = records["no_pv"]
        if record["status"] != COMPLETE:
            raise SweepError([(str(base.path), f"the run without PV is {record['status']}: {record['error']}")])
        loaded = load_scenario(tasks[0].scenario, tasks[0].overrides)
        sc = loaded.scenario
        no_pv_dir = Path(tasks[0].out_dir)
        points, profile, overrides = _operating_points(spec, loaded, no_pv_dir)
        t_k = points.t_s
        rating_kw = spec.max_kw_per_site * max(1.0, float(points.availability.max()))
        at_points = _FeederAtPoints(loaded, no_pv_dir, t_k, candidates, rating_kw)
        limits = (sc.grid.v_min_pu, sc.grid.v_max_pu)
        rounds, h_first, v_plan = _optimize(spec, points, at_points, candidates, zones, limits, progress)
        v_no_pv_run = _voltages_at(no_pv_dir, t_k, at_points.bus_phases)
        v_no_pv = rounds[0].problem.v_fixed_pu
        solution = rounds[-1].solution
        v_linear = rounds[-1].problem.voltages(solution.kw)
        plan_pv = [
            {"name": PLAN_PV_PREFIX + b, "bus": b, "kw": float(kw), "power_factor": 1.0}
            for b, kw in zip(candidates, solution.kw)
            if kw > 0
        ]
        v_run = None
        if spec.validate_plan and plan_pv:
            path = _write_profile(out, profile)
            plan_settings = {**settings, "grid.pv": [*base_pv, *({**pv, "profile": str(path)} for pv in plan_pv)]}
            total = float(solution.kw.sum())
            tasks.append(make_task(base, "plan", 1, {"case": "plan", "pv_kw": total}, plan_settings, runs_dir))
            more, more_reused = execute_tasks(
                tasks[1:], engine, progress=progress, desc=f"{spec.name}: run with the plan"
            )
            records.update(more)
            reused |= more_reused
            if more["plan"]["status"] == COMPLETE:
                v_run = _voltages_at(Path(tasks[1].out_dir), t_k, at_points.bus_phases)
    validation = results_table(tasks, records, reused)
    grid_s = float(sc.periods.grid_s)
    validation["pv_energy_kwh"] = [_pv_energy_kwh(task, profile, overrides, grid_s) for task in tasks]
    compared = {"no_pv": (v_no_pv, v_no_pv_run), "plan": (v_linear, v_run)}  # linear model vs the run
    validation["max_model_error_pu"] = [
        _num(float(np.nanmax(np.abs(model - run)))) if run is not None else None
        for model, run in (compared[task.run_id] for task in tasks)
    ]
    candidates_table = _candidate_table(
        candidates, zones, solution, rounds[0].problem, h_first, at_points.bus_phases, spec.max_kw_per_site
    )
    points_table = _points_table(points, at_points.dc_power_kw, v_no_pv, v_linear, v_run)
    plan = _plan_json(spec, base, feeder.name, candidates, zones, rounds, points, validation, v_plan, at_points)
    write_parquet_atomic(candidates_table, out / "pv_placement.parquet")
    write_parquet_atomic(points_table, out / "operating_points.parquet")
    write_parquet_atomic(validation, out / "validation.parquet")
    write_json_atomic(out / "plan.json", plan)
    _plots(spec, topology, candidates_table, points_table, limits, out)
    return PVPlacementResult(candidates_table, points_table, plan, validation)


def _base_plants(base: BaseScenario, candidates: Sequence[str]) -> list[dict[str, Any]]:
    """The base scenario's own PV plants (as data).

    :raises SweepError: one is named like a planned plant.
    """
    base_pv = list((base.data.get("grid") or {}).get("pv") or [])
    taken = {str(pv.get("name")) for pv in base_pv} & {PLAN_PV_PREFIX + b for b in candidates}
    if taken:
        raise SweepError([(f"{base.path}: grid.pv", f"plants named {sorted(taken)} clash with the planned plants")])
    return base_pv


def _operating_points(
    spec: PVPlacementSpec, loaded: LoadedScenario, no_pv_dir: Path
) -> tuple[OperatingPoints, tuple[np.ndarray, np.ndarray], list[tuple[float, float]]]:
    """The study's operating points, picked among the grid steps of the run without PV, with the
    plants' profile and the scenario's PV scale overrides (as :func:`output_fraction` takes them)."""
    duration_s = float(loaded.scenario.duration_s)
    steps = pd.read_parquet(no_pv_dir / "grid", columns=["t_s"])["t_s"].to_numpy()
    t_k = pick_operating_points(steps, duration_s, spec.operating_points)
    profile = plan_profile(spec, duration_s, t_k)
    overrides = _all_pv_scales(loaded)
    hour = 24.0 * t_k / duration_s
    points = OperatingPoints(
        t_s=t_k,
        hour=hour,
        availability=output_fraction(t_k, profile, overrides),
        price_per_kwh=spec.price_per_kwh(hour),
        hours_per_point=24.0 / len(t_k),
    )
    return points, profile, overrides


def _pv_energy_kwh(
    task: RunTask, profile: tuple[np.ndarray, np.ndarray], overrides: Sequence[tuple[float, float]], grid_s: float
) -> float:
    """Energy the planned plants of a validation run produce over its recorded grid steps (kWh)."""
    grid_dir = Path(task.out_dir) / "grid"
    steps = pd.read_parquet(grid_dir, columns=["t_s"])["t_s"].to_numpy() if grid_dir.is_dir() else np.empty(0)
    fraction = output_fraction(steps, profile, overrides)
    return float(task.params["pv_kw"]) * float(fraction.sum()) * grid_s / 3600.0


_RUN_FIGURES = (
    "status",
    "error",
    "violation_integral_pu_s",
    "overvoltage_integral_pu_s",
    "undervoltage_integral_pu_s",
    "violation_time_s",
    "v_min_pu",
    "v_max_pu",
    "pv_kw",
    "pv_energy_kwh",
    "max_model_error_pu",
)
"""Figures of each validation run that ``plan.json`` repeats."""


def _rounds_json(rounds: Sequence[_Round], candidates: Sequence[str]) -> list[dict[str, Any]]:
    """Each linearization round of the plan: where it linearized, what it planned, how well."""
    return [
        {
            "round": r.number,
            "linearized_at": {b: float(k) for b, k in zip(candidates, r.reference_kw) if k > 0},
            "plan": {b: float(k) for b, k in zip(candidates, r.solution.kw) if k > 0},
            "status": r.solution.status,
            "objective_per_year": r.solution.objective,
            "mip_gap": _num(r.solution.mip_gap),
            "linearization_error_pu": _num(r.error_pu),
        }
        for r in rounds
    ]


def _plan_json(
    spec: PVPlacementSpec,
    base: BaseScenario,
    feeder_name: str,
    candidates: Sequence[str],
    zones: Mapping[str, str],
    rounds: Sequence[_Round],
    points: OperatingPoints,
    validation: pd.DataFrame,
    v_plan: np.ndarray,
    at_points: _FeederAtPoints,
) -> dict[str, Any]:
    """The ``plan.json`` contents."""
    final = rounds[-1]
    s, p = final.solution, final.problem
    runs = {
        str(row["case"]): {k: (_num(row[k]) if isinstance(row[k], float) else row[k]) for k in _RUN_FIGURES if k in row}
        for _, row in validation.iterrows()
    }
    return {
        "study": spec.name,
        "base_scenario": str(base.path),
        "feeder": feeder_name,
        "candidates": list(candidates),
        "plan": [
            {"bus": b, "kw": float(kw), "zone": zones.get(b, UPSTREAM_ZONE)}
            for b, kw in zip(candidates, s.kw)
            if kw > 0
        ],
        "total_kw": float(s.kw.sum()),
        "status": s.status,
        "solver": "HiGHS (scipy.optimize.milp)",
        "message": s.message,
        "mip_gap": _num(s.mip_gap),
        "solve_time_s": s.solve_time_s,
        "objective_per_year": s.objective,
        "terms_per_year": {
            "investment": s.investment,
            "site_cost": s.site_cost,
            "energy_value": s.energy_value,
            "violation_penalty": s.penalty,
        },
        "violation_penalty_without_pv_per_year": rounds[0].problem.penalty(np.zeros(len(candidates))),
        "pv_energy_mwh_per_year": points.energy_kwh_per_kw_year(spec.days_per_year) * float(s.kw.sum()) / 1000.0,
        "value_per_kw_year": p.value_per_kw,
        "milp": {
            "variables": s.n_variables,
            "constraints": s.n_constraints,
            "voltage_rows": s.n_voltage_rows,
            "voltage_rows_possible": 2 * p.v_fixed_pu.size,
        },
        "linearization": {
            "operating_points": len(points.t_s),
            "hours_per_point": points.hours_per_point,
            "bus_phases": len(at_points.bus_phases),
            "plan_v_max_nonlinear_pu": _num(float(np.nanmax(v_plan))),
            "plan_v_min_nonlinear_pu": _num(float(np.nanmin(v_plan))),
        },
        "rounds": _rounds_json(rounds, candidates),
        "validation": runs,
        "settings": spec.model_dump(mode="json", by_alias=True),
    }


def _plots(
    spec: PVPlacementSpec,
    topology: Topology | None,
    candidates: pd.DataFrame,
    points: pd.DataFrame,
    limits: tuple[float, float],
    out: Path,
) -> None:
    from openg2g.studies.plots import plot_operating_voltages, plot_plants

    n = int(candidates["chosen"].sum())
    if topology is not None:
        plot_plants(
            topology,
            candidates,
            title=f"{spec.name}: {n} plant{'' if n == 1 else 's'}, {candidates['kw'].sum():,.0f} kW",
            path=out / "pv_placement.png",
        )
    plot_operating_voltages(
        points,
        limits=limits,
        title=f"{spec.name}: voltage extremes per operating point",
        path=out / "pv_placement_voltages.png",
    )

"""The ride-through state machine: what each block of a site does as its bus voltage and the
system frequency move (pure logic: no engine, no simpy, no site).

Two calls drive it, in time order. :meth:`RideThrough.observe` takes a grid solve at ``t_s``
that stands for the step ``(t_s - dt_s, t_s]`` (the solves' steps follow each other without a
gap) and decides: a block on the grid whose curve point is exceeded leaves it (to its UPS, or
stopped), a block off it whose supply has been inside the return band for ``delay_s`` may
return. :meth:`RideThrough.advance` then runs the steps up to the next solve, each with the
site's asked power: it gives, per step, the share of that power drawn from the grid, the share
of the IT load served, and the chargers' power, and runs the UPS energy and the ramps. So what a
solve decides acts from the next step on.

Per block (``fraction`` f of the site's load L on every phase, ``residual_fraction`` r of it not
IT), with ramp progress p in [0, 1]:

==========================  ===================  ==============  ====================
mode                        grid draw g (of fL)  serving s (IT)  UPS delivers (of fL)
==========================  ===================  ==============  ====================
online, recharging          1                    1               0
on_ups                      r                    1               1 - r
ups_empty, tripped          r                    0               0
waiting_return              as the mode it left (on its UPS, or stopped)
returning (from its UPS)    r + (1 - r) p        1               (1 - r)(1 - p)
returning (stopped before)  r + (1 - r) p        p               0
==========================  ===================  ==============  ====================

and the IT energy not served is ``(1 - r)(1 - s) f L dt``, so that per step the grid, the UPS
and what is not served add up to the asked ``f L dt``. While the bus has no supply nothing is
drawn: a block with a UPS that is not empty serves its IT load from it whatever its mode (a
double-conversion UPS carries it without a gap), the others serve nothing, and the non-IT share
is not served either. The UPS gives up ``delivered / discharge_efficiency`` of its stored
energy; a step in which it runs out is served for the part it covers and the block is
``ups_empty`` from that instant (during a return ramp, the grid takes the rest of the load at
once instead). After a ramp a UPS block recharges: its charger draws ``recharge_kw`` (or
``recharge_fraction`` of the block's load) and stores it times ``charge_efficiency`` until the
energy used is back.

Timing rules. Under-voltage watches the lowest phase, over-voltage the highest. A point's
excursion is the time from the start of the first solve outside it to the present solve; the
block acts when it is longer than the point's duration (a sag of exactly the duration rides
through). The return band must hold without a break for ``delay_s`` (exactly ``delay_s`` will
do). Times within :data:`TIME_TOLERANCE_S` count as equal (the engine's times are floats rounded
from exact ticks). A ramp's fractions are its values at each step's end. A transition's time is
the instant it happens: the solve time for what a solve decides, the exact instant within the
step for a UPS running out or its energy coming back, the ramp's start and end for a ramp.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from openg2g.core.errors import CommandError, SimulationError, UnknownNameError
from openg2g.core.limits import MAX_DURATION_S
from openg2g.core.state import MODES, BlockStatus, Mode, RideThroughState
from openg2g.datacenter.ridethrough import BlockSpec, RideThroughSpec

__all__ = [
    "MODES",
    "TIME_TOLERANCE_S",
    "BlockStatus",
    "Cause",
    "EnergyTotals",
    "Mode",
    "RideThrough",
    "RideThroughEvent",
    "RideThroughState",
    "StepFactors",
    "Transition",
]


Cause = Literal[
    "under_voltage",
    "over_voltage",
    "under_frequency",
    "over_frequency",
    "return_band",
    "band_left",
    "auto_return",
    "released",
    "ramp_end",
    "ups_empty",
    "recharged",
    "repeated_sags",
]
"""Why a block changed mode: a curve (with its point), the supply back inside the return band for
``delay_s`` (``return_band``) or out of it again (``band_left``), a ramp's start (``auto_return``,
``released``) or end, the UPS running out, its energy back, a count of sags reached
(``repeated_sags``)."""

TIME_TOLERANCE_S = 1e-6
"""Times closer than this count as equal (s): far below any step, far above a float's rounding of
a time within a year."""

_LEAVES: frozenset[str] = frozenset(
    {"under_voltage", "over_voltage", "under_frequency", "over_frequency", "repeated_sags"}
)
"""The causes that take a block off the grid."""
_ON_GRID: frozenset[str] = frozenset({"online", "returning", "recharging"})
_BACK: frozenset[str] = frozenset({"online", "recharging"})
_CODE = {mode: i for i, mode in enumerate(MODES)}
_J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class Transition:
    """A block's change of mode, for an events table.

    :param t_s: when it happened (s).
    :param block: the block's name.
    :param from_mode: the mode it left.
    :param to_mode: the mode it entered.
    :param cause: why (:data:`Cause`).
    :param point: the curve point's index in its list, for a curve cause; else ``None``.
    :param quantity: what was measured: ``"v_min_pu"`` (the lowest phase), ``"v_max_pu"`` (the
        highest) or ``"f_hz"``; ``None`` for causes that measure nothing.
    :param value: the measured value at the decision (pu or Hz), ``None`` with ``quantity``.
    :param limit: the curve point's level, or the band's edge that was crossed (pu or Hz).
    :param duration_s: how long the excursion (curve) or the supply inside the band (return)
        had lasted (s); ``None`` otherwise.
    """

    t_s: float
    block: str
    from_mode: Mode
    to_mode: Mode
    cause: Cause
    point: int | None = None
    quantity: str | None = None
    value: float | None = None
    limit: float | None = None
    duration_s: float | None = None

    @property
    def reason(self) -> str:
        """The cause as a sentence (``under_voltage point 1: v_min_pu 0.62 below 0.8 for 0.6 s``)."""
        if self.point is not None:
            side = "below" if self.cause.startswith("under") else "above"
            return (
                f"{self.cause} point {self.point}: {self.quantity} {self.value:g} {side} {self.limit:g} "
                f"for {self.duration_s:g} s"
            )
        if self.cause == "return_band":
            return f"supply inside the return band for {self.duration_s:g} s"
        if self.cause == "band_left":
            return f"supply left the return band: {self.quantity} {self.value:g} beyond {self.limit:g}"
        if self.cause == "repeated_sags":
            return f"sag {self.value:g} below {self.limit:g} pu within {self.duration_s:g} s"
        return self.cause.replace("_", " ")

    def fields(self) -> dict[str, Any]:
        """The transition as the fields of an events row (JSON-ready), ``reason`` included."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if v is not None and k != "t_s"}
        out["reason"] = self.reason
        return out


@dataclass
class EnergyTotals:
    """A site's energy and tokens since the reset, all blocks together (J, tokens).

    Per step, ``grid_j + ups_delivered_j + not_served_j`` is the asked ``asked_j``.

    :param asked_j: energy the site asked for (its load whole).
    :param grid_j: energy drawn from the grid for the load (chargers apart).
    :param ups_delivered_j: energy the UPS delivered to the load.
    :param ups_drawn_j: energy drawn from UPS storage (delivered / discharge efficiency).
    :param not_served_j: load not served, IT and non-IT.
    :param recharge_j: energy the chargers drew from the grid.
    :param tokens_asked: output tokens the site would have served whole.
    :param tokens_not_served: of those, the ones not served.
    """

    asked_j: float = 0.0
    grid_j: float = 0.0
    ups_delivered_j: float = 0.0
    ups_drawn_j: float = 0.0
    not_served_j: float = 0.0
    recharge_j: float = 0.0
    tokens_asked: float = 0.0
    tokens_not_served: float = 0.0

    def as_dict(self) -> dict[str, float]:
        """The totals with unit-suffixed names, energies in kWh, for a summary."""
        return {
            "asked_kwh": self.asked_j / _J_PER_KWH,
            "grid_kwh": self.grid_j / _J_PER_KWH,
            "ups_delivered_kwh": self.ups_delivered_j / _J_PER_KWH,
            "ups_drawn_kwh": self.ups_drawn_j / _J_PER_KWH,
            "not_served_kwh": self.not_served_j / _J_PER_KWH,
            "recharge_kwh": self.recharge_j / _J_PER_KWH,
            "tokens_asked": self.tokens_asked,
            "tokens_not_served": self.tokens_not_served,
        }


@dataclass(frozen=True)
class StepFactors:
    """What the site applies to the steps :meth:`RideThrough.advance` ran, one entry per step.

    :param grid_fraction: power drawn from the grid / power the site asks for (chargers apart).
    :param serving_fraction: share of the site's IT load served (tokens, replicas, GPU power).
    :param recharge_w: the chargers' power drawn from the grid, all blocks together (W).
    :param transitions: the transitions within these steps (a UPS running out, a ramp's start
        or end, a recharge's end), in time order.
    :param steady: every block was online throughout: the site is what it asks (the fractions
        are 1 and the chargers off).
    """

    grid_fraction: np.ndarray
    serving_fraction: np.ndarray
    recharge_w: np.ndarray
    transitions: tuple[Transition, ...] = ()
    steady: bool = False


@dataclass(frozen=True)
class RideThroughEvent:
    """One disturbance as the site saw it: from the first block leaving the grid (all on it
    before) to every block back online with its UPS recharged.

    :param start_s: the first block's departure (s).
    :param end_s: every block online again (s); ``None`` while it lasts.
    :param mw_lost: the most load the grid lost at once: asked minus drawn (chargers apart) (MW).
    :param mw_lost_at_s: the end of the first step with that loss (s).
    :param blocks_transferred: blocks that went to their UPS, in order (a block once per event).
    :param blocks_tripped: blocks that tripped.
    :param blocks_ups_empty: blocks whose UPS ran out (or was empty when they transferred).
    :param ups_energy_kwh: energy drawn from the UPS storage (kWh).
    :param recharge_kwh: energy the chargers drew from the grid (kWh).
    :param energy_not_served_kwh: load not served, IT and non-IT (kWh).
    :param tokens_not_served: output tokens the site would have served.
    :param time_to_full_return_s: from the start to every block drawing its full load again
        (online or recharging) (s); ``None`` while some is not.
    """

    start_s: float
    end_s: float | None
    mw_lost: float
    mw_lost_at_s: float | None
    blocks_transferred: tuple[str, ...]
    blocks_tripped: tuple[str, ...]
    blocks_ups_empty: tuple[str, ...]
    ups_energy_kwh: float
    recharge_kwh: float
    energy_not_served_kwh: float
    tokens_not_served: float
    time_to_full_return_s: float | None

    def as_dict(self) -> dict[str, Any]:
        """The figures with their unit-suffixed names, for a summary."""
        return {
            "start_s": self.start_s,
            "end_s": self.end_s,
            "mw_lost": self.mw_lost,
            "mw_lost_at_s": self.mw_lost_at_s,
            "blocks_transferred": list(self.blocks_transferred),
            "blocks_tripped": list(self.blocks_tripped),
            "blocks_ups_empty": list(self.blocks_ups_empty),
            "ups_energy_kwh": self.ups_energy_kwh,
            "recharge_kwh": self.recharge_kwh,
            "energy_not_served_kwh": self.energy_not_served_kwh,
            "tokens_not_served": self.tokens_not_served,
            "time_to_full_return_s": self.time_to_full_return_s,
        }


@dataclass
class _Event:
    """An event's running figures (:class:`RideThroughEvent`), in J and W."""

    start_s: float
    lost_w: float = 0.0
    lost_at_s: float | None = None
    transferred: list[str] = field(default_factory=list)
    tripped: list[str] = field(default_factory=list)
    ups_empty: list[str] = field(default_factory=list)
    ups_j: float = 0.0
    recharge_j: float = 0.0
    not_served_j: float = 0.0
    tokens: float = 0.0
    back_s: float | None = None
    end_s: float | None = None

    def frozen(self) -> RideThroughEvent:
        return RideThroughEvent(
            start_s=self.start_s,
            end_s=self.end_s,
            mw_lost=self.lost_w / 1e6,
            mw_lost_at_s=self.lost_at_s,
            blocks_transferred=tuple(self.transferred),
            blocks_tripped=tuple(self.tripped),
            blocks_ups_empty=tuple(self.ups_empty),
            ups_energy_kwh=self.ups_j / _J_PER_KWH,
            recharge_kwh=self.recharge_j / _J_PER_KWH,
            energy_not_served_kwh=self.not_served_j / _J_PER_KWH,
            tokens_not_served=self.tokens,
            time_to_full_return_s=None if self.back_s is None else self.back_s - self.start_s,
        )


@dataclass(frozen=True)
class _Point:
    """One curve point: which curve, its index, level and duration, and what it watches."""

    cause: Cause
    index: int
    level: float
    duration_s: float
    quantity: str  # v_min_pu, v_max_pu or f_hz
    below: bool  # outside when the quantity is below the level (an under-curve)


def _points(spec: BlockSpec) -> tuple[_Point, ...]:
    curves: tuple[tuple[Cause, str, bool], ...] = (
        ("under_voltage", "v_min_pu", True),
        ("over_voltage", "v_max_pu", False),
        ("under_frequency", "f_hz", True),
        ("over_frequency", "f_hz", False),
    )
    return tuple(
        _Point(cause, i, level, duration_s, quantity, below)
        for cause, quantity, below in curves
        for i, (level, duration_s) in enumerate(getattr(spec, cause))
    )


class _Block:
    """One block's state (mutable; :class:`RideThrough` owns it)."""

    def __init__(self, spec: BlockSpec, share: float, f_min_hz: float | None, f_max_hz: float | None):
        self.spec = spec
        self.name = spec.name
        self.fraction = spec.fraction
        self.share = share
        self.residual = spec.residual_fraction
        self.ups = spec.ups
        self.points = _points(spec)
        under_f = [level for level, _ in spec.under_frequency]
        over_f = [level for level, _ in spec.over_frequency]
        self.f_lo = f_min_hz if f_min_hz is not None else (max(under_f) if under_f else -math.inf)
        self.f_hi = f_max_hz if f_max_hz is not None else (min(over_f) if over_f else math.inf)
        self.capacity_j = 0.0 if spec.ups is None else spec.ups.energy_kwh * _J_PER_KWH
        self.reset()

    def reset(self) -> None:
        self.mode: Mode = "online"
        self.since_s = 0.0
        self.on_ups = False
        self.energy_j = self.capacity_j
        self.starts: list[float | None] = [None] * len(self.points)
        self.sag_starts: collections.deque[float] = collections.deque()  # the sags counted, when each began
        self.in_sag = False
        self.ok_since: float | None = None
        self.ramp_start: float | None = None
        self.ramp_s = 0.0
        self.pending_ramp: float | None = None
        self.pending = False
        self.g = 1.0
        self.s = 1.0

    def out_mode(self) -> Mode:
        """The mode of the block off the grid, from where its IT load is."""
        if self.on_ups:
            return "on_ups"
        return "tripped" if self.ups is None else "ups_empty"


def _block_sum(values: np.ndarray) -> np.ndarray:
    """Per step (row), the sum over the blocks (columns) in their order: one rounding per block,
    the same whatever the number of steps (a matrix product's may differ with it)."""
    total = np.zeros(values.shape[0])
    for j in range(values.shape[1]):
        total += values[:, j]
    return total


def _site_fraction(shares: np.ndarray, per_block: np.ndarray) -> np.ndarray:
    """Per step, the site's fraction ``sum_b w_b x_b / sum_b w_b`` of the blocks' fractions
    ``x_b`` (rows of ``per_block``) weighted by their ``shares`` w_b: exactly 1 when every block
    is whole and exactly 0 when none is, whatever the rounding of the shares' sum."""
    return _block_sum(shares * per_block) / _block_sum(shares[None, :])[0]


class RideThrough:
    """The ride-through of one site's blocks (see the module docstring).

    :param spec: the site's ride-through configuration.
    :param site: the site's name, for messages.
    """

    def __init__(self, spec: RideThroughSpec, site: str):
        self.spec = spec
        self.site = site
        band = spec.return_to_service
        # the blocks' shares of the site's load: their fractions, summing to 1 within 1e-9, made to
        # sum to 1 so that the blocks' loads add up to the site's
        fractions = np.array([b.fraction for b in spec.blocks])
        self._shares = fractions / _block_sum(fractions[None, :])[0]
        self._blocks = [
            _Block(b, share, band.f_min_hz, band.f_max_hz) for b, share in zip(spec.blocks, self._shares.tolist())
        ]
        self._by_name = {b.name: b for b in self._blocks}
        self.reset()

    # ------------------------------------------------------------------ state

    def reset(self) -> None:
        """Every block online, every UPS full, no timer running, nothing recorded."""
        for b in self._blocks:
            b.reset()
        self._observed_s: float | None = None
        self._advanced_s: float | None = None
        self._last_ramp_start: float | None = None
        self._transitions: list[Transition] = []
        self._taken = 0
        # per run of steps: (t_s, (modes, g, s, energy, recharge) per step and block), or
        # (t_s, energy per block) for steady steps, all online, expanded when taken
        self._records: list[tuple[np.ndarray, tuple[np.ndarray, ...] | np.ndarray]] = []
        self._event: _Event | None = None
        self._events: list[_Event] = []
        self.totals = EnergyTotals()

    @property
    def block_names(self) -> tuple[str, ...]:
        """The blocks' names, in the order listed."""
        return tuple(b.name for b in self._blocks)

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """Every transition since the reset, in time order (those at one time in the order decided)."""
        return tuple(self._transitions)

    def take_transitions(self) -> list[Transition]:
        """The transitions since the last call (for an events table written as the run goes)."""
        new = self._transitions[self._taken :]
        self._taken = len(self._transitions)
        return new

    def events(self) -> list[RideThroughEvent]:
        """Every event since the reset, the one still open last (with ``end_s`` ``None``)."""
        return [e.frozen() for e in self._events]

    def state(self) -> RideThroughState:
        """The blocks now, read-only."""
        now = max(t for t in (self._observed_s, self._advanced_s, 0.0) if t is not None)
        blocks = {}
        online = on_ups = 0.0
        for b in self._blocks:
            ups = b.ups is not None
            blocks[b.name] = BlockStatus(
                name=b.name,
                fraction=b.fraction,
                mode=b.mode,
                since_s=b.since_s,
                time_in_mode_s=now - b.since_s,
                on_ups=b.on_ups,
                grid_fraction=b.g,
                serving_fraction=b.s,
                ups_energy_kwh=b.energy_j / _J_PER_KWH if ups else None,
                state_of_charge=b.energy_j / b.capacity_j if ups else None,
                release_pending=b.pending,
            )
            online += b.share if b.mode in _BACK else 0.0
            on_ups += b.share if b.on_ups else 0.0
        return RideThroughState(now, blocks, online, on_ups)

    def take_records(self) -> dict[str, np.ndarray]:
        """The per-step records since the last call, one row per step and block: ``t_s``,
        ``block``, ``mode``, ``grid_fraction``, ``serving_fraction``, ``ups_energy_kwh`` (at the
        step's end; NaN without a UPS) and ``recharge_w`` (the block's charger, W)."""
        chunks, self._records = self._records, []
        names = np.array(self.block_names, dtype=object)
        n = len(self._blocks)
        times: list[np.ndarray] = [np.zeros(0)]
        columns: list[list[np.ndarray]] = [[np.zeros((0, n), dtype=np.int8)], *([np.zeros((0, n))] for _ in range(4))]
        for t_chunk, values in chunks:
            k = t_chunk.size
            times.append(t_chunk)
            if isinstance(values, tuple):
                parts = values
            else:  # steady: online, whole, no charger
                steady = (np.zeros((k, n), dtype=np.int8), np.ones((k, n)), np.ones((k, n)), np.tile(values, (k, 1)))
                parts = (*steady, np.zeros((k, n)))
            for column, part in zip(columns, parts):
                column.append(part)
        t = np.concatenate(times)
        modes, g, s, energy, recharge = (np.concatenate(column) for column in columns)
        mode_names = np.array(MODES, dtype=object)
        return {
            "t_s": np.repeat(t, n),
            "block": np.tile(names, t.size),
            "mode": mode_names[modes.ravel()],
            "grid_fraction": g.ravel(),
            "serving_fraction": s.ravel(),
            "ups_energy_kwh": energy.ravel(),
            "recharge_w": recharge.ravel(),
        }

    # ------------------------------------------------------------------ grid solves

    def observe(self, t_s: float, dt_s: float, v_pu: Sequence[float] | np.ndarray, f_hz: float) -> list[Transition]:
        """A grid solve at ``t_s`` standing for the step ``(t_s - dt_s, t_s]``: the phase-to-neutral
        voltage magnitudes at the site's bus, phases a, b, c (pu, zeros without supply), and the
        system frequency (Hz). Decides what acts from the next step on.

        :returns: the transitions decided.
        :raises SimulationError: a value that is not finite, a negative voltage, a step that is
            not > 0, a solve that does not follow the previous one without a gap, or steps run
            past ``t_s`` before it was observed (their state would have been decided late).
        """
        v = np.asarray(v_pu, dtype=np.float64)
        where = f"t={t_s:g} s: site {self.site!r} ride-through"
        if v.shape != (3,) or not np.isfinite(v).all() or (v < 0).any():
            raise SimulationError(f"{where}: v_pu must be three finite magnitudes >= 0 (phases a, b, c), got {v_pu!r}")
        if not (math.isfinite(f_hz) and f_hz > 0):
            raise SimulationError(f"{where}: f_hz must be a finite frequency > 0, got {f_hz!r}")
        if not (math.isfinite(t_s) and math.isfinite(dt_s) and dt_s > TIME_TOLERANCE_S):
            raise SimulationError(
                f"{where}: needs a finite time and a step > {TIME_TOLERANCE_S:g} s, got dt_s={dt_s!r}"
            )
        if self._observed_s is not None and abs(t_s - dt_s - self._observed_s) > TIME_TOLERANCE_S:
            raise SimulationError(
                f"{where}: the solve stands for ({t_s - dt_s:g}, {t_s:g}] s, but the previous one ended at "
                f"{self._observed_s:g} s: solves must follow each other without a gap or overlap"
            )
        if self._advanced_s is not None and self._advanced_s > t_s + TIME_TOLERANCE_S:
            raise SimulationError(
                f"{where}: the site already ran to {self._advanced_s:g} s; a solve must be observed before the "
                "steps after it run"
            )
        v_min, v_max = float(v.min()), float(v.max())
        measured = {"v_min_pu": v_min, "v_max_pu": v_max, "f_hz": float(f_hz)}
        band = self.spec.return_to_service
        before = len(self._transitions)
        eligible: list[_Block] = []
        for b in self._blocks:
            if b.mode in _ON_GRID:
                self._watch_curves(b, t_s, dt_s, measured)
                continue
            crossed = self._outside_band(b, measured, band.v_min_pu, band.v_max_pu)
            if crossed is not None:
                b.ok_since = None
                if b.mode == "waiting_return":
                    quantity, limit = crossed
                    b.ramp_start = None
                    self._move(
                        b, t_s, b.out_mode(), "band_left", quantity=quantity, value=measured[quantity], limit=limit
                    )
                continue
            if b.ok_since is None:
                b.ok_since = t_s - dt_s
            if b.mode != "waiting_return" and t_s - b.ok_since >= band.delay_s - TIME_TOLERANCE_S:
                eligible.append(b)
        for b in eligible:  # in the order listed: the stagger's order
            assert b.ok_since is not None  # set on this solve or before: the band held
            self._move(b, t_s, "waiting_return", "return_band", duration_s=t_s - b.ok_since)
            if band.mode == "auto":
                self._schedule(b, t_s, band.ramp_s, stagger=True)
            elif b.pending:
                self._schedule(b, t_s, band.ramp_s if b.pending_ramp is None else b.pending_ramp, stagger=False)
        self._observed_s = t_s
        return self._transitions[before:]

    def _watch_curves(self, b: _Block, t_s: float, dt_s: float, measured: Mapping[str, float]) -> None:
        """Run a block's excursion timers on a solve; the first point exceeded acts, else a count
        of sags reached."""
        if self._count_sags(b, t_s, dt_s, measured["v_min_pu"]):
            return
        fired: tuple[_Point, float] | None = None
        for i, point in enumerate(b.points):
            value = measured[point.quantity]
            outside = value < point.level if point.below else value > point.level
            if not outside:
                b.starts[i] = None
                continue
            start = b.starts[i]
            if start is None:
                start = b.starts[i] = t_s - dt_s
            if fired is None and t_s - start > point.duration_s + TIME_TOLERANCE_S:
                fired = (point, t_s - start)
        if fired is None:
            return
        point, excursion_s = fired
        self._leave(
            b,
            t_s,
            point.cause,
            point=point.index,
            quantity=point.quantity,
            value=measured[point.quantity],
            limit=point.level,
            duration_s=excursion_s,
        )

    def _leave(self, b: _Block, t_s: float, cause: Cause, **why: Any) -> None:
        """A block on the grid leaves it at ``t_s`` (to its UPS if it has energy left), for ``cause``."""
        b.on_ups = b.ups is not None and b.energy_j > 0
        new = b.out_mode()
        b.starts = [None] * len(b.points)
        b.sag_starts.clear()
        b.ok_since = None
        b.ramp_start = None
        self._move(b, t_s, new, cause, **why)

    def _count_sags(self, b: _Block, t_s: float, dt_s: float, v_min_pu: float) -> bool:
        """Count a sag starting on this solve (the lowest phase going below the level after being
        at or above it) and act when the ``count``-th falls within the window; True when it acted.
        A sag's start is the start of the first solve below; the window runs back from it."""
        rule = b.spec.repeated_sags
        if rule is None:
            return False
        below = v_min_pu < rule.below_pu
        began = below and not b.in_sag
        b.in_sag = below
        if not began:
            return False
        start = t_s - dt_s
        b.sag_starts.append(start)
        while start - b.sag_starts[0] > rule.within_s + TIME_TOLERANCE_S:
            b.sag_starts.popleft()
        if len(b.sag_starts) < rule.count:
            return False
        span = start - b.sag_starts[0]
        self._leave(
            b, t_s, "repeated_sags", quantity="v_min_pu", value=len(b.sag_starts), limit=rule.below_pu, duration_s=span
        )
        return True

    @staticmethod
    def _outside_band(
        b: _Block, measured: Mapping[str, float], v_min_pu: float, v_max_pu: float
    ) -> tuple[str, float] | None:
        """The quantity outside a block's return band and the edge it crossed, ``None`` if inside."""
        if measured["v_min_pu"] < v_min_pu:
            return "v_min_pu", v_min_pu
        if measured["v_max_pu"] > v_max_pu:
            return "v_max_pu", v_max_pu
        if measured["f_hz"] < b.f_lo:
            return "f_hz", b.f_lo
        if measured["f_hz"] > b.f_hi:
            return "f_hz", b.f_hi
        return None

    def _schedule(self, b: _Block, t_s: float, ramp_s: float, stagger: bool) -> None:
        """Set the start of a block's return ramp: at ``t_s``, or (``stagger``) ``stagger_s``
        after the latest ramp started or scheduled, whichever is later."""
        start = t_s
        if stagger:
            latest = [o.ramp_start for o in self._blocks if o.ramp_start is not None and o is not b]
            if self._last_ramp_start is not None:
                latest.append(self._last_ramp_start)
            if latest:
                start = max(t_s, max(latest) + self.spec.return_to_service.stagger_s)
        b.ramp_start = start
        b.ramp_s = ramp_s
        b.pending = False
        b.pending_ramp = None

    def release(self, block: str, ramp_s: float | None, t_s: float) -> None:
        """A ``release_block`` command at ``t_s``: the block's ramp starts at once if it may
        return now, else when it may (the release waits).

        :raises CommandError: the site returns its blocks itself (mode auto), the ramp is not a
            duration, the block is on the grid, or it was released already.
        :raises UnknownNameError: no block of that name.
        """
        band = self.spec.return_to_service
        where = f"site {self.site!r}: release_block {block!r}"
        if band.mode != "commanded":
            raise CommandError(
                f"{where}: the site returns its blocks itself (ride_through.return_to_service.mode auto)"
            )
        b = self._by_name.get(block)
        if b is None:
            raise UnknownNameError(f"{where}: no such block; the site's blocks: {list(self.block_names)}")
        if ramp_s is not None and not (math.isfinite(ramp_s) and 0 <= ramp_s <= MAX_DURATION_S):
            raise CommandError(f"{where}: ramp_s must be between 0 and {MAX_DURATION_S} s, got {ramp_s!r}")
        if b.mode in _ON_GRID:
            raise CommandError(f"{where}: the block is {b.mode}, on the grid: nothing to release")
        if b.pending or b.ramp_start is not None:
            raise CommandError(f"{where}: the block was released already")
        if b.mode == "waiting_return":
            self._schedule(b, t_s, band.ramp_s if ramp_s is None else ramp_s, stagger=False)
        else:
            b.pending = True
            b.pending_ramp = ramp_s

    # ------------------------------------------------------------------ steps

    def advance(
        self,
        t_s: np.ndarray,
        dt_s: float,
        load_w: np.ndarray,
        tokens: np.ndarray | None = None,
        supplied: bool = True,
    ) -> StepFactors:
        """Run the steps ending at ``t_s`` (ascending, ``dt_s`` apart) with the site asking
        ``load_w`` (W, all phases, per step) and, for the events' figures, serving ``tokens``
        output tokens per step when whole; ``supplied`` False while the bus has no supply.

        :raises SimulationError: the steps do not follow the previous ones without a gap.
        """
        t = np.asarray(t_s, dtype=np.float64)
        load = np.asarray(load_w, dtype=np.float64)
        k = t.size
        if k == 0:
            return StepFactors(np.zeros(0), np.zeros(0), np.zeros(0))
        first_start = float(t[0]) - dt_s
        if self._advanced_s is not None and abs(first_start - self._advanced_s) > TIME_TOLERANCE_S:
            raise SimulationError(
                f"t={float(t[0]):g} s: site {self.site!r} ride-through: the step starts at {first_start:g} s, but "
                f"the previous one ended at {self._advanced_s:g} s: steps must follow each other without a gap"
            )
        self._advanced_s = float(t[-1])
        n = len(self._blocks)
        tok = np.zeros(k) if tokens is None else np.asarray(tokens, dtype=np.float64)
        totals = self.totals
        if supplied and all(b.mode == "online" for b in self._blocks):
            # the steady state: nothing moves, the site is what it asks
            for asked_w, asked_tokens in zip(load.tolist(), tok.tolist()):
                totals.asked_j += asked_w * dt_s
                totals.grid_j += asked_w * dt_s
                totals.tokens_asked += asked_tokens
            ones = np.ones(k)
            self._records.append((t, np.array([b.energy_j / _J_PER_KWH if b.ups else math.nan for b in self._blocks])))
            return StepFactors(ones, ones, np.zeros(k), steady=True)
        before = len(self._transitions)
        modes = np.zeros((k, n), dtype=np.int8)
        g = np.zeros((k, n))
        s = np.zeros((k, n))
        energy = np.zeros((k, n))
        recharge = np.zeros((k, n))
        for i in range(k):
            t1 = float(t[i])
            lost_w = ups_j = recharge_j = not_served_j = 0.0
            open_before = self._event
            decided = len(self._transitions)
            for j, b in enumerate(self._blocks):
                block_w = b.share * float(load[i])
                modes[i, j] = _CODE[b.mode]
                gj, sj, delivered_j, unserved_j, charger_w = self._step_block(b, t1, dt_s, block_w, supplied)
                g[i, j], s[i, j], recharge[i, j] = gj, sj, charger_w
                energy[i, j] = b.energy_j / _J_PER_KWH if b.ups else math.nan
                lost_w += (1.0 - gj) * block_w
                ups_j += delivered_j / b.ups.discharge_efficiency if b.ups else 0.0
                recharge_j += charger_w * dt_s
                not_served_j += unserved_j
                totals.grid_j += gj * block_w * dt_s
                totals.ups_delivered_j += delivered_j
            # block by block, a later block's may be earlier within the step
            self._transitions[decided:] = sorted(self._transitions[decided:], key=lambda x: x.t_s)
            tokens_lost = float(tok[i]) * (1.0 - float(_site_fraction(self._shares, s[i : i + 1])[0]))
            totals.asked_j += float(load[i]) * dt_s
            totals.ups_drawn_j += ups_j
            totals.not_served_j += not_served_j
            totals.recharge_j += recharge_j
            totals.tokens_asked += float(tok[i])
            totals.tokens_not_served += tokens_lost
            # a step in which the event ends (or starts) counts whole in it
            event = self._event or open_before
            if event is not None:
                event.ups_j += ups_j
                event.recharge_j += recharge_j
                event.not_served_j += not_served_j
                event.tokens += tokens_lost
                if lost_w > event.lost_w:
                    event.lost_w, event.lost_at_s = lost_w, t1
        self._records.append((t, (modes, g, s, energy, recharge)))
        return StepFactors(
            _site_fraction(self._shares, g),
            _site_fraction(self._shares, s),
            _block_sum(recharge),
            tuple(self._transitions[before:]),
        )

    def _step_block(
        self, b: _Block, t1: float, dt_s: float, block_w: float, supplied: bool
    ) -> tuple[float, float, float, float, float]:
        """One block over the step ``(t1 - dt_s, t1]`` asking ``block_w`` (W).

        :returns: grid draw fraction, serving fraction, UPS energy delivered (J), energy not
            served (J), charger power (W).
        """
        t0 = t1 - dt_s
        r = b.residual
        if b.mode == "waiting_return" and b.ramp_start is not None and b.ramp_start < t1 - TIME_TOLERANCE_S:
            self._last_ramp_start = b.ramp_start
            cause: Cause = "released" if self.spec.return_to_service.mode == "commanded" else "auto_return"
            self._move(b, b.ramp_start, "returning", cause)
        mode0 = b.mode
        progress = 0.0
        ramp_start = b.ramp_start if b.ramp_start is not None else t1  # set while returning
        if mode0 == "returning":
            progress = 1.0 if b.ramp_s <= 0 else min(1.0, (t1 - ramp_start) / b.ramp_s)
        # the mode's fractions: grid draw (of the block's load), serving and the share of the IT
        # load the UPS carries (of the IT load)
        if b.mode in _BACK:
            g, s, c = 1.0, 1.0, 0.0
        elif b.mode == "returning":
            g = r + (1.0 - r) * progress
            s, c = (1.0, 1.0 - progress) if b.on_ups else (progress, 0.0)
        elif b.on_ups:
            g, s, c = r, 1.0, 1.0
        else:
            g, s, c = r, 0.0, 0.0
        non_it_unserved = 0.0
        if not supplied:
            carried = b.ups is not None and b.energy_j > 0 and b.mode not in ("tripped", "ups_empty")
            g, s, c = 0.0, (s if carried else 0.0), (s if carried else 0.0)
            non_it_unserved = r
        u = (1.0 - r) * c  # what the UPS delivers, of the block's load
        delivered_j = 0.0
        if u > 0 and block_w > 0:
            assert b.ups is not None  # u > 0 only with a UPS
            need_j = u * block_w * dt_s / b.ups.discharge_efficiency
            if need_j <= b.energy_j:
                b.energy_j -= need_j
                delivered_j = u * block_w * dt_s
            else:
                covered = b.energy_j / need_j
                delivered_j = covered * u * block_w * dt_s
                b.energy_j = 0.0
                empty_s = t0 + covered * dt_s
                if supplied and b.mode == "returning":
                    g += (1.0 - covered) * u  # the grid takes the rest of the load at once
                    b.on_ups = False
                    b.ramp_start = None
                    self._move(b, empty_s, "recharging", "ups_empty")
                else:
                    s -= (1.0 - covered) * c  # >= 0: c <= s and the product rounds down from s
                    b.on_ups = False
                    b.ramp_start = None
                    self._move(b, empty_s, "ups_empty", "ups_empty")
        unserved_j = ((1.0 - r) * (1.0 - s) + non_it_unserved) * block_w * dt_s
        charger_w = 0.0
        if mode0 == "recharging" and supplied and b.ups is not None and b.energy_j < b.capacity_j:
            ups = b.ups
            rated_w = ups.recharge_kw * 1000.0 if ups.recharge_kw is not None else ups.recharge_fraction * block_w
            if rated_w > 0:
                deficit_j = b.capacity_j - b.energy_j
                stored_j = rated_w * dt_s * ups.charge_efficiency
                if stored_j >= deficit_j:
                    charger_w = deficit_j / (ups.charge_efficiency * dt_s)
                    b.energy_j = b.capacity_j
                    self._move(b, t0 + deficit_j / (ups.charge_efficiency * rated_w), "online", "recharged")
                else:
                    charger_w = rated_w
                    b.energy_j += stored_j
        if b.mode == "returning" and t1 >= ramp_start + b.ramp_s - TIME_TOLERANCE_S:
            end_s = ramp_start + b.ramp_s
            b.ramp_start = None
            recharge = b.ups is not None and b.energy_j < b.capacity_j
            b.on_ups = False
            self._move(b, end_s, "recharging" if recharge else "online", "ramp_end")
        b.g, b.s = g, s
        return g, s, delivered_j, unserved_j, charger_w

    # ------------------------------------------------------------------ bookkeeping

    def _move(
        self,
        b: _Block,
        t_s: float,
        to_mode: Mode,
        cause: Cause,
        *,
        point: int | None = None,
        quantity: str | None = None,
        value: float | None = None,
        limit: float | None = None,
        duration_s: float | None = None,
    ) -> None:
        """Put a block in ``to_mode`` at ``t_s``, record the transition, and open, follow or
        close the event it belongs to."""
        transition = Transition(t_s, b.name, b.mode, to_mode, cause, point, quantity, value, limit, duration_s)
        self._transitions.append(transition)
        b.mode, b.since_s = to_mode, t_s
        event = self._event
        if event is None:  # all blocks were online: this one leaves, an event starts
            event = self._event = _Event(t_s)
            self._events.append(event)
        if to_mode not in _BACK:
            event.back_s = None
        elif all(o.mode in _BACK for o in self._blocks):
            event.back_s = t_s if event.back_s is None else event.back_s
        named = {"on_ups": event.transferred, "tripped": event.tripped, "ups_empty": event.ups_empty}
        if (cause in _LEAVES or cause == "ups_empty") and to_mode in named and b.name not in named[to_mode]:
            named[to_mode].append(b.name)
        if to_mode == "online" and all(o.mode == "online" for o in self._blocks):
            event.end_s = t_s
            self._event = None

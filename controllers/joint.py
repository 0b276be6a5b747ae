r"""Joint control of regulator taps and batch sizes: the MPC problem with tap moves as choices.

Batch control cannot remove a violation that outlasts its reach (over-voltage while the site
already runs its largest batches, under-voltage with every batch at its smallest), and a tap move
is a scarce resource (each operation wears the regulator). At each control step this controller
scores every one-step tap move it may make, together with the batch sizes, on the horizon problem
of :mod:`openg2g.controllers.mpc`::

    min over u in U, b:   J_mpc(b | base + A u) + w_tap |u|_1

``u`` moves one regulated phase of one bank by one step (or nothing): ``U`` holds no move and
``+-1`` on each phase of each controlled bank that stays within the bank's range, with the bank's
last move at least ``tap_dwell_s`` ago and the operations of the last hour (``|u|_1`` summed over
the moves made in ``(t - 3600 s, t]``) below ``max_tap_operations_per_hour``. ``A`` is the tap
incidence of :func:`openg2g.controllers._forecast.tap_incidence` (a step moves the bus-phases on its phase
by ``step_pu``); the move acts at once and for the whole horizon. For each ``u`` the batch problem is
solved exactly (:meth:`openg2g.controllers.mpc.MPCProblem.solve`), so the decision is exact over
``U x B``. ``w_tap`` (``tap_weight``) is in the MPC's cost units: a move must save more expected
violation, or buy more throughput, over the horizon than it costs.

Operations are counted as ``summary.json`` counts ``n_tap_changes``: steps moved per bank and
phase. Scheduled tap events still fire; the controller foresees them (their shift is in ``base``)
and moves from wherever they leave the bank.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
from pydantic import Field

from openg2g.core.commands import Actuator, Command, SetTaps
from openg2g.core.errors import ControllerError
from openg2g.core.interfaces import ControlContext
from openg2g.core.state import Observation

from ._forecast import tap_incidence
from .mpc import MPCController, MPCProblem

__all__ = ["JointController", "TapMove"]

_HOUR_S = 3600.0

TapMove = tuple[str, int, int]
"""``(bank, phase index, +1 or -1)``: one tap step of one regulated phase."""


class JointController(MPCController):
    """Regulator taps and batch sizes chosen together on the MPC's horizon problem."""

    name = "joint"

    class Config(MPCController.Config):
        """Parameters of :class:`JointController`: the MPC's, and the taps'."""

        banks: list[str] | None = Field(None, description="Regulator banks it may move; None = all.")
        max_tap_operations_per_hour: int = Field(
            ge=0, description="Largest number of tap steps (per bank and phase) in any hour of the run."
        )
        tap_weight: float = Field(0.05, ge=0, description="w_tap: cost of one tap step (MPC cost units).")
        tap_dwell_s: float = Field(
            30.0, ge=0, description="Least time between two moves of one bank (s), so the grid shows the effect."
        )

    config: Config
    requires = "a tap-operation limit (params.max_tap_operations_per_hour)"

    def reset(self, context: ControlContext, seed: int) -> None:
        super().reset(context, seed)
        names = list(context.regulators) if self.config.banks is None else list(self.config.banks)
        unknown = [b for b in names if b not in context.regulators]
        if unknown:
            valid = sorted(context.regulators)
            raise ControllerError(f"joint: unknown regulator banks {unknown}; valid banks: {valid}")
        self._banks = names
        self._incidence = {b: tap_incidence(self._zone_names, context.regulators[b]) for b in names}
        self._moves: deque[float] = deque()  # times of the tap steps made, one entry per step
        self._last_move = {b: -math.inf for b in names}
        self.last_move: TapMove | None = None

    def actuators(self) -> tuple[Actuator, ...]:
        return (*super().actuators(), *(Actuator("regulator", (bank,)) for bank in self._banks))

    def operations_last_hour(self, t_s: float) -> int:
        """Tap steps this controller made in ``(t_s - 3600, t_s]``."""
        while self._moves and self._moves[0] <= t_s - _HOUR_S:
            self._moves.popleft()
        return len(self._moves)

    def candidate_moves(self, observation: Observation) -> list[TapMove]:
        """The one-step tap moves allowed now (range, dwell and hourly budget)."""
        t = observation.t_s
        if self.operations_last_hour(t) >= self.config.max_tap_operations_per_hour:
            return []
        out: list[TapMove] = []
        for bank in self._banks:
            if t - self._last_move[bank] < self.config.tap_dwell_s:
                continue
            reg = self.context.regulators[bank]
            taps = observation.grid.taps.get(bank)
            if taps is None:
                continue
            for p, tap in enumerate(taps):
                out += [(bank, p, d) for d in (-1, 1) if reg.min_tap <= tap + d <= reg.max_tap]
        return out

    def decide(self, prob: MPCProblem, moves: list[TapMove]) -> tuple[TapMove | None, np.ndarray]:
        """The tap move (or None) and batch options of least total cost."""
        cfg = self.config
        choice = prob.solve(cfg.max_combinations)
        best: tuple[float, TapMove | None, np.ndarray] = (float(prob.cost(choice)[0]), None, choice)
        for move in moves:
            bank, p, d = move
            moved = prob.shifted(self._incidence[bank][:, p] * d)
            c = moved.solve(cfg.max_combinations)
            j = float(moved.cost(c)[0]) + cfg.tap_weight
            if j < best[0] - 1e-12:
                best = (j, move, c)
        return best[1], best[2]

    def step(self, observation: Observation) -> list[Command]:
        prob = self.problem(observation)
        move, choice = self.decide(prob, self.candidate_moves(observation))
        self._steps += 1
        out = self.batch_commands(prob, choice)
        self.last_move = move
        if move is not None:
            bank, p, d = move
            taps = list(observation.grid.taps[bank])
            taps[p] += d
            out.append(SetTaps(bank=bank, taps=tuple(taps)))
            self._moves.append(observation.t_s)
            self._last_move[bank] = observation.t_s
        return out

"""Small analytic components for testing the engine itself (ordering, timing, delays, outputs).

They implement the real interfaces with closed-form physics: a site whose per-phase power is
``batch_size`` kW, and the analytic grid of :mod:`openg2g.testing` with one load bus, whose voltage
drops linearly with the load (v = 1 + 0.00625 * tap - K * P_phase), so every expected number can be
computed by hand. Both log their calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from openg2g.core.commands import Command, SetBatchSize, SetTaps
from openg2g.core.errors import CommandError
from openg2g.core.interfaces import Controller, DatacenterBackend, ModelInfo, SiteInfo
from openg2g.core.state import DatacenterState, GridState, ModelState, Observation
from openg2g.scenario.loader import LoadedScenario
from openg2g.scenario.schema import Scenario
from openg2g.testing import AnalyticGrid

K_PU_PER_W = 1e-7  # voltage drop per W on one phase


class KilowattSite(DatacenterBackend):
    """Per-phase power = batch_size kW (or ``ramp_w_per_s * t`` when set); logs every call."""

    def __init__(self, name: str, log: list, ramp_w_per_s: float = 0.0):
        self.name = name
        self.log = log
        self.ramp_w_per_s = ramp_w_per_s
        self.batch = 1

    def info(self) -> SiteInfo:
        model = ModelInfo("toy", 1, 1, (1, 2, 4), (1.0, 2.0, 4.0), (0.01, 0.02, 0.04), (1.0, 2.0, 4.0), 0.05, 1)
        return SiteInfo(self.name, "load", {"toy": model}, 1.0, 1.0)

    def reset(self, seed: int) -> None:
        self.batch = 1

    def step(self, t_s: float, dt_s: float) -> DatacenterState:
        self.log.append(("dc", t_s))
        p = self.ramp_w_per_s * t_s if self.ramp_w_per_s else 1000.0 * self.batch
        model = ModelState("toy", 1, self.batch, 3 * p, 0.01, 100.0, 0.05, 0.0)
        return DatacenterState(self.name, t_s, np.full(3, p), np.zeros(3), {"toy": model})

    def apply(self, command: Command, t_s: float) -> None:
        self.log.append(("apply", t_s, command))
        if not isinstance(command, SetBatchSize):
            raise CommandError(f"unsupported {command}")
        self.batch = command.batch_size


class TwoBusGrid(AnalyticGrid):
    """The analytic grid with one load bus and nothing else on it: v = 1 + 0.00625 * tap - K * P on
    each phase; logs every call and the loads it saw, and refuses all commands but tap changes."""

    def __init__(self, log: list, batchable: bool = False):
        super().__init__(K_PU_PER_W, {"load": 1.0}, feeder_load_w=0.0, pv_w=0.0, batchable=batchable)
        self.log = log
        self.seen_loads: list[np.ndarray] = []

    def solve(self, t_s: float, loads: Mapping[str, DatacenterState], dt_s: float) -> GridState:
        self.log.append(("grid", t_s))
        self.seen_loads.append(sum((s.p_w for s in loads.values()), np.zeros(3)))
        return super().solve(t_s, loads, dt_s)

    def apply(self, command: Command, t_s: float) -> None:
        self.log.append(("apply", t_s, command))
        if not isinstance(command, SetTaps):
            raise CommandError(f"unsupported {command}")
        super().apply(command, t_s)


class ScriptedController(Controller):
    """Logs each observation; at the times in ``script`` returns the listed commands."""

    def __init__(self, log: list, script: dict[float, list[Command]] | None = None, name: str = "scripted"):
        self.log = log
        self.script = script or {}
        self.name = name
        self.observations: list[Observation] = []

    def step(self, observation: Observation) -> list[Command]:
        self.log.append(("control", observation.t_s, self.name))
        self.observations.append(observation)
        return list(self.script.get(round(observation.t_s, 9), []))


def make_loaded(**overrides: Any) -> LoadedScenario:
    """A validated toy scenario (the components are passed to Simulation directly)."""
    data: dict[str, Any] = {
        "name": "toy",
        "duration_s": 5,
        "periods": {"datacenter_s": "1/10", "grid_s": "1/10", "control_s": 1},
        "grid": {"feeder": "two-bus", "v_min_pu": 0.95, "v_max_pu": 1.05},
        "datacenters": [
            {
                "name": "dc",
                "bus": "load",
                "models": [{"model": "toy", "gpus_per_replica": 1, "replicas": 1, "batch_size": 1}],
            }
        ],
        "outputs": {"plots": False},
    }
    for key, value in overrides.items():
        data[key] = value
    return LoadedScenario(Scenario.model_validate(data), Path("toy.yaml"), Path("."), "0" * 64)

"""A small analytic datacenter and feeder (no traces, no solver): test fixtures with known answers.

Like Stable-Baselines3's identity envs, the toy case has a known good policy: voltage at the
datacenter bus falls linearly with the site's power, and the site's power rises with batch size,
so large batches violate the lower voltage limit while small ones waste throughput; the best
policy runs the largest batches that keep the voltage above ``v_min_pu``, lower during training.

Physics (per step, phases a, b, c):

- model replica power ``P = gpus * (250 + 450 * s) W`` with ``s`` in [0, 1] the normalized log2
  batch size, times a seeded noise factor ``1 + 0.02 N(0, 1)``; ITL ``0.02 + 0.06 s^2`` s;
  throughput ``0.8 * batch / ITL`` tok/s per replica; the fraction of tokens over the deadline
  rises linearly from 0 at 0.8 x deadline to 1 at 1.2 x deadline;
- site power per phase: one third of the model and training power, plus a constant base;
- feeder (:class:`AnalyticGrid`): ``v(bus) = 1 + 0.00625 tap - k(bus) (P_phase + load_scale * P_feeder
  - pv_scale * P_pv)`` with ``k(dc) = K_PU_PER_W`` and ``k(mid) = K_PU_PER_W / 2``.

The same grid with other constants (one load bus, no feeder load or PV) is what the engine's own
tests use to check ordering, timing and delays by hand.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from openg2g.core.commands import (
    Command,
    SetBatchSize,
    SetInferenceScale,
    SetLoadScale,
    SetPVScale,
    SetReplicas,
    SetTaps,
)
from openg2g.core.errors import CommandError, ScenarioError
from openg2g.core.interfaces import Controller, DatacenterBackend, GridBackend, ModelInfo, RegulatorInfo, SiteInfo
from openg2g.core.state import DatacenterState, GridState, ModelState
from openg2g.datacenter.training import TrainingJob
from openg2g.scenario.loader import LoadedScenario, apply_override
from openg2g.scenario.schema import Scenario, SiteSpec

__all__ = ["K_PU_PER_W", "TAP_STEP_PU", "AnalyticGrid", "ToySite", "toy_components", "toy_scenario"]

K_PU_PER_W = 1.1e-5
"""Voltage drop at the datacenter bus per W on one phase (pu/W)."""

FEEDER_LOAD_W = 1000.0
"""The feeder's own load per phase at load scale 1 (W)."""

PV_W = 1500.0
"""Toy PV output per phase at PV scale 1 (W)."""

TAP_STEP_PU = 0.00625
"""Voltage change per regulator tap step (pu)."""

TOY_BATCH_SIZES = (8, 16, 32, 64, 128, 256)


def _curves(batch_sizes: tuple[int, ...], gpus: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.log2(np.array(batch_sizes, dtype=float))
    s = (x - x[0]) / (x[-1] - x[0]) if len(x) > 1 else np.zeros_like(x)
    power = gpus * (250.0 + 450.0 * s)
    itl = 0.02 + 0.06 * s**2
    thr = 0.8 * np.array(batch_sizes, dtype=float) / itl
    return power, itl, thr


def _miss_fraction(itl_s: np.ndarray, deadline_s: float | None) -> np.ndarray:
    """Fraction of tokens over the deadline: 0 at ``0.8 * deadline``, rising linearly to 1 at ``1.2 * deadline``."""
    if not deadline_s:
        return np.zeros_like(itl_s)
    return np.clip((itl_s / deadline_s - 0.8) / 0.4, 0.0, 1.0)


class ToySite(DatacenterBackend):
    """An analytic site built from a :class:`~openg2g.scenario.schema.SiteSpec` (see module doc)."""

    def __init__(self, spec: SiteSpec):
        self.name = spec.name
        self.spec = spec
        self._training = TrainingJob(spec.training) if spec.training is not None else None
        self._models = {m.model: m for m in spec.models}
        self._sizes = {m.model: tuple(sorted(m.batch_sizes or TOY_BATCH_SIZES)) for m in spec.models}
        self._curves = {m.model: _curves(self._sizes[m.model], m.gpus_per_replica) for m in spec.models}
        self.reset(0)

    def info(self) -> SiteInfo:
        models = {}
        for name, m in self._models.items():
            power, itl, thr = self._curves[name]
            models[name] = ModelInfo(
                name,
                m.gpus_per_replica,
                m.replicas,
                self._sizes[name],
                tuple(power),
                tuple(itl),
                tuple(thr),
                m.itl_deadline_s,
                m.batch_size,
                miss_fraction=tuple(_miss_fraction(itl, m.itl_deadline_s).tolist()),
            )
        return SiteInfo(self.name, self.spec.bus, models, self.spec.power_factor, self.spec.pue)

    def reset(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._batch = {name: m.batch_size for name, m in self._models.items()}
        # replica ramp per model: (t0, n0, t1, n1)
        self._ramp = {name: (0.0, float(m.replicas), 0.0, float(m.replicas)) for name, m in self._models.items()}

    def _replicas(self, model: str, t_s: float) -> float:
        t0, n0, t1, n1 = self._ramp[model]
        if t_s >= t1:
            return n1
        return n0 + (n1 - n0) * (t_s - t0) / (t1 - t0)

    def step(self, t_s: float, dt_s: float) -> DatacenterState:
        models = {}
        total = 0.0
        for name, m in self._models.items():
            power, itl, thr = self._curves[name]
            i = self._sizes[name].index(self._batch[name])
            n = self._replicas(name, t_s)
            noise = 1.0 + 0.02 * float(self._rng.standard_normal())
            p = n * power[i] * noise
            miss = float(_miss_fraction(itl[i : i + 1], m.itl_deadline_s)[0])
            models[name] = ModelState(
                name, n, self._batch[name], p, float(itl[i]), n * float(thr[i]), m.itl_deadline_s, miss
            )
            total += p
        train = float(self._training.power_w(t_s)) if self._training is not None else 0.0
        p_phase = self.spec.pue * (total + train) / 3.0 + 1000.0 * self.spec.base_load_kw_per_phase
        p_w = np.full(3, p_phase)
        q = p_w * np.tan(np.arccos(self.spec.power_factor))
        return DatacenterState(self.name, t_s, p_w, q, models, training_power_w=train)

    def apply(self, command: Command, t_s: float) -> None:
        if isinstance(command, SetBatchSize):
            if command.batch_size not in self._sizes.get(command.model, ()):
                raise CommandError(f"{self.name}: {command.model} has no batch size {command.batch_size}")
            self._batch[command.model] = command.batch_size
        elif isinstance(command, SetReplicas):
            self._set_ramp(command.model, t_s, float(command.replicas), command.ramp_s)
        elif isinstance(command, SetInferenceScale):
            for name, m in self._models.items():
                self._set_ramp(name, t_s, command.fraction * m.replicas, command.ramp_s)
        else:
            raise CommandError(f"toy site {self.name!r} does not support {type(command).__name__}")

    def _set_ramp(self, model: str, t_s: float, target: float, ramp_s: float) -> None:
        if model not in self._models:
            raise CommandError(f"{self.name}: unknown model {model!r}")
        self._ramp[model] = (t_s, self._replicas(model, t_s), t_s + ramp_s, target)


class AnalyticGrid(GridBackend):
    """A radial feeder from a source through load buses whose voltage drops linearly with the load.

    On each phase ``v(bus) = 1 + TAP_STEP_PU tap - drop(bus) k (P_phase + load_scale feeder_load_w
    - pv_scale pv_w)``, with ``P_phase`` the sites' summed power on that phase (every site feeds the
    last bus). One regulator ``reg1`` (taps -16..16) sits at the source.

    :param k_pu_per_w: voltage drop at the last bus per W on one phase (pu/W).
    :param buses: each load bus and its share of that drop, source side first.
    :param feeder_load_w: the feeder's own load per phase at load scale 1 (W).
    :param pv_w: PV output per phase at PV scale 1 (W).
    :param load_scale: initial load scale.
    :param pv_scale: initial PV scale.
    :param batchable: whether the engine may solve many steps at once (:meth:`can_batch`).
    """

    def __init__(
        self,
        k_pu_per_w: float = K_PU_PER_W,
        buses: Mapping[str, float] | None = None,
        *,
        feeder_load_w: float = FEEDER_LOAD_W,
        pv_w: float = PV_W,
        load_scale: float = 1.0,
        pv_scale: float = 0.0,
        batchable: bool = True,
    ) -> None:
        shares = {"mid": 0.5, "dc": 1.0} if buses is None else dict(buses)
        self.feeder_load_w = feeder_load_w
        self.pv_w = pv_w
        self.load_scale0 = load_scale
        self.pv_scale0 = pv_scale
        self.batchable = batchable
        self._phases = tuple(f"{b}.{p}" for b in shares for p in "abc")
        self._k = np.repeat([share * k_pu_per_w for share in shares.values()], 3)
        self.reset(0)

    def bus_phases(self) -> tuple[str, ...]:
        return self._phases

    def regulators(self) -> Mapping[str, RegulatorInfo]:
        return {"reg1": RegulatorInfo("reg1", ("a", "b", "c"), -16, 16, TAP_STEP_PU)}

    def storages(self) -> tuple[str, ...]:
        return ()

    def reset(self, seed: int) -> None:
        self.taps: tuple[int, ...] = (0, 0, 0)
        self.load_scale = self.load_scale0
        self.pv_scale = self.pv_scale0

    def solve(self, t_s: float, loads: Mapping[str, DatacenterState], dt_s: float) -> GridState:
        p = sum((s.p_w for s in loads.values()), np.zeros(3))
        net = p + self.load_scale * self.feeder_load_w - self.pv_scale * self.pv_w
        n_buses = len(self._phases) // 3
        v = 1.0 + TAP_STEP_PU * np.tile(self.taps, n_buses) - self._k * np.tile(net, n_buses)
        return GridState(t_s, self._phases, v, {"reg1": self.taps}, net, np.zeros(3), 0.0)

    def can_batch(self) -> bool:
        return self.batchable

    def apply(self, command: Command, t_s: float) -> None:
        if isinstance(command, SetTaps):
            self.taps = tuple(command.taps)
        elif isinstance(command, SetLoadScale):
            self.load_scale = command.scale
        elif isinstance(command, SetPVScale):
            self.pv_scale = command.scale
        else:
            raise CommandError(f"analytic grid does not support {type(command).__name__}")

    def voltage_sensitivity(self, bus: str) -> np.ndarray:
        return -self._k[:, None] * np.tile(np.eye(3), (len(self._phases) // 3, 1))


def toy_scenario(duration_s: float = 60, training: bool = True, overrides: Sequence[str] = ()) -> LoadedScenario:
    """The toy scenario: one site ``dc`` with two models at bus ``dc``, 0.1 s steps, 1 s control.

    :param duration_s: run length (s).
    :param training: include a 4-GPU training job from 20 % to 70 % of the run.
    :param overrides: ``dotted.key=value`` overrides, as for scenario files.
    """
    site: dict[str, Any] = {
        "name": "dc",
        "bus": "dc",
        "models": [
            {
                "model": "toy-a",
                "gpus_per_replica": 1,
                "replicas": 12,
                "batch_size": 128,
                "batch_sizes": list(TOY_BATCH_SIZES),
                "itl_deadline_s": 0.06,
            },
            {
                "model": "toy-b",
                "gpus_per_replica": 2,
                "replicas": 4,
                "batch_size": 64,
                "batch_sizes": list(TOY_BATCH_SIZES[:-1]),
                "itl_deadline_s": 0.06,
            },
        ],
    }
    if training:
        # a plain 2 s square wave, 650 W computing 80 % of the time and 250 W communicating
        site["training"] = {
            "gpus": 4,
            "start_s": 0.2 * duration_s,
            "end_s": 0.7 * duration_s,
            "high_w_per_gpu": 650.0,
            "low_w_per_gpu": 250.0,
            "high_s": [1.6, 1.6],
            "low_s": [0.4, 0.4],
            "noise_w": 0.0,
            "dips_per_s": 0.0,
            "smoothing_s": 0.0,
            "ramp_s": 2.0,
            "ramp_from_w_per_gpu": 0.0,
            "peak_w_per_gpu": None,
        }
    data: dict[str, Any] = {
        "name": "toy",
        "duration_s": duration_s,
        "periods": {"datacenter_s": "1/10", "grid_s": "1/10", "control_s": 1},
        "grid": {
            "feeder": "toy",
            "v_min_pu": 0.95,
            "v_max_pu": 1.05,
            "pv": [{"name": "pv1", "bus": "dc", "kw": 4.5, "scale": 0.5}],
        },
        "datacenters": [site],
        "outputs": {"plots": False},
    }
    for assignment in overrides:
        apply_override(data, assignment, "toy")
    scenario = Scenario.model_validate(data)
    digest = hashlib.sha256(scenario.model_dump_json().encode()).hexdigest()
    return LoadedScenario(scenario, Path("toy.yaml"), Path("."), digest)


def toy_components(loaded: LoadedScenario) -> tuple[list[DatacenterBackend], GridBackend, list[Controller]]:
    """Build toy components for a (toy) scenario; its controllers are not built."""
    sites: list[DatacenterBackend] = [
        ToySite(spec) for spec in loaded.scenario.datacenters if isinstance(spec, SiteSpec)
    ]
    if len(sites) < len(loaded.scenario.datacenters):
        raise ScenarioError([("datacenters", "the toy components model replay sites only (no kind: plug-in)")])
    spec = loaded.scenario.grid
    grid = AnalyticGrid(load_scale=spec.load_scale, pv_scale=spec.pv[0].scale if spec.pv else 0.0)
    return sites, grid, []

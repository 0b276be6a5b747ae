"""States: what components report at each step, and what controllers observe.

All states are frozen dataclasses; arrays inside them are made read-only so a controller cannot
change what the engine records. Phases are always ordered ``a, b, c``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

__all__ = [
    "PHASES",
    "DatacenterState",
    "GridState",
    "ModelState",
    "Observation",
    "frozen_array",
]

PHASES: tuple[str, str, str] = ("a", "b", "c")


def frozen_array(values: object, dtype: type = np.float64) -> np.ndarray:
    """Copy ``values`` into a new read-only numpy array."""
    arr = np.array(values, dtype=dtype)
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True)
class ModelState:
    """One served model at one site, at one datacenter step.

    :param model: model name (trace library key).
    :param replicas: active replicas (may be fractional during a ramp).
    :param batch_size: current batch size (max_num_seqs).
    :param power_w: GPU power of all replicas of the model (W).
    :param itl_s: mean inter-token latency over the step's sampled tokens (s).
    :param throughput_tok_s: output tokens per second of all replicas.
    :param itl_deadline_s: the model's ITL deadline (s), ``None`` if it has none.
    :param deadline_miss_fraction: fraction of the step's tokens whose ITL exceeded the deadline.
    :param power_cap_w: per-GPU power cap in force (W), ``None`` if uncapped.
    """

    model: str
    replicas: float
    batch_size: int
    power_w: float
    itl_s: float
    throughput_tok_s: float
    itl_deadline_s: float | None = None
    deadline_miss_fraction: float = 0.0
    power_cap_w: float | None = None


@dataclass(frozen=True)
class DatacenterState:
    """One datacenter site at time ``t_s``.

    :param site: site name.
    :param t_s: simulation time (s).
    :param p_w: active power per phase a, b, c (W), facility total (GPUs, overhead, training).
    :param q_var: reactive power per phase (var).
    :param models: per-model serving state.
    :param training_power_w: power of the training job (W), 0 when none runs.
    :param online: False while the site is out (outage): it then draws nothing.
    """

    site: str
    t_s: float
    p_w: np.ndarray
    q_var: np.ndarray
    models: Mapping[str, ModelState]
    training_power_w: float = 0.0
    online: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "p_w", frozen_array(self.p_w))
        object.__setattr__(self, "q_var", frozen_array(self.q_var))
        object.__setattr__(self, "models", MappingProxyType(dict(self.models)))

    @property
    def power_w(self) -> float:
        """Total active power over the three phases (W)."""
        return float(self.p_w.sum())


@dataclass(frozen=True)
class GridState:
    """Result of one grid solve at time ``t_s``.

    :param t_s: simulation time (s).
    :param bus_phases: names ``"<bus>.<phase>"`` of the monitored bus-phases; the same tuple
        object at every step of a run.
    :param v_pu: voltage magnitude per bus-phase (pu of the bus's nominal line-to-neutral voltage).
    :param taps: regulator bank name -> per-phase tap steps in force.
    :param p_sub_w: substation active power per phase (W, > 0 = drawn from the source).
    :param q_sub_var: substation reactive power per phase (var).
    :param losses_w: total active losses (W).
    :param converged: False if the solver flagged this step as not converged (and the scenario
        asked to continue rather than stop).
    """

    t_s: float
    bus_phases: tuple[str, ...]
    v_pu: np.ndarray
    taps: Mapping[str, tuple[int, ...]]
    p_sub_w: np.ndarray
    q_sub_var: np.ndarray
    losses_w: float
    converged: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "v_pu", frozen_array(self.v_pu))
        object.__setattr__(self, "p_sub_w", frozen_array(self.p_sub_w))
        object.__setattr__(self, "q_sub_var", frozen_array(self.q_sub_var))
        object.__setattr__(self, "taps", MappingProxyType(dict(self.taps)))

    def voltage(self, bus_phase: str) -> float:
        """Voltage magnitude (pu) at ``"<bus>.<phase>"``."""
        try:
            return float(self.v_pu[self.bus_phases.index(bus_phase)])
        except ValueError:
            raise KeyError(f"unknown bus-phase {bus_phase!r}") from None


@dataclass(frozen=True)
class Observation:
    """What a controller sees at a control step: read-only, typed, never backend objects.

    :param t_s: simulation time (s).
    :param datacenters: site name -> latest datacenter state.
    :param grid: latest grid state.
    :param v_min_pu: lower voltage limit of the scenario (pu).
    :param v_max_pu: upper voltage limit of the scenario (pu).
    """

    t_s: float
    datacenters: Mapping[str, DatacenterState]
    grid: GridState
    v_min_pu: float
    v_max_pu: float
    _sensitivity: Callable[[str], np.ndarray] = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "datacenters", MappingProxyType(dict(self.datacenters)))

    def voltage_sensitivity(self, site: str) -> np.ndarray:
        """dV/dP of every monitored bus-phase with respect to the site's per-phase active power.

        :param site: datacenter site name.
        :return: read-only array of shape ``(len(grid.bus_phases), 3)`` in pu per W, for the
            present operating point and taps (reactive power follows at the site's power factor).
        """
        if self._sensitivity is None:
            raise RuntimeError("this observation carries no voltage sensitivity (grid backend has none)")
        return self._sensitivity(site)

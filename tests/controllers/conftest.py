"""Hand-built contexts and observations for controller tests.

The toy feeder has one monitored bus ``"671"`` (phases a, b, c) and a second bus ``"680"``; a
site's per-phase power lowers every voltage by ``K_PU_PER_W`` pu per W (balanced), so expected
numbers follow by hand.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from openg2g.core.interfaces import ControlContext, ModelInfo, RegulatorInfo, SiteInfo
from openg2g.core.state import DatacenterState, GridState, ModelState, Observation, StorageState, StorageUnit

K_PU_PER_W = 1e-8
BUS_PHASES = ("671.a", "671.b", "671.c", "680.a", "680.b", "680.c")


def toy_model(
    name: str = "m1",
    *,
    batch_sizes: Sequence[int] = (8, 16, 32, 64, 128, 256, 512),
    replicas: int = 100,
    gpus: int = 1,
    p_idle_w: float = 300.0,
    p_span_w: float = 400.0,
    itl_deadline_s: float | None = 0.1,
    initial_batch_size: int = 128,
) -> ModelInfo:
    """A model whose per-replica power, ITL and throughput are logistic in log2(batch)."""
    x = np.log2(np.array(batch_sizes, dtype=float))
    s = 1.0 / (1.0 + np.exp(-(x - 6.0)))
    power = p_idle_w + p_span_w * s
    itl = 0.02 + 0.15 / (1.0 + np.exp(-(x - 9.0)))
    thr = 100.0 + 3000.0 * s
    return ModelInfo(
        model=name,
        gpus_per_replica=gpus,
        replicas=replicas,
        batch_sizes=tuple(int(b) for b in batch_sizes),
        power_w=tuple(float(v) for v in power),
        itl_s=tuple(float(v) for v in itl),
        throughput_tok_s=tuple(float(v) for v in thr),
        itl_deadline_s=itl_deadline_s,
        initial_batch_size=initial_batch_size,
    )


def make_context(
    models: Sequence[ModelInfo] | None = None,
    *,
    sites: Mapping[str, Sequence[ModelInfo]] | None = None,
    bus_phases: tuple[str, ...] = BUS_PHASES,
    dt_s: float = 1.0,
    storages: tuple[str, ...] = (),
    pue: float = 1.0,
) -> ControlContext:
    """A context with one site ``dc1`` at bus 671 (or the given sites, at buses 671, 680, ...)."""
    if sites is None:
        sites = {"dc1": list(models) if models is not None else [toy_model()]}
    buses = ["671", "680", "692"]
    infos = {
        name: SiteInfo(name, buses[i], {m.model: m for m in ms}, 0.95, pue)
        for i, (name, ms) in enumerate(sites.items())
    }
    regs = {"reg1": RegulatorInfo("reg1", ("a", "b", "c"), -16, 16, 0.00625)}
    return ControlContext(infos, bus_phases, regs, 0.95, 1.05, dt_s, storages)


def model_state(
    info: ModelInfo, batch_size: int | None = None, itl_s: float | None = None, replicas: float | None = None
) -> ModelState:
    """The state of ``info``'s model at a batch size (its measured mean values)."""
    b = info.initial_batch_size if batch_size is None else batch_size
    i = info.batch_sizes.index(b)
    n = info.replicas if replicas is None else replicas
    return ModelState(
        model=info.model,
        replicas=n,
        batch_size=b,
        power_w=n * info.power_w[i],
        itl_s=info.itl_s[i] if itl_s is None else itl_s,
        throughput_tok_s=n * info.throughput_tok_s[i],
        itl_deadline_s=info.itl_deadline_s,
    )


def make_observation(
    context: ControlContext,
    v_pu: Sequence[float] | float,
    *,
    t_s: float = 0.0,
    batches: Mapping[str, int] | None = None,
    itl_s: Mapping[str, float] | None = None,
    sensitivity: np.ndarray | None = None,
    p_sub_w: Sequence[float] = (1e6, 1e6, 1e6),
    storage: Sequence[StorageState] = (),
) -> Observation:
    """An observation with the given voltages, every model at its batch (default initial) and the
    given batteries' states."""
    batches = dict(batches or {})
    itl_s = dict(itl_s or {})
    dcs = {}
    for name, site in context.sites.items():
        states = {m: model_state(info, batches.get(m), itl_s.get(m)) for m, info in site.models.items()}
        p = sum(s.power_w for s in states.values()) / 3.0
        dcs[name] = DatacenterState(name, t_s, np.full(3, p), np.full(3, p * math.tan(math.acos(0.95))), states)
    n = len(context.bus_phases)
    v = np.full(n, v_pu) if np.ndim(v_pu) == 0 else np.asarray(v_pu, dtype=float)
    grid = GridState(
        t_s,
        context.bus_phases,
        v,
        {"reg1": (0, 0, 0)},
        np.asarray(p_sub_w),
        np.zeros(3),
        0.0,
        storage={b.unit.name: b for b in storage},
    )
    h = -K_PU_PER_W * np.ones((n, 3)) if sensitivity is None else sensitivity
    return Observation(t_s, dcs, grid, context.v_min_pu, context.v_max_pu, lambda site: h)


def battery(
    name: str = "bat1",
    soc: float = 0.5,
    *,
    capacity_kwh: float = 100.0,
    soc_min: float = 0.1,
    soc_max: float = 0.9,
    efficiency: float = 0.9,
    rating_kw: float = 500.0,
) -> StorageState:
    """An idle battery at bus 671 with state of charge ``soc``."""
    unit = StorageUnit(name, "671", rating_kw * 1000.0, capacity_kwh, soc_min, soc_max, efficiency)
    return StorageState(unit, 0.0, 0.0, 0.0, soc)

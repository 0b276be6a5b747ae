"""A SYNTHETIC large feeder for scaling benchmarks: copies of a bundled feeder on a 115 kV chain.

Not a real feeder. Copy ``k`` of the bundled feeder (every bus, element and regulator renamed with
the prefix ``c<k>_``) hangs from bus ``hv<k>`` of a 115 kV three-phase chain through its own
wye-wye 115/4.16 kV substation transformer; the source feeds ``hv0``. With ``openg2g-ieee123``
(278 nodes) 30 copies give 8,430 nodes, about the size of the IEEE 8500-node feeder, and 60 give
16,860. Each copy keeps its loads, capacitors and fixed regulator taps, so the power flow per copy
is as nonlinear as the original's.
"""

from __future__ import annotations

import dataclasses

from openg2g.grid.feeder.library import Feeder, feeder_from_model, load_feeder
from openg2g.grid.feeder.model import FeederModel, LineModel, SourceModel, TransformerModel, WindingModel

_HV_KV = 115.0
_CHAIN_R_OHM, _CHAIN_X_OHM = 0.02, 0.08  # per 115 kV chain section: 0.2 km of a stiff line


def _renamed(model: FeederModel, prefix: str) -> FeederModel:
    """``model`` with every bus and element name prefixed by ``prefix`` (the source left as is)."""

    def bus(name: str) -> str:
        return prefix + name

    def tr(t: TransformerModel) -> TransformerModel:
        windings = [dataclasses.replace(w, bus=bus(w.bus)) for w in t.windings]
        return dataclasses.replace(
            t, name=prefix + t.name, windings=windings, bank=None if t.bank is None else prefix + t.bank
        )

    return dataclasses.replace(
        model,
        bus_kv={bus(b): kv for b, kv in model.bus_kv.items()},
        bus_phases={bus(b): ph for b, ph in model.bus_phases.items()},
        lines=[
            dataclasses.replace(ln, name=prefix + ln.name, bus1=bus(ln.bus1), bus2=bus(ln.bus2)) for ln in model.lines
        ],
        transformers=[tr(t) for t in model.transformers],
        regcontrols=[
            dataclasses.replace(rc, name=prefix + rc.name, transformer=prefix + rc.transformer)
            for rc in model.regcontrols
        ],
        loads=[dataclasses.replace(ld, name=prefix + ld.name, bus=bus(ld.bus)) for ld in model.loads],
        capacitors=[dataclasses.replace(c, name=prefix + c.name, bus=bus(c.bus)) for c in model.capacitors],
        coords={},
    )


def synthetic_feeder(copies: int, base: str = "openg2g-ieee123") -> Feeder:
    """SYNTHETIC feeder of ``copies`` copies of bundled feeder ``base`` (module docstring).

    ``base`` must be fed at its source bus at 4.16 kV, as the IEEE 123 feeders are.
    """
    original = load_feeder(base).model
    abc = ("a", "b", "c")
    bus_kv: dict[str, float] = {}
    bus_phases: dict[str, tuple[str, ...]] = {}
    lines: list[LineModel] = []
    transformers: list[TransformerModel] = []
    parts: list[FeederModel] = []
    for k in range(copies):
        hv = f"hv{k}"
        bus_kv[hv], bus_phases[hv] = _HV_KV, abc
        if k:
            r = [[_CHAIN_R_OHM if i == j else 0.0 for j in range(3)] for i in range(3)]
            x = [[_CHAIN_X_OHM if i == j else _CHAIN_X_OHM / 3 for j in range(3)] for i in range(3)]
            b = [[1.0 if i == j else 0.0 for j in range(3)] for i in range(3)]
            lines.append(LineModel(f"chain{k}", f"hv{k - 1}", hv, abc, abc, r, x, b, 0.2))
        part = _renamed(original, f"c{k}_")
        parts.append(part)
        windings = [
            WindingModel(hv, abc, "wye", _HV_KV, 10000.0, 0.25),
            WindingModel(f"c{k}_{original.source.bus}", abc, "wye", original.source.base_kv, 10000.0, 0.25),
        ]
        transformers.append(TransformerModel(f"sub{k}", 3, windings, x_pct=2.0))
    for part in parts:
        bus_kv.update(part.bus_kv)
        bus_phases.update(part.bus_phases)
    source = SourceModel("hv0", _HV_KV, 1.02, 0.0, [0.1, 0.6], [0.2, 0.9])
    model = FeederModel(
        name=f"synthetic-{copies}x{base}",
        source=source,
        bus_kv=bus_kv,
        bus_phases=bus_phases,
        lines=lines + [ln for p in parts for ln in p.lines],
        transformers=transformers + [t for p in parts for t in p.transformers],
        regcontrols=[rc for p in parts for rc in p.regcontrols],
        loads=[ld for p in parts for ld in p.loads],
        capacitors=[c for p in parts for c in p.capacitors],
    )
    return feeder_from_model(model)

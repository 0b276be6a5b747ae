"""The feeder library: bundled feeders by name, or an OpenDSS master file by path.

>>> from openg2g.grid.feeder.library import list_feeders, load_feeder
>>> feeder = load_feeder("ieee13")
>>> feeder.regulators["reg1"].phases
('a', 'b', 'c')

Bundled feeders are the project's own JSON artifacts under ``openg2g/grid/feeder/data/`` (built by
``openg2g feeders build``, see ``PROVENANCE.md`` there); nothing outside the package is read.
"""

from __future__ import annotations

import gzip
import json
import pickle
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from openg2g.core.errors import FeederError
from openg2g.core.interfaces import RegulatorInfo
from openg2g.core.state import PHASES
from openg2g.grid.feeder.model import FeederModel
from openg2g.grid.feeder.opendss import read_opendss

if TYPE_CHECKING:
    import pandapower as pp

__all__ = ["DATA_DIR", "FORMAT_VERSION", "Feeder", "feeder_from_model", "list_feeders", "load_feeder"]

DATA_DIR = Path(__file__).resolve().parent / "data"
"""Folder of the bundled feeder artifacts."""

FORMAT_VERSION = 2
"""Version of the bundled JSON format (``{"format_version": 2, "feeder": {...}}``)."""


@dataclass
class Feeder:
    """A distribution feeder: its pandapower network and its exact phase-frame model.

    :param name: feeder name.
    :param model: the phase-frame model the solver uses (full phase matrices, per-phase taps).
    :param bus_phases: bus -> phases present (``"a"``, ``"b"``, ``"c"``; a bus's other nodes, such
        as a neutral, are in :attr:`model`).
    :param regulators: regulator bank -> facts.
    :param bank_units: regulator bank -> ``(transformer, phase index)`` per bank phase, in the
        order of ``regulators[bank].phases``.
    :param capacitors: capacitor names.
    :param lines: line and switch names.
    :param coords: bus -> drawing coordinates.
    """

    name: str
    model: FeederModel
    bus_phases: dict[str, tuple[str, ...]]
    regulators: dict[str, RegulatorInfo]
    bank_units: dict[str, tuple[tuple[str, int], ...]]
    capacitors: tuple[str, ...]
    lines: tuple[str, ...]
    coords: dict[str, tuple[float, float]] = field(default_factory=dict)
    _net: pp.pandapowerNet | None = field(default=None, repr=False, compare=False)

    @property
    def net(self) -> pp.pandapowerNet:
        """pandapower network for inspection, editing and saving (sequence values plus the extra
        ``phases`` columns and ``line_phase``/``regulator`` tables), built on first access. The
        solver reads :attr:`model`, so edits to the net do not change solved voltages."""
        if self._net is None:
            from openg2g.grid.feeder.to_pandapower import to_pandapower  # pandapower is slow to import: only on use

            self._net = to_pandapower(self.model)
        return self._net

    def is_ganged(self, bank: str) -> bool:
        """True when regulator ``bank`` is a multi-phase transformer, whose phases share one tap."""
        names = {t for t, _ in self.bank_units[bank]}
        return any(t.n_phases > 1 for t in self.model.transformers if t.name in names)

    @property
    def source_side_buses(self) -> tuple[str, ...]:
        """Buses on the source side of the substation: the source bus, plus the buses reached
        from it through lines and static elements other than transformers (a source reactor)
        when a step-down transformer feeds the rest."""
        m = self.model
        adj: dict[str, set[str]] = {}
        links = [(ln.bus1, ln.bus2) for ln in m.lines]
        # a static series element other than a transformer (a reactor standing for the source
        # impedance) keeps the voltage level
        links += [
            (p.terminals[0][0], bus)
            for p in m.primitives
            if not p.name.startswith("transformer.")
            for bus, _ in p.terminals[1:]
        ]
        for a, b in links:
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)
        seen = {m.source.bus}
        stack = [m.source.bus]
        while stack:
            for nb in adj.get(stack.pop(), ()):
                if nb not in seen:
                    seen.add(nb)
                    stack.append(nb)
        steps_down = any(
            t.windings[0].bus in seen and m.bus_kv[t.windings[1].bus] < m.bus_kv[t.windings[0].bus]
            for t in m.transformers
        )
        if not steps_down:
            seen = {m.source.bus}
        return tuple(b for b in m.bus_kv if b in seen)


def feeder_from_model(model: FeederModel) -> Feeder:
    """Wrap a :class:`FeederModel` as a :class:`Feeder` (builds the pandapower view)."""
    regulators: dict[str, RegulatorInfo] = {}
    units: dict[str, list[tuple[str, str, int]]] = {}
    for t in model.transformers:
        if t.bank is None:
            continue
        for k in range(t.n_phases):
            units.setdefault(t.bank, []).append((t.windings[1].phases[k], t.name, k))
    bank_units: dict[str, tuple[tuple[str, int], ...]] = {}
    for bank, rows in units.items():
        rows.sort(key=lambda r: PHASES.index(r[0]))
        phases = tuple(r[0] for r in rows)
        if len(set(phases)) != len(phases):
            raise FeederError(f"feeder {model.name}: regulator bank {bank!r} regulates a phase twice: {phases}")
        t0 = next(t for t in model.transformers if t.name == rows[0][1])
        regulators[bank] = RegulatorInfo(
            bank=bank,
            phases=phases,
            min_tap=round((t0.min_tap_pu - 1.0) / t0.step_pu),
            max_tap=round((t0.max_tap_pu - 1.0) / t0.step_pu),
            step_pu=t0.step_pu,
        )
        bank_units[bank] = tuple((r[1], r[2]) for r in rows)
    return Feeder(
        name=model.name,
        model=model,
        bus_phases={bus: tuple(n for n in nodes if n in PHASES) for bus, nodes in model.bus_phases.items()},
        regulators=regulators,
        bank_units=bank_units,
        capacitors=tuple(c.name for c in model.capacitors),
        lines=tuple(ln.name for ln in model.lines),
        coords=dict(model.coords),
    )


def _bundled() -> dict[str, Path]:
    """Bundled feeder name -> its artifact (``<name>.json``, or ``<name>.json.gz`` for a large one)."""
    return {p.name.split(".", 1)[0]: p for p in DATA_DIR.iterdir() if p.name.endswith((".json", ".json.gz"))}


def list_feeders() -> list[str]:
    """Names of the bundled feeders."""
    return sorted(_bundled())


@lru_cache(maxsize=32)
def _model_bytes(key: str, mtime_ns: int) -> bytes:
    """The model of a feeder file, read once per file version and kept pickled: each
    :func:`load_feeder` unpickles its own independent copy (4x faster than a deep copy on IEEE 8500)."""
    path = Path(key)
    if path.name.endswith((".json", ".json.gz")):
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        data = json.loads(raw)
        if data.get("format_version") != FORMAT_VERSION:
            raise FeederError(f"{path}: feeder format version {data.get('format_version')} (expected {FORMAT_VERSION})")
        model = FeederModel.from_dict(data["feeder"])
    else:
        model = read_opendss(path, name=path.stem.lower())
    return pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)


def _model(path: Path) -> FeederModel:
    """An independent copy of the model of the feeder file ``path``."""
    model: FeederModel = pickle.loads(_model_bytes(str(path), path.stat().st_mtime_ns))
    return model


def resolve_feeder(name_or_path: str, base_dir: Path | None = None) -> str:
    """``name_or_path`` itself if it is a bundled name or an absolute path, else the path
    relative to ``base_dir`` when that file exists (a scenario's feeder file sits beside it)."""
    if base_dir is None or name_or_path in list_feeders() or Path(name_or_path).is_absolute():
        return name_or_path
    relative = Path(base_dir) / name_or_path
    return str(relative) if relative.is_file() else name_or_path


def load_feeder(name_or_path: str) -> Feeder:
    """A bundled feeder by name (see :func:`list_feeders`), or an OpenDSS master file by path.

    Each call returns an independent :class:`Feeder` (edit it freely).

    :raises FeederError: unknown name (the message lists the valid ones), missing file, or a
        file using OpenDSS features the reader does not support (message gives file:line).
    """
    bundled = _bundled().get(name_or_path)
    if bundled is not None:
        return feeder_from_model(_model(bundled))
    path = Path(name_or_path)
    if path.suffix.lower() == ".dss" or path.is_file():
        if not path.is_file():
            raise FeederError(f"feeder file not found: {path}")
        return feeder_from_model(_model(path.resolve()))
    raise FeederError(
        f"unknown feeder {name_or_path!r}: bundled feeders are {', '.join(list_feeders())} "
        "(or give the path of an OpenDSS .dss master file)"
    )

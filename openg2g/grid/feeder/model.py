"""The phase-frame feeder model: every element with its full phase data, JSON round-trippable.

This is the exact description the solver works from (phase impedance matrices, per-conductor
phase connections, per-winding transformer data, regulator controls, load models). The
pandapower network a :class:`~openg2g.grid.feeder.library.Feeder` exposes is built from it.

Phases are letters ``"a"``, ``"b"``, ``"c"``; a conductor tuple such as ``("c", "b")`` lists the
phase each conductor of the element connects to, in the element's own conductor order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_EMERG_AMPS",
    "DEFAULT_EMERG_KVA_FACTOR",
    "DEFAULT_NORM_AMPS",
    "FREQUENCY_HZ",
    "CapacitorModel",
    "FeederModel",
    "LineModel",
    "LoadModel",
    "RegControlModel",
    "SourceModel",
    "TransformerModel",
    "WindingModel",
    "ZeroSequenceModel",
]

FREQUENCY_HZ = 60.0
"""System frequency of every bundled feeder (Hz)."""

DEFAULT_NORM_AMPS = 400.0
"""OpenDSS's normal rating of a line or linecode whose file sets no ``normamps`` (A)."""

DEFAULT_EMERG_AMPS = 600.0
"""OpenDSS's emergency rating of a line or linecode whose file sets no ``emergamps`` (A)."""

DEFAULT_EMERG_KVA_FACTOR = 1.5
"""OpenDSS's ``emerghkva`` when the file sets none, as a multiple of winding 1's kVA."""


@dataclass
class SourceModel:
    """The Thevenin source (OpenDSS ``Vsource``).

    :param bus: bus it connects to (three-phase, wye grounded).
    :param base_kv: line-to-line base voltage (kV).
    :param v_pu: source voltage (pu of ``base_kv``).
    :param angle_deg: phase-a angle (degrees).
    :param z1_ohm: positive-sequence impedance (ohm), as ``[re, im]``.
    :param z0_ohm: zero-sequence impedance (ohm), as ``[re, im]``.
    :param z2_ohm: negative-sequence impedance (ohm), as ``[re, im]``; ``None`` = ``z1_ohm`` (OpenDSS).
    """

    bus: str
    base_kv: float
    v_pu: float
    angle_deg: float
    z1_ohm: list[float]
    z0_ohm: list[float]
    z2_ohm: list[float] | None = None


@dataclass
class LineModel:
    """A line or switch with its full phase impedance matrix.

    :param name: element name.
    :param bus1: sending bus.
    :param bus2: receiving bus.
    :param phases1: phase of each conductor at ``bus1``.
    :param phases2: phase of each conductor at ``bus2``.
    :param r_ohm: series resistance matrix of the whole line (ohm), n x n.
    :param x_ohm: series reactance matrix of the whole line (ohm), n x n.
    :param b_us: total shunt susceptance matrix of the whole line (microsiemens), n x n.
    :param length_km: length (km), informational (the matrices already hold it).
    :param switch: True for a switch (a near-zero impedance link).
    :param in_service: False when open.
    :param norm_amps: normal current rating of each conductor (A), from the line's or its
        linecode's ``normamps``; ``None`` when the file sets none (OpenDSS then assumes
        :data:`DEFAULT_NORM_AMPS`).
    :param emerg_amps: emergency (short-time) rating (A), ``emergamps``; ``None`` when the file
        sets none (:data:`DEFAULT_EMERG_AMPS`).
    """

    name: str
    bus1: str
    bus2: str
    phases1: tuple[str, ...]
    phases2: tuple[str, ...]
    r_ohm: list[list[float]]
    x_ohm: list[list[float]]
    b_us: list[list[float]]
    length_km: float
    switch: bool = False
    in_service: bool = True
    norm_amps: float | None = None
    emerg_amps: float | None = None

    def ratings_a(self) -> tuple[float, float]:
        """Normal and emergency ratings (A per conductor), OpenDSS's defaults where the file sets none."""
        return (
            DEFAULT_NORM_AMPS if self.norm_amps is None else self.norm_amps,
            DEFAULT_EMERG_AMPS if self.emerg_amps is None else self.emerg_amps,
        )

    def z_ohm(self) -> np.ndarray:
        """Series impedance matrix (ohm), complex n x n."""
        return np.asarray(self.r_ohm, dtype=float) + 1j * np.asarray(self.x_ohm, dtype=float)


@dataclass
class WindingModel:
    """One transformer winding.

    :param bus: bus it connects to.
    :param phases: phase of each conductor (one per transformer phase; a delta winding's phase i
        spans conductors i and i-1, as OpenDSS's default lagging delta).
    :param conn: ``"wye"`` (neutral grounded) or ``"delta"``.
    :param kv: rated voltage (kV): line-to-line for 2- and 3-phase transformers, across the
        winding for 1-phase ones.
    :param kva: rated power (kVA), all phases.
    :param r_pct: winding resistance (% on the winding's rating).
    :param tap: off-nominal ratio (pu) in force at the start.
    """

    bus: str
    phases: tuple[str, ...]
    conn: str
    kv: float
    kva: float
    r_pct: float
    tap: float = 1.0


@dataclass
class TransformerModel:
    """A two-winding transformer (a step regulator is one with a regulator control).

    :param name: element name.
    :param n_phases: number of phases (1 or 3).
    :param windings: the two windings.
    :param x_pct: leakage reactance between the windings (% on winding 1 kVA).
    :param ppm_antifloat: small shunt added to the diagonal (parts per million), as OpenDSS.
    :param bank: regulator bank name, ``None`` for a plain transformer.
    :param min_tap_pu: lowest tap ratio (pu).
    :param max_tap_pu: highest tap ratio (pu).
    :param num_taps: number of tap steps between the two.
    :param norm_kva: normal loading limit (kVA, all phases), OpenDSS ``normhkva``; ``None`` when
        the file sets none (the nameplate ``kva`` of winding 1 is then the rating).
    :param emerg_kva: emergency loading limit (kVA), ``emerghkva``; ``None`` when the file sets
        none (OpenDSS then assumes :data:`DEFAULT_EMERG_KVA_FACTOR` times the nameplate).
    """

    name: str
    n_phases: int
    windings: list[WindingModel]
    x_pct: float
    ppm_antifloat: float = 1.0
    bank: str | None = None
    min_tap_pu: float = 0.9
    max_tap_pu: float = 1.1
    num_taps: int = 32
    norm_kva: float | None = None
    emerg_kva: float | None = None

    def ratings_kva(self) -> tuple[float, float]:
        """Normal and emergency ratings (kVA, all phases): OpenDSS's ``normhkva`` (winding 1's kVA
        when the file sets none) and ``emerghkva`` (1.5 times that kVA when none)."""
        kva = self.windings[0].kva
        return (
            kva if self.norm_kva is None else self.norm_kva,
            DEFAULT_EMERG_KVA_FACTOR * kva if self.emerg_kva is None else self.emerg_kva,
        )

    @property
    def step_pu(self) -> float:
        """Ratio change per tap step (pu)."""
        return round((self.max_tap_pu - self.min_tap_pu) / self.num_taps, 12)


@dataclass
class RegControlModel:
    """A regulator's own band control (OpenDSS ``RegControl``), voltages on the 120 V base.

    :param name: control name.
    :param transformer: controlled transformer.
    :param winding: monitored winding (1-based).
    :param vreg_v: set point (V on 120 V base).
    :param band_v: bandwidth (V on 120 V base).
    :param ptratio: potential transformer ratio.
    :param ctprim_a: CT primary rating (A).
    :param r_v: line-drop compensator R setting (V).
    :param x_v: line-drop compensator X setting (V).
    :param delay_s: time outside the band before the first tap move (s).
    :param ptphase: monitored phase of a multi-phase transformer (1-based conductor).
    """

    name: str
    transformer: str
    winding: int = 2
    vreg_v: float = 120.0
    band_v: float = 3.0
    ptratio: float = 60.0
    ctprim_a: float = 300.0
    r_v: float = 0.0
    x_v: float = 0.0
    delay_s: float = 15.0
    ptphase: int = 1


@dataclass
class LoadModel:
    """A load, OpenDSS semantics (per-phase nominal power, voltage-dependent model).

    :param name: element name.
    :param bus: bus.
    :param phases: phase of each conductor (wye: conductor to ground; delta: conductor i to
        i+1, or to ground for a 1-phase load given one conductor).
    :param conn: ``"wye"`` or ``"delta"``.
    :param model: OpenDSS load model: 1 constant PQ, 2 constant Z, 4 CVR, 5 constant |I|.
    :param kv: rated voltage (kV), line-to-line for 2-/3-phase, across the load for 1-phase.
    :param kw: active power (kW), all phases.
    :param kvar: reactive power (kvar), all phases.
    :param vminpu: below this the load turns constant Z (pu).
    :param vmaxpu: above this the load turns constant Z (pu).
    :param vlowpu: below this the load is its nominal impedance (pu).
    :param cvrwatts: CVR exponent of P (model 4).
    :param cvrvars: CVR exponent of Q (model 4).
    :param n_phases: OpenDSS ``phases`` (power is split evenly over them).
    """

    name: str
    bus: str
    phases: tuple[str | None, ...]
    conn: str
    model: int
    kv: float
    kw: float
    kvar: float
    n_phases: int
    vminpu: float = 0.95
    vmaxpu: float = 1.05
    vlowpu: float = 0.5
    cvrwatts: float = 1.0
    cvrvars: float = 2.0


@dataclass
class CapacitorModel:
    """A shunt capacitor bank.

    :param name: element name.
    :param bus: bus.
    :param phases: phase of each conductor.
    :param conn: ``"wye"`` (grounded) or ``"delta"``.
    :param kvar: rating (kvar), all phases.
    :param kv: rated voltage (kV), line-to-line for 2-/3-phase, across the can for 1-phase.
    :param closed: True when in service.
    """

    name: str
    bus: str
    phases: tuple[str, ...]
    conn: str
    kvar: float
    kv: float
    closed: bool = True


@dataclass
class ZeroSequenceModel:
    """An admittance among three-phase buses that carries zero-sequence current only.

    Between buses i and j it adds ``y[i][j] / 3`` to every pair of their phase nodes, which is
    ``y[i][j]`` in the zero-sequence frame and nothing in the positive and negative ones. It holds
    what a transformer's zero-sequence model has beyond a bank of single-phase units (a converted
    pandapower transformer's magnetizing and winding split, see :mod:`openg2g.grid.nets.asymmetric`).

    :param name: element name.
    :param buses: the buses (each with phases a, b, c).
    :param g_s: conductance matrix over ``buses`` (S).
    :param b_s: susceptance matrix over ``buses`` (S).
    """

    name: str
    buses: tuple[str, ...]
    g_s: list[list[float]]
    b_s: list[list[float]]

    def y_s(self) -> np.ndarray:
        """Zero-sequence admittance matrix over :attr:`buses` (S), complex."""
        return np.asarray(self.g_s, dtype=float) + 1j * np.asarray(self.b_s, dtype=float)


@dataclass
class FeederModel:
    """A whole feeder.

    :param name: feeder name.
    :param source: the source.
    :param bus_kv: bus -> line-to-line base voltage (kV), in a stable order.
    :param bus_phases: bus -> phases present.
    :param lines: lines and switches.
    :param transformers: transformers and regulators.
    :param regcontrols: regulator controls.
    :param loads: loads.
    :param capacitors: capacitors.
    :param zero_sequence: zero-sequence-only admittances (none on an OpenDSS feeder).
    :param coords: bus -> (x, y) drawing coordinates.
    :param frequency_hz: system frequency (Hz).
    """

    name: str
    source: SourceModel
    bus_kv: dict[str, float]
    bus_phases: dict[str, tuple[str, ...]]
    lines: list[LineModel] = field(default_factory=list)
    transformers: list[TransformerModel] = field(default_factory=list)
    regcontrols: list[RegControlModel] = field(default_factory=list)
    loads: list[LoadModel] = field(default_factory=list)
    capacitors: list[CapacitorModel] = field(default_factory=list)
    zero_sequence: list[ZeroSequenceModel] = field(default_factory=list)
    coords: dict[str, tuple[float, float]] = field(default_factory=dict)
    frequency_hz: float = FREQUENCY_HZ

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (tuples become lists)."""
        data = asdict(self)
        # an OpenDSS feeder writes as it did before the fields only a converted pandapower net uses
        if not self.zero_sequence:
            del data["zero_sequence"]
        if self.source.z2_ohm is None:
            del data["source"]["z2_ohm"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FeederModel:
        """Inverse of :meth:`to_dict`."""

        def tup(d: dict[str, Any], *keys: str) -> dict[str, Any]:
            out = dict(d)
            for k in keys:
                out[k] = tuple(out[k])
            return out

        transformers = []
        for t in data["transformers"]:
            t = dict(t)
            t["windings"] = [WindingModel(**tup(w, "phases")) for w in t["windings"]]
            transformers.append(TransformerModel(**t))
        return cls(
            name=data["name"],
            source=SourceModel(**data["source"]),
            bus_kv={k: float(v) for k, v in data["bus_kv"].items()},
            bus_phases={k: tuple(v) for k, v in data["bus_phases"].items()},
            lines=[LineModel(**tup(x, "phases1", "phases2")) for x in data["lines"]],
            transformers=transformers,
            regcontrols=[RegControlModel(**x) for x in data["regcontrols"]],
            loads=[LoadModel(**tup(x, "phases")) for x in data["loads"]],
            capacitors=[CapacitorModel(**tup(x, "phases")) for x in data["capacitors"]],
            zero_sequence=[ZeroSequenceModel(**tup(x, "buses")) for x in data.get("zero_sequence", [])],
            coords={k: (float(v[0]), float(v[1])) for k, v in data["coords"].items()},
            frequency_hz=float(data.get("frequency_hz", FREQUENCY_HZ)),
        )

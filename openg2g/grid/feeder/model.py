"""The phase-frame feeder model: every element with its full phase data, JSON round-trippable.

This is the exact description the solver works from (phase impedance matrices, per-conductor
phase connections, per-winding transformer data, regulator controls, load models). The
pandapower network a :class:`~openg2g.grid.feeder.library.Feeder` exposes is built from it.

Nodes of a bus are labelled as OpenDSS numbers them: ``"a"``, ``"b"``, ``"c"`` for nodes 1-3 (the
phases), the number as text beyond (``"4"``: a neutral or other conductor, :func:`node_label`);
``None`` in a conductor tuple is node 0, ground. A conductor tuple such as ``("c", "b")`` lists the
node each conductor of the element connects to, in the element's own conductor order.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from openg2g.core.state import PHASES

__all__ = [
    "DEFAULT_EMERG_AMPS",
    "DEFAULT_EMERG_KVA_FACTOR",
    "DEFAULT_MAX_CONTROL_ITERATIONS",
    "DEFAULT_NORM_AMPS",
    "FREQUENCY_HZ",
    "CapControlModel",
    "CapacitorModel",
    "FeederModel",
    "GeneratorModel",
    "LineModel",
    "LoadModel",
    "PrimitiveModel",
    "RegControlModel",
    "RegulatedGeneratorModel",
    "SourceModel",
    "SwtControlModel",
    "TransformerModel",
    "WindingModel",
    "ZeroSequenceModel",
    "node_label",
    "node_number",
]


def node_label(node: int) -> str | None:
    """Label of OpenDSS node ``node`` of a bus: ``"a"``, ``"b"``, ``"c"`` for 1-3, the number as
    text beyond (``"4"``), ``None`` for 0 (ground)."""
    if node == 0:
        return None
    return PHASES[node - 1] if node <= 3 else str(node)


def node_number(label: str) -> int:
    """Inverse of :func:`node_label` for a node that is not ground."""
    return PHASES.index(label) + 1 if label in PHASES else int(label)


FREQUENCY_HZ = 60.0
"""System frequency of every bundled feeder (Hz)."""

DEFAULT_NORM_AMPS = 400.0
"""OpenDSS's normal rating of a line or linecode whose file sets no ``normamps`` (A)."""

DEFAULT_EMERG_AMPS = 600.0
"""OpenDSS's emergency rating of a line or linecode whose file sets no ``emergamps`` (A)."""

DEFAULT_EMERG_KVA_FACTOR = 1.5
"""OpenDSS's ``emerghkva`` when the file sets none, as a multiple of winding 1's kVA."""

DEFAULT_MAX_CONTROL_ITERATIONS = 10
"""OpenDSS's ``maxcontroliter`` when the file sets none: the solves of one snapshot ``Solve``."""


@dataclass
class SourceModel:
    """The Thevenin source (OpenDSS ``Vsource``): three-phase (phases a, b, c, wye grounded), or
    single-phase from one phase to ground.

    :param bus: bus it connects to.
    :param base_kv: line-to-line base voltage (kV) of a three-phase source; of a single-phase one,
        the voltage across it (kV), as OpenDSS's ``basekv`` of a one-phase ``Vsource``.
    :param v_pu: source voltage (pu of ``base_kv``).
    :param angle_deg: phase-a angle (degrees), or the angle of a single-phase source's voltage.
    :param z1_ohm: positive-sequence impedance (ohm), as ``[re, im]``; a single-phase source's
        impedance (OpenDSS makes its zero and negative sequences equal to it).
    :param z0_ohm: zero-sequence impedance (ohm), as ``[re, im]``.
    :param z2_ohm: negative-sequence impedance (ohm), as ``[re, im]``; ``None`` = ``z1_ohm`` (OpenDSS).
    :param phase: the phase a single-phase source drives (``"a"``, ``"b"`` or ``"c"``); ``None``
        for a three-phase source.
    """

    bus: str
    base_kv: float
    v_pu: float
    angle_deg: float
    z1_ohm: list[float]
    z0_ohm: list[float]
    z2_ohm: list[float] | None = None
    phase: str | None = None

    @property
    def phases(self) -> tuple[str, ...]:
        """The phases the source drives, in its conductor order."""
        return PHASES if self.phase is None else (self.phase,)


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
    :param length_km: length (km), informational (the matrices already hold it); NaN where the
        file gives the length without a unit (OpenDSS ``units=none``), written as ``null``.
    :param length_unitless: the file's length where it gives no unit (``units=none``), in the unit
        the line's impedances per length were written in, which OpenDSS's ``Bus.Distance`` counts as
        km; ``None`` where the unit is known (then left out of the file).
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
    length_unitless: float | None = None

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
    :param phases: node of each phase conductor (one per transformer phase; a delta winding's
        phase i spans conductors i and i-1, as OpenDSS's default lagging delta).
    :param conn: ``"wye"`` (phase i from its conductor to the neutral) or ``"delta"``.
    :param kv: rated voltage (kV): line-to-line for 2- and 3-phase transformers, across the
        winding for 1-phase ones.
    :param kva: rated power (kVA), all phases.
    :param r_pct: winding resistance (% on the winding's rating).
    :param tap: off-nominal ratio (pu) in force at the start.
    :param neutral: a wye winding's neutral node, ``None`` for solidly grounded (a single-phase
        winding between two phases, as in an open-delta bank, has the second phase as neutral).
    :param rneut_ohm: resistance from that neutral node to ground (ohm); negative for none (open).
    :param xneut_ohm: reactance from that neutral node to ground (ohm).
    """

    bus: str
    phases: tuple[str, ...]
    conn: str
    kv: float
    kva: float
    r_pct: float
    tap: float = 1.0
    neutral: str | None = None
    rneut_ohm: float = -1.0
    xneut_ohm: float = 0.0


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
    :param noloadloss_pct: core loss (% of the kVA), a shunt conductance on winding 2 as OpenDSS
        places it.
    :param imag_pct: magnetizing current (% of rated), a shunt susceptance on winding 2.
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
    noloadloss_pct: float = 0.0
    imag_pct: float = 0.0

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
    :param ptphase: monitored phase of a multi-phase transformer (1-based conductor), or ``"max"``
        / ``"min"``: the highest or lowest of its phases.
    :param tapdelay_s: time between successive tap moves once the first has been made (s).
    :param maxtapchange: most tap steps one control action moves (0 holds the tap).
    :param reversible: True when the control reverses on reverse power flow.
    :param revvreg_v: set point in reverse power flow (V on 120 V base).
    :param revband_v: bandwidth in reverse power flow (V on 120 V base).
    :param revr_v: line-drop compensator R in reverse power flow (V).
    :param revx_v: line-drop compensator X in reverse power flow (V).
    :param revthreshold_kw: reverse power above which the control reverses (kW).
    :param revdelay_s: time the power must stay reversed before the control reverses (s).
    :param vlimit_v: highest voltage the regulated winding may reach (V on 120 V base), 0 = none.
    :param monitored_bus: a remote bus whose voltage the control regulates instead of its own
        winding's (with line-drop compensation off), ``None`` for its own winding.
    :param monitored_node: the node of ``monitored_bus`` it samples.
    :param inverse_time: True when the delay shortens with the distance from the band (OpenDSS's
        inverse-time control).
    :param remote_ptratio: the potential transformer ratio at ``monitored_bus`` (OpenDSS's
        ``remoteptratio``), ``None`` when it is ``ptratio``.
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
    ptphase: int | str = 1
    tapdelay_s: float = 2.0
    maxtapchange: int = 16
    reversible: bool = False
    revvreg_v: float = 120.0
    revband_v: float = 3.0
    revr_v: float = 0.0
    revx_v: float = 0.0
    revthreshold_kw: float = 100.0
    revdelay_s: float = 60.0
    vlimit_v: float = 0.0
    monitored_bus: str | None = None
    monitored_node: str = "a"
    inverse_time: bool = False
    remote_ptratio: float | None = None


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
    :param neutral: a wye load's neutral node, ``None`` for ground.
    :param fixed: True for an OpenDSS load of status ``fixed`` or ``exempt``: the load multiplier
        (OpenDSS's ``LoadMult``, a scenario's ``grid.load_scale``) does not apply to it.
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
    neutral: str | None = None
    fixed: bool = False


@dataclass
class GeneratorModel:
    """Generation the feeder file defines (OpenDSS ``Generator``, ``PVSystem``, ``Storage``), as
    OpenDSS solves it in a snapshot: its output at its voltage band, constant power inside the
    band ``[vminpu, vmaxpu]`` and constant impedance outside it, like a model-1 load drawing the
    negative of the output. The feeder's load scale does not apply to it. A constant-impedance
    element (OpenDSS generator, storage and PV model 2) has the band of the single voltage
    ``vminpu = vmaxpu = 1``: the impedance that delivers its output at 1 pu, at any voltage.

    :param name: element name, with its class (``"pvsystem.pv1"``).
    :param bus: bus.
    :param phases: node of each phase conductor (as :class:`LoadModel`).
    :param conn: ``"wye"`` or ``"delta"``.
    :param kv: rated voltage (kV), line-to-line for 2-/3-phase, across the element for 1-phase.
    :param kw: active power delivered (kW), all phases.
    :param kvar: reactive power delivered (kvar), all phases.
    :param n_phases: OpenDSS ``phases``.
    :param vminpu: below this the output turns constant impedance (pu).
    :param vmaxpu: above this the output turns constant impedance (pu).
    :param neutral: a wye element's neutral node, ``None`` for ground.
    """

    name: str
    bus: str
    phases: tuple[str | None, ...]
    conn: str
    kv: float
    kw: float
    kvar: float
    n_phases: int
    vminpu: float = 0.9
    vmaxpu: float = 1.1
    neutral: str | None = None


@dataclass
class RegulatedGeneratorModel:
    """A generator that holds its voltage (OpenDSS ``Generator`` model 3, a PV bus), as OpenDSS
    solves it in a snapshot: it delivers ``kw`` and the reactive power, the same on every phase,
    that holds the mean magnitude of its phase voltages at ``v_pu``, unless that would take the
    reactive power beyond ``[kvar_min, kvar_max]``, where it stays at the limit and the voltage
    gives way. Its current is ``conj((P + jQ) / V)`` per phase at any voltage (no impedance band).
    The phase voltages are OpenDSS's: conductor to neutral (or ground) on a wye generator, across
    its two conductors on a delta one. The feeder's load scale does not apply to it.

    :param name: element name, with its class (``"generator.g1"``).
    :param bus: bus.
    :param phases: node of each phase conductor (as :class:`LoadModel`).
    :param conn: ``"wye"`` or ``"delta"``.
    :param kv: rated voltage (kV), line-to-line for 2-/3-phase, across the element for 1-phase.
    :param kw: active power delivered (kW), all phases.
    :param n_phases: OpenDSS ``phases``.
    :param v_pu: the voltage it holds (pu): OpenDSS's ``Vpu``, of ``kv / sqrt(3)`` on a 2-/3-phase
        generator and of ``kv`` on a one-phase one, against the mean phase-voltage magnitude, divided
        by ``sqrt(3)`` on a delta generator.
    :param kvar_min: lowest reactive power delivered (kvar, all phases), OpenDSS's ``minkvar``.
    :param kvar_max: highest reactive power delivered (kvar, all phases), ``maxkvar``.
    :param kvar: reactive power OpenDSS solved for it when the file was read (kvar, all phases):
        where openg2g's solve of it starts.
    :param neutral: a wye element's neutral node, ``None`` for ground.
    """

    name: str
    bus: str
    phases: tuple[str | None, ...]
    conn: str
    kv: float
    kw: float
    n_phases: int
    v_pu: float
    kvar_min: float
    kvar_max: float
    kvar: float = 0.0
    neutral: str | None = None


@dataclass
class CapacitorModel:
    """A shunt capacitor bank.

    :param name: element name.
    :param bus: bus.
    :param phases: phase of each conductor.
    :param conn: ``"wye"`` or ``"delta"``.
    :param kvar: rating (kvar), all phases.
    :param kv: rated voltage (kV), line-to-line for 2-/3-phase, across the can for 1-phase.
    :param closed: True when in service.
    :param neutral: a wye bank's neutral node, ``None`` for grounded.
    """

    name: str
    bus: str
    phases: tuple[str, ...]
    conn: str
    kvar: float
    kv: float
    closed: bool = True
    neutral: str | None = None


@dataclass
class CapControlModel:
    """A capacitor's own switching control (OpenDSS ``CapControl``).

    It watches one terminal of a line or transformer (``element``, ``terminal``) and switches the
    capacitor on when the watched quantity crosses ``on_setting`` and off when it crosses
    ``off_setting`` (for ``voltage``: on below, off above; for ``current`` and ``kvar``: on
    above, off below), after the condition has held for ``delay_s`` (on) or ``delayoff_s`` (off),
    and not within ``deadtime_s`` of switching off. With ``voltoverride`` a voltage outside
    ``[vmin_v, vmax_v]`` switches it whatever the main setting says.

    :param name: control name.
    :param capacitor: controlled capacitor.
    :param kind: ``"voltage"`` (V on the PT secondary), ``"current"`` (A on the CT secondary),
        ``"kvar"`` (kvar through the terminal, all phases) or ``"pf"``.
    :param element: watched element with its class (``"line.cap_1a"``).
    :param terminal: watched terminal (1-based).
    :param on_setting: switch-on threshold (unit of ``kind``).
    :param off_setting: switch-off threshold (unit of ``kind``).
    :param delay_s: time the on condition must hold (s).
    :param delayoff_s: time the off condition must hold (s).
    :param deadtime_s: time after switching off before it may switch on again (s).
    :param voltoverride: True to switch on a voltage outside ``[vmin_v, vmax_v]``.
    :param vmin_v: low voltage of the override (V on the PT secondary).
    :param vmax_v: high voltage of the override (V on the PT secondary).
    :param ptratio: potential transformer ratio.
    :param ctratio: current transformer ratio.
    :param ptphase: watched phase for voltage (1-based conductor), or ``"avg"``, ``"max"``, ``"min"``.
    :param ctphase: watched phase for current (1-based conductor), or ``"avg"``, ``"max"``, ``"min"``.
    :param pctminkvar: ``pf`` type: the least reactive power through the terminal that switches the
        capacitor on, as a percentage of its rating (%).
    """

    name: str
    capacitor: str
    kind: str
    element: str
    terminal: int = 1
    on_setting: float = 300.0
    off_setting: float = 200.0
    delay_s: float = 15.0
    delayoff_s: float = 15.0
    deadtime_s: float = 300.0
    voltoverride: bool = False
    vmin_v: float = 115.0
    vmax_v: float = 126.0
    ptratio: float = 60.0
    ctratio: float = 60.0
    ptphase: int | str = 1
    ctphase: int | str = 1
    pctminkvar: float = 50.0


@dataclass
class SwtControlModel:
    """A switch's own control (OpenDSS ``SwtControl``), as the file leaves it.

    OpenDSS keeps a switch control's idea of the switch apart from the element: ``state`` is what
    the control believes (``State=``, closed by default, forcing the element when given), ``action``
    what it is to reach (``Action=``; ``Normal=`` and ``State=`` set it too). When the two differ, a
    solve with controls (``controlmode=static``) operates the element after ``delay_s``.

    :param name: control name.
    :param element: switched element with its class (``"line.tie1"``).
    :param terminal: switched terminal (1-based); operating it opens or closes every conductor there.
    :param action: ``"open"`` or ``"close"``: the state the control drives the switch to.
    :param state: ``"open"`` or ``"closed"``: the state the control holds the switch to be in.
    :param normal: ``"open"`` or ``"closed"``: the state a reset returns it to (``None`` when unset).
    :param locked: True when locked: the control does not operate the switch.
    :param delay_s: time from the sample that calls for an operation to the operation (s).
    """

    name: str
    element: str
    terminal: int = 1
    action: str = "close"
    state: str = "closed"
    normal: str | None = None
    locked: bool = False
    delay_s: float = 120.0


@dataclass
class PrimitiveModel:
    """A static element given by its primitive admittance as OpenDSS computes it: what the typed
    elements above do not describe (a multi-winding or center-tapped transformer, a reactor, a
    fault, a second voltage source). Its admittance never changes during a run.

    :param name: element name, with its class (``"transformer.t5"``).
    :param terminals: ``(bus, node of each conductor)`` per terminal, in OpenDSS's conductor order
        (``None`` = ground).
    :param g_s: conductance matrix over all conductors of all terminals (S).
    :param b_s: susceptance matrix over the same (S).
    :param i_source_a: a voltage source's Norton current into each conductor, ``[re, im]`` (A),
        ``None`` for a passive element.
    :param norm_amps: normal rating of each terminal's conductors (A), ``None`` when unrated.
    :param emerg_amps: emergency rating of each terminal's conductors (A), ``None`` when unrated.
    """

    name: str
    terminals: list[tuple[str, tuple[str | None, ...]]]
    g_s: list[list[float]]
    b_s: list[list[float]]
    i_source_a: list[list[float]] | None = None
    norm_amps: list[float] | None = None
    emerg_amps: list[float] | None = None

    def y_s(self) -> np.ndarray:
        """Primitive admittance matrix (S), complex."""
        return np.asarray(self.g_s, dtype=float) + 1j * np.asarray(self.b_s, dtype=float)


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
    :param generators: generation the file defines.
    :param regulated_generators: generators that hold their voltage (OpenDSS model 3).
    :param capcontrols: capacitor controls.
    :param primitives: static elements by their primitive admittance.
    :param coords: bus -> (x, y) drawing coordinates.
    :param frequency_hz: system frequency (Hz).
    :param swtcontrols: switch controls.
    :param max_control_iterations: the file's ``maxcontroliter``: the most solves one snapshot
        solve with controls makes (OpenDSS's :data:`DEFAULT_MAX_CONTROL_ITERATIONS` when it sets none).
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
    generators: list[GeneratorModel] = field(default_factory=list)
    regulated_generators: list[RegulatedGeneratorModel] = field(default_factory=list)
    capcontrols: list[CapControlModel] = field(default_factory=list)
    primitives: list[PrimitiveModel] = field(default_factory=list)
    coords: dict[str, tuple[float, float]] = field(default_factory=dict)
    frequency_hz: float = FREQUENCY_HZ
    swtcontrols: list[SwtControlModel] = field(default_factory=list)
    max_control_iterations: int = DEFAULT_MAX_CONTROL_ITERATIONS

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (tuples become lists)."""
        data = asdict(self)
        # a feeder writes as it did before the fields it leaves at their defaults (bundled files unchanged)
        if not self.zero_sequence:
            del data["zero_sequence"]
        if not self.regulated_generators:
            del data["regulated_generators"]
        if not self.swtcontrols:
            del data["swtcontrols"]
        if self.max_control_iterations == DEFAULT_MAX_CONTROL_ITERATIONS:
            del data["max_control_iterations"]
        for key in ("z2_ohm", "phase"):
            if data["source"][key] is None:
                del data["source"][key]
        for rc in data["regcontrols"]:
            if rc["remote_ptratio"] is None:
                del rc["remote_ptratio"]
        for line in data["lines"]:  # standard JSON has no NaN
            if not math.isfinite(line["length_km"]):
                line["length_km"] = None
            if line["length_unitless"] is None:  # a line of known unit writes as it did before the field
                del line["length_unitless"]
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
            lines=[LineModel(**_unknown_length_as_nan(tup(x, "phases1", "phases2"))) for x in data["lines"]],
            transformers=transformers,
            regcontrols=[RegControlModel(**x) for x in data["regcontrols"]],
            loads=[LoadModel(**tup(x, "phases")) for x in data["loads"]],
            capacitors=[CapacitorModel(**tup(x, "phases")) for x in data["capacitors"]],
            zero_sequence=[ZeroSequenceModel(**tup(x, "buses")) for x in data.get("zero_sequence", [])],
            generators=[GeneratorModel(**tup(x, "phases")) for x in data.get("generators", [])],
            regulated_generators=[
                RegulatedGeneratorModel(**tup(x, "phases")) for x in data.get("regulated_generators", [])
            ],
            capcontrols=[CapControlModel(**x) for x in data.get("capcontrols", [])],
            primitives=[
                PrimitiveModel(**{**x, "terminals": [(b, tuple(n)) for b, n in x["terminals"]]})
                for x in data.get("primitives", [])
            ],
            coords={k: (float(v[0]), float(v[1])) for k, v in data["coords"].items()},
            frequency_hz=float(data.get("frequency_hz", FREQUENCY_HZ)),
            swtcontrols=[SwtControlModel(**x) for x in data.get("swtcontrols", [])],
            max_control_iterations=int(data.get("max_control_iterations", DEFAULT_MAX_CONTROL_ITERATIONS)),
        )


def _unknown_length_as_nan(line: dict[str, Any]) -> dict[str, Any]:
    """A line's fields with a ``null`` length (unknown unit) read back as NaN."""
    if line["length_km"] is None:
        line["length_km"] = math.nan
    return line

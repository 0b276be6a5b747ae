"""Phase-frame nodal admittance of a feeder: one node per bus-phase, ground eliminated.

The stamps follow OpenDSS: the source is a Thevenin equivalent (Norton current plus its 3x3
admittance), lines are full phase-impedance pi sections, transformers are per-phase two-winding
units with an ideal ratio and the leakage impedance on the tapped winding-2 base, capacitors
are constant admittances and loads contribute their nominal admittance (the solver injects the
difference between the actual load current and that admittance).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from openg2g.core.state import PHASES
from openg2g.grid.feeder.faults import Fault
from openg2g.grid.feeder.model import (
    CapacitorModel,
    FeederModel,
    GeneratorModel,
    LineModel,
    LoadModel,
    PrimitiveModel,
    RegulatedGeneratorModel,
    TransformerModel,
)

__all__ = [
    "FORTESCUE",
    "LoadPorts",
    "NodeIndex",
    "Stamps",
    "Switching",
    "admittance",
    "admittance_sparse",
    "admittance_stamps",
    "antifloat_admittance",
    "capacitor_admittance",
    "energized",
    "line_admittance",
    "load_ports",
    "magnetizing_admittance",
    "node_index",
    "per_phase",
    "primitive_nodes",
    "regulated_branch_kinds",
    "sequence_to_phase",
    "source_admittance",
    "source_current",
    "source_nodes",
    "source_rows",
    "stamp_capacitor",
    "stamp_line",
    "stamp_primitive",
    "stamp_transformer",
    "tap_change_admittance",
    "transformer_phase_block",
    "transformer_winding_admittance",
    "winding_incidence",
    "winding_kv",
    "winding_voltage",
]

_SQRT3 = math.sqrt(3.0)
_SHIFT = {"a": 0.0, "b": -120.0, "c": 120.0}


@dataclass(frozen=True)
class NodeIndex:
    """Numbering of the bus-phase nodes.

    :param names: ``"<bus>.<phase>"`` per node.
    :param index: ``(bus, phase)`` -> node number.
    :param v_base_v: line-to-neutral base voltage per node (V).
    """

    names: tuple[str, ...]
    index: Mapping[tuple[str, str], int]
    v_base_v: np.ndarray

    def __len__(self) -> int:
        return len(self.names)


def node_index(model: FeederModel) -> NodeIndex:
    """Number every bus-phase of ``model`` in bus order, phases a, b, c."""
    names: list[str] = []
    index: dict[tuple[str, str], int] = {}
    base: list[float] = []
    for bus, phases in model.bus_phases.items():
        for ph in phases:
            index[(bus, ph)] = len(names)
            names.append(f"{bus}.{ph}")
            base.append(model.bus_kv[bus] * 1000.0 / _SQRT3)
    return NodeIndex(tuple(names), index, np.array(base))


@dataclass
class Switching:
    """The switchable state the network depends on.

    :param taps_pu: transformer name -> winding-2 tap ratio per phase (pu).
    :param capacitors: capacitor name -> closed.
    :param lines: line name -> in service.
    :param faults: fault name -> the fault in force (:mod:`~openg2g.grid.feeder.faults`), stamped in
        the order placed.
    :param source_pu: the source EMF magnitude per phase a, b, c (pu of the source's base voltage),
        a sag or swell; ``None`` keeps the model's ``source.v_pu`` on every phase.
    """

    taps_pu: dict[str, np.ndarray]
    capacitors: dict[str, bool]
    lines: dict[str, bool]
    faults: dict[str, Fault] = field(default_factory=dict)
    source_pu: tuple[float, float, float] | None = None

    @classmethod
    def initial(cls, model: FeederModel) -> Switching:
        """The state the feeder file describes."""
        return cls(
            taps_pu={t.name: np.full(t.n_phases, t.windings[1].tap) for t in model.transformers},
            capacitors={c.name: c.closed for c in model.capacitors},
            lines={ln.name: ln.in_service for ln in model.lines},
        )

    def copy(self) -> Switching:
        """An independent copy."""
        return Switching(
            {k: v.copy() for k, v in self.taps_pu.items()},
            dict(self.capacitors),
            dict(self.lines),
            dict(self.faults),
            self.source_pu,
        )


@dataclass(frozen=True)
class LoadPorts:
    """The feeder's own loads as two-terminal branches (one per load phase).

    :param load: index of the :class:`LoadModel` each branch belongs to.
    :param from_node: node of the branch's first terminal.
    :param to_node: node of the second terminal, ``-1`` for ground.
    :param v_base_v: the load's base voltage across the branch (V).
    :param p_w: nominal active power per branch (W).
    :param q_var: nominal reactive power per branch (var).
    :param model: OpenDSS load model per branch.
    :param vminpu: per branch, the load's ``vminpu`` (likewise ``vmaxpu``, ``vlowpu``, and the CVR
        exponents ``cvrwatts``/``cvrvars``).
    """

    load: np.ndarray
    from_node: np.ndarray
    to_node: np.ndarray
    v_base_v: np.ndarray
    p_w: np.ndarray
    q_var: np.ndarray
    model: np.ndarray
    vminpu: np.ndarray
    vmaxpu: np.ndarray
    vlowpu: np.ndarray
    cvrwatts: np.ndarray
    cvrvars: np.ndarray

    @property
    def y_nominal_s(self) -> np.ndarray:
        """Nominal admittance per branch (S): (P - jQ) / Vbase^2."""
        return (self.p_w - 1j * self.q_var) / self.v_base_v**2


def _load_vbase_v(ld: LoadModel | GeneratorModel | RegulatedGeneratorModel) -> float:
    if ld.conn == "delta" or ld.n_phases == 1:
        return ld.kv * 1000.0
    return ld.kv * 1000.0 / _SQRT3


def _branch_nodes(
    bus: str, phases: tuple[str | None, ...], conn: str, neutral: str | None, n_phases: int, nodes: NodeIndex
) -> list[tuple[int, int]]:
    """Node pairs of the branches of a load-like element: wye phase k from its conductor to the
    neutral (-1 = ground); delta k from conductor k to conductor k+1 (wrapping), a missing
    conductor meaning ground."""
    conds = [nodes.index[(bus, p)] if p else -1 for p in phases]
    if conn == "wye":
        to = nodes.index[(bus, neutral)] if neutral is not None else -1
        return [(conds[k], to) for k in range(n_phases)]
    return [(conds[k], conds[(k + 1) % len(conds)]) for k in range(n_phases)]


def load_ports(model: FeederModel, nodes: NodeIndex) -> LoadPorts:
    """Branches of every load (:func:`_branch_nodes`), then of every generator, whose ``load``
    index continues after the loads' (a generator draws the negative of its output, OpenDSS
    model 1 in its band), then two per phase of every voltage-regulating generator
    (:class:`~openg2g.grid.feeder.model.RegulatedGeneratorModel`, :func:`regulated_branch_kinds`):
    its active power, then its reactive power, each constant power at any voltage (no band: a
    ``vminpu`` of 0 and a ``vmaxpu`` of infinity). The reactive one is 1 var nominal, delivered:
    its branch scale is the generator's reactive power per phase (var), which the power flow
    solves (:mod:`~openg2g.grid.feeder.regulated`)."""
    cols: dict[str, list[float]] = {k: [] for k in LoadPorts.__dataclass_fields__}

    def add(index: int, branches: list[tuple[int, int]], vbase_v: float, p_w: float, q_var: float, **kw: float) -> None:
        for f, t in branches:
            cols["load"].append(index)
            cols["from_node"].append(f)
            cols["to_node"].append(t)
            cols["v_base_v"].append(vbase_v)
            cols["p_w"].append(p_w)
            cols["q_var"].append(q_var)
            for key, value in kw.items():
                cols[key].append(value)

    for li, ld in enumerate(model.loads):
        add(
            li,
            _branch_nodes(ld.bus, ld.phases, ld.conn, ld.neutral, ld.n_phases, nodes),
            _load_vbase_v(ld),
            ld.kw * 1000.0 / ld.n_phases,
            ld.kvar * 1000.0 / ld.n_phases,
            model=ld.model,
            vminpu=ld.vminpu,
            vmaxpu=ld.vmaxpu,
            vlowpu=ld.vlowpu,
            cvrwatts=ld.cvrwatts,
            cvrvars=ld.cvrvars,
        )
    for gi, g in enumerate(model.generators):
        add(
            len(model.loads) + gi,
            _branch_nodes(g.bus, g.phases, g.conn, g.neutral, g.n_phases, nodes),
            _load_vbase_v(g),
            -g.kw * 1000.0 / g.n_phases,
            -g.kvar * 1000.0 / g.n_phases,
            model=1,
            vminpu=g.vminpu,
            vmaxpu=g.vmaxpu,
            vlowpu=0.0,  # OpenDSS's generator has no low band: Yeq / vminpu^2 all the way down
            cvrwatts=1.0,
            cvrvars=2.0,
        )
    first = len(model.loads) + len(model.generators)
    n_reg = len(model.regulated_generators)
    for kind, (p_w, q_var) in enumerate(((1.0, 0.0), (0.0, 1.0))):
        for ri, rg in enumerate(model.regulated_generators):
            add(
                first + kind * n_reg + ri,
                _branch_nodes(rg.bus, rg.phases, rg.conn, rg.neutral, rg.n_phases, nodes),
                _load_vbase_v(rg),
                -p_w * rg.kw * 1000.0 / rg.n_phases,
                -q_var,
                model=1,
                vminpu=0.0,
                vmaxpu=math.inf,
                vlowpu=0.0,
                cvrwatts=1.0,
                cvrvars=2.0,
            )
    ints = {"load", "from_node", "to_node", "model"}
    return LoadPorts(**{k: np.array(v, dtype=int if k in ints else float) for k, v in cols.items()})


def regulated_branch_kinds(model: FeederModel, ports: LoadPorts) -> tuple[np.ndarray, np.ndarray]:
    """The load branches of the voltage-regulating generators (:func:`load_ports`): for each
    branch, the generator it belongs to (``model.regulated_generators`` index, -1 for any other
    branch) and True for a reactive-power branch."""
    first = len(model.loads) + len(model.generators)
    n_reg = len(model.regulated_generators)
    offset = ports.load - first
    generator = np.where(offset >= 0, offset % max(n_reg, 1), -1)
    return generator, offset >= n_reg


def line_admittance(ln: LineModel) -> tuple[np.ndarray, np.ndarray]:
    """Series admittance matrix and the shunt admittance at each end (half the total) of a line (S)."""
    return np.linalg.inv(ln.z_ohm()), 0.5j * np.asarray(ln.b_us) * 1e-6


class Stamps:
    """Admittance entries in the order elements add them: rows, columns and values (S), ground
    (node -1) dropped. Assembled dense or sparse; entries at one position are summed in the order
    they were added, so the dense matrix is the same, bit for bit, however the stamps are grouped."""

    def __init__(self) -> None:
        self._rows: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []
        self._vals: list[np.ndarray] = []

    def add(self, idx: list[int], block: np.ndarray) -> None:
        """Add ``block`` at rows/cols ``idx``; index -1 (ground) is dropped."""
        keep = [i for i, n in enumerate(idx) if n >= 0]
        rows = np.array([idx[i] for i in keep], dtype=np.int64)
        self._rows.append(np.repeat(rows, len(rows)))
        self._cols.append(np.tile(rows, len(rows)))
        self._vals.append(np.asarray(block, dtype=complex)[np.ix_(keep, keep)].ravel())

    def add_diagonal(self, nodes: np.ndarray, value: complex) -> None:
        """Add ``value`` on the diagonal at each of ``nodes``."""
        nodes = np.asarray(nodes, dtype=np.int64)
        self._rows.append(nodes)
        self._cols.append(nodes)
        self._vals.append(np.full(nodes.size, value, dtype=complex))

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows, columns and values (S) of every entry, in the order added."""
        if not self._rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=complex)
        return np.concatenate(self._rows), np.concatenate(self._cols), np.concatenate(self._vals)

    def dense(self, n: int) -> np.ndarray:
        """The ``(n, n)`` matrix."""
        y = np.zeros((n, n), dtype=complex)
        rows, cols, vals = self.entries()
        np.add.at(y, (rows, cols), vals)
        return y

    def sparse(self, n: int) -> sp.csc_matrix:
        """The ``(n, n)`` matrix, compressed sparse columns."""
        rows, cols, vals = self.entries()
        return sp.csc_matrix((vals, (rows, cols)), shape=(n, n))


_A = np.exp(2j * np.pi / 3)
FORTESCUE = np.array([[1, 1, 1], [1, _A**2, _A], [1, _A, _A**2]])
"""Phase values (a, b, c) = ``FORTESCUE @`` sequence values (zero, positive, negative)."""


def sequence_to_phase(x0: complex, x1: complex, x2: complex) -> np.ndarray:
    """The 3x3 phase-frame matrix of an element whose sequence values are ``x0``, ``x1``, ``x2``
    (impedances or admittances, any unit): ``FORTESCUE diag(x0, x1, x2) FORTESCUE^-1``."""
    return np.asarray(FORTESCUE @ np.diag([x0, x1, x2]) @ np.linalg.inv(FORTESCUE))


def source_nodes(model: FeederModel, nodes: NodeIndex) -> np.ndarray:
    """Node of each conductor of the source (phases a, b, c, or a single-phase source's one)."""
    return np.array([nodes.index[(model.source.bus, p)] for p in model.source.phases])


def source_rows(model: FeederModel) -> np.ndarray | None:
    """Row among phases a, b, c of each source conductor, ``None`` for a three-phase source (its
    conductors are a, b, c in that order)."""
    if model.source.phase is None:
        return None
    return np.array([PHASES.index(model.source.phase)])


def per_phase(s_src: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The source's power per conductor (``(n, cols)``) as rows of phases a, b, c, 0 where it has
    no conductor (:func:`source_rows`)."""
    out = np.zeros((len(PHASES), s_src.shape[1]), dtype=s_src.dtype)
    out[rows] = s_src
    return out


def source_admittance(model: FeederModel) -> np.ndarray:
    """Source admittance (S) from its sequence impedances: 3x3, or 1x1 for a single-phase source
    (OpenDSS makes its sequence impedances equal, so its self impedance is ``z1_ohm``)."""
    z1, z0 = complex(*model.source.z1_ohm), complex(*model.source.z0_ohm)
    if model.source.phase is not None:
        return np.array([[1.0 / z1]])
    if model.source.z2_ohm is not None:
        return sequence_to_phase(1 / z0, 1 / z1, 1 / complex(*model.source.z2_ohm))
    zs, zm = (2 * z1 + z0) / 3, (z0 - z1) / 3
    z = np.full((3, 3), zm) + np.eye(3) * (zs - zm)
    return np.linalg.inv(z)


def source_current(model: FeederModel, nodes: NodeIndex, source_pu: Sequence[float] | None = None) -> np.ndarray:
    """Norton current of the source injected at its bus nodes, plus that of any further voltage
    source (a primitive element with ``i_source_a``) at its nodes (A); zero elsewhere.

    :param source_pu: the source EMF magnitude per phase a, b, c (pu of its base voltage), at the
        source's own angles; ``None``: ``model.source.v_pu`` on every phase
        (:attr:`Switching.source_pu`).
    """
    src = model.source
    v_pu = (src.v_pu,) * 3 if source_pu is None else tuple(source_pu)
    if src.phase is None:
        e = np.array(
            [
                m * src.base_kv * 1000.0 / _SQRT3 * np.exp(1j * math.radians(src.angle_deg + _SHIFT[p]))
                for m, p in zip(v_pu, "abc")
            ]
        )
    else:  # a one-phase source's basekv is the voltage across it (OpenDSS)
        m = v_pu[PHASES.index(src.phase)]
        e = np.array([m * src.base_kv * 1000.0 * np.exp(1j * math.radians(src.angle_deg))])
    i = np.zeros(len(nodes), dtype=complex)
    i[source_nodes(model, nodes)] = source_admittance(model) @ e
    for prim in model.primitives:
        if prim.i_source_a is not None:
            live = [(k, n) for k, n in enumerate(primitive_nodes(prim, nodes)) if n >= 0]
            current = np.asarray(prim.i_source_a, dtype=float)
            for k, n in live:
                i[n] += complex(current[k, 0], current[k, 1])
    return i


def winding_incidence(t: TransformerModel, w: int, k: int, nodes: NodeIndex) -> tuple[list[int], np.ndarray]:
    """Nodes and +/-1 coefficients whose combination is winding ``w``'s phase-``k`` voltage: the
    conductor to the neutral (or ground) for wye, conductor k minus conductor k-1 for delta (OpenDSS's lagging
    delta, so a delta-wye bank shifts the low side by -30 degrees)."""
    wd = t.windings[w]
    a = nodes.index[(wd.bus, wd.phases[k])]
    if wd.conn == "wye":
        if wd.neutral is None:
            return [a], np.array([1.0])
        return [a, nodes.index[(wd.bus, wd.neutral)]], np.array([1.0, -1.0])
    b = nodes.index[(wd.bus, wd.phases[(k - 1) % len(wd.phases)])]
    return [a, b], np.array([1.0, -1.0])


def winding_voltage(t: TransformerModel, w: int, k: int, v: np.ndarray, nodes: NodeIndex) -> complex:
    """Voltage across phase ``k`` of winding ``w`` (V) for node voltages ``v`` (V, one column):
    the phase conductor to its neutral (or ground), or across its two delta conductors."""
    idx, coef = winding_incidence(t, w, k, nodes)
    return complex(coef @ v[idx])


def winding_kv(t: TransformerModel, w: int) -> float:
    """Rated voltage across one phase of winding ``w`` (kV)."""
    wd = t.windings[w]
    return wd.kv / _SQRT3 if (wd.conn == "wye" and t.n_phases == 3) else wd.kv


def antifloat_admittance(t: TransformerModel, w: int) -> complex:
    """OpenDSS's anti-float shunt (S) on each conductor of each phase of winding ``w``."""
    va_1ph = t.windings[0].kva * 1000.0 / t.n_phases
    return 1j * (-t.ppm_antifloat * 1e-6 / ((winding_kv(t, w) * 1000.0) ** 2 / va_1ph) / 2.0)


def transformer_winding_admittance(t: TransformerModel, tap2_pu: float) -> tuple[complex, float]:
    """Series admittance referred to the tapped winding 2 (S) and the ratio n1/n2 of one phase."""
    w1, w2 = t.windings
    kvw1, kvw2 = winding_kv(t, 0), winding_kv(t, 1)
    n1, n2 = w1.tap * kvw1, tap2_pu * kvw2
    s_phase_mva = w1.kva / t.n_phases / 1000.0
    z_pu = complex((w1.r_pct + w2.r_pct) / 100.0, t.x_pct / 100.0)
    z2_ohm = z_pu * n2**2 / s_phase_mva
    return 1.0 / z2_ohm, n1 / n2


def magnetizing_admittance(t: TransformerModel, tap2_pu: float) -> complex:
    """Core-loss and magnetizing admittance of one phase (S), across winding 2 at its tap, as
    OpenDSS places it (on the winding it takes to be closest to the core)."""
    n2 = tap2_pu * winding_kv(t, 1)
    s_phase_mva = t.windings[0].kva / t.n_phases / 1000.0
    return complex(t.noloadloss_pct, -t.imag_pct) / 100.0 * s_phase_mva / n2**2


def transformer_phase_block(
    t: TransformerModel, k: int, tap2_pu: float, nodes: NodeIndex
) -> tuple[list[int], np.ndarray]:
    """Nodes and admittance block of phase ``k`` of a transformer."""
    y, a = transformer_winding_admittance(t, tap2_pu)
    yw = y * np.array([[1.0 / a**2, -1.0 / a], [-1.0 / a, 1.0]])
    if t.noloadloss_pct or t.imag_pct:
        yw[1, 1] += magnetizing_admittance(t, tap2_pu)
    n1, c1 = winding_incidence(t, 0, k, nodes)
    n2, c2 = winding_incidence(t, 1, k, nodes)
    idx = n1 + n2
    c = np.zeros((2, len(idx)))
    c[0, : len(n1)] = c1
    c[1, len(n1) :] = c2
    return idx, c.T @ yw @ c


def capacitor_admittance(cap: CapacitorModel, nodes: NodeIndex) -> dict[int, dict[int, complex]]:
    """The admittance entries (S) of capacitor ``cap`` closed (:func:`stamp_capacitor`): row node ->
    column node -> admittance; what closing it adds to the nodal admittance, and opening it takes away."""
    stamps = Stamps()
    stamp_capacitor(stamps, cap, nodes)
    blocks: dict[int, dict[int, complex]] = {}
    for i, j, y in zip(*stamps.entries()):
        row = blocks.setdefault(int(i), {})
        row[int(j)] = row.get(int(j), 0j) + complex(y)
    return blocks


def tap_change_admittance(
    t: TransformerModel, old_taps_pu: np.ndarray, new_taps_pu: np.ndarray, nodes: NodeIndex
) -> dict[int, dict[int, complex]]:
    """Change of the admittance entries (S) when ``t``'s winding-2 taps go from ``old_taps_pu`` to
    ``new_taps_pu`` (per phase, pu): row node -> column node -> change, for the phases that move
    (empty when none does)."""
    blocks: dict[int, dict[int, complex]] = {}
    for k in np.flatnonzero(np.asarray(old_taps_pu) != np.asarray(new_taps_pu)):
        idx, new = transformer_phase_block(t, int(k), float(new_taps_pu[k]), nodes)
        _, old = transformer_phase_block(t, int(k), float(old_taps_pu[k]), nodes)
        for a, i in enumerate(idx):
            for b, j in enumerate(idx):
                blocks.setdefault(i, {}).setdefault(j, 0j)
                blocks[i][j] += new[a, b] - old[a, b]
    return blocks


def energized(model: FeederModel, nodes: NodeIndex, state: Switching) -> np.ndarray:
    """Boolean per node: connected to the source through in-service lines, transformers, static
    (primitive) elements and faults between two nodes."""
    adj: list[list[int]] = [[] for _ in range(len(nodes))]

    def link(group: list[int]) -> None:
        for a in group:
            adj[a].extend(b for b in group if b != a)

    for ln in model.lines:
        if state.lines[ln.name]:
            for p1, p2 in zip(ln.phases1, ln.phases2):
                link([nodes.index[(ln.bus1, p1)], nodes.index[(ln.bus2, p2)]])
    for t in model.transformers:
        for k in range(t.n_phases):
            link(winding_incidence(t, 0, k, nodes)[0] + winding_incidence(t, 1, k, nodes)[0])
    for prim in model.primitives:
        link([i for i in primitive_nodes(prim, nodes) if i >= 0])
    for fault in state.faults.values():
        for a, b in fault.node_pairs:
            if b >= 0:
                link([a, b])
    live = np.zeros(len(nodes), dtype=bool)
    stack = source_nodes(model, nodes).tolist()
    live[stack] = True
    while stack:
        for nb in adj[stack.pop()]:
            if not live[nb]:
                live[nb] = True
                stack.append(nb)
    return live


def primitive_nodes(prim: PrimitiveModel, nodes: NodeIndex) -> list[int]:
    """Node of each conductor of a primitive element, terminal by terminal (-1 = ground)."""
    return [nodes.index[(bus, n)] if n is not None else -1 for bus, conds in prim.terminals for n in conds]


def stamp_line(stamps: Stamps, ln: LineModel, nodes: NodeIndex) -> None:
    """A line's pi section: series admittance between its ends, half the shunt at each."""
    ys, yc = line_admittance(ln)
    idx = [nodes.index[(ln.bus1, p)] for p in ln.phases1] + [nodes.index[(ln.bus2, p)] for p in ln.phases2]
    stamps.add(idx, np.block([[ys + yc, -ys], [-ys, ys + yc]]))


def stamp_transformer(stamps: Stamps, t: TransformerModel, taps_pu: np.ndarray, nodes: NodeIndex) -> None:
    """A two-winding transformer at winding-2 taps ``taps_pu`` (one per phase)."""
    for k in range(t.n_phases):
        idx, blk = transformer_phase_block(t, k, float(taps_pu[k]), nodes)
        stamps.add(idx, blk)
    if t.ppm_antifloat:
        # OpenDSS anti-float adder: j*Y_PPM on both conductors of every winding phase
        for w in range(len(t.windings)):
            y_ppm = antifloat_admittance(t, w)
            for k in range(t.n_phases):
                stamps.add_diagonal(np.array(winding_incidence(t, w, k, nodes)[0]), y_ppm)
    for w, wd in enumerate(t.windings):
        if wd.conn != "wye" or wd.neutral is None:
            continue
        neutral = np.array([nodes.index[(wd.bus, wd.neutral)]])
        if wd.rneut_ohm >= 0:  # OpenDSS: a solidly grounded neutral is 1e6 S
            z = complex(wd.rneut_ohm, wd.xneut_ohm)
            stamps.add_diagonal(neutral, 1e6 if z == 0 else 1.0 / z)
        elif t.ppm_antifloat:  # OpenDSS bumps an open neutral by one more anti-float adder
            stamps.add_diagonal(neutral, antifloat_admittance(t, w))


def stamp_capacitor(stamps: Stamps, cap: CapacitorModel, nodes: NodeIndex) -> None:
    """A closed capacitor bank: per phase its susceptance at rated voltage, phase to neutral (or
    ground) for wye, between consecutive phases for delta."""
    nph = len(cap.phases)
    idx = [nodes.index[(cap.bus, p)] for p in cap.phases]
    if cap.conn == "wye":
        v_ph = cap.kv * 1000.0 / (_SQRT3 if nph > 1 else 1.0)
        b = cap.kvar * 1000.0 / nph / v_ph**2
        if cap.neutral is None:
            stamps.add(idx, np.eye(nph) * 1j * b)
            return
        neutral = nodes.index[(cap.bus, cap.neutral)]
        for i in idx:
            stamps.add([i, neutral], 1j * b * np.array([[1.0, -1.0], [-1.0, 1.0]]))
        return
    b = cap.kvar * 1000.0 / nph / (cap.kv * 1000.0) ** 2
    for k in range(nph):
        pair = [idx[k], idx[(k + 1) % nph]]
        stamps.add(pair, 1j * b * np.array([[1.0, -1.0], [-1.0, 1.0]]))


def stamp_primitive(stamps: Stamps, prim: PrimitiveModel, nodes: NodeIndex) -> None:
    """A static element's primitive admittance over its conductors' nodes (conductors on one node
    add up, ground dropped)."""
    stamps.add(primitive_nodes(prim, nodes), prim.y_s())


def admittance_stamps(model: FeederModel, nodes: NodeIndex, state: Switching, ports: LoadPorts) -> Stamps:
    """Every element's admittance entries (S) at the given switching state, in a fixed order:
    source, lines, transformers, capacitors, zero-sequence admittances, static (primitive)
    elements, load nominal admittances, faults in force.

    De-energized nodes (cut off by open lines) are tied to ground by 1 S so the matrix stays
    invertible; the solver sets their loads to zero, so their voltage comes out as 0.
    """
    stamps = Stamps()
    stamps.add(source_nodes(model, nodes).tolist(), source_admittance(model))
    for ln in model.lines:
        if state.lines[ln.name]:
            stamp_line(stamps, ln, nodes)
    for t in model.transformers:
        stamp_transformer(stamps, t, state.taps_pu[t.name], nodes)
    for cap in model.capacitors:
        if state.capacitors[cap.name]:
            stamp_capacitor(stamps, cap, nodes)
    for zs in model.zero_sequence:
        idx = [nodes.index[(bus, p)] for bus in zs.buses for p in "abc"]
        stamps.add(idx, np.kron(zs.y_s(), np.full((3, 3), 1.0 / 3.0)))
    for prim in model.primitives:
        stamp_primitive(stamps, prim, nodes)
    y_load = ports.y_nominal_s
    for f, t_, yl in zip(ports.from_node, ports.to_node, y_load):
        stamps.add([int(f), int(t_)], yl * np.array([[1.0, -1.0], [-1.0, 1.0]]))
    for fault in state.faults.values():
        for idx, block in fault.stamps():
            stamps.add(idx, block)
    stamps.add_diagonal(np.flatnonzero(~energized(model, nodes, state)), 1.0)
    return stamps


def admittance(model: FeederModel, nodes: NodeIndex, state: Switching, ports: LoadPorts) -> np.ndarray:
    """Dense nodal admittance matrix (S) for the given switching state (:func:`admittance_stamps`)."""
    return admittance_stamps(model, nodes, state, ports).dense(len(nodes))


def admittance_sparse(model: FeederModel, nodes: NodeIndex, state: Switching, ports: LoadPorts) -> sp.csc_matrix:
    """Sparse nodal admittance matrix (S) for the given switching state (:func:`admittance_stamps`)."""
    return admittance_stamps(model, nodes, state, ports).sparse(len(nodes))

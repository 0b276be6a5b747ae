"""Branch currents and loading of a feeder, from a solved phase-frame solution.

Every line and transformer is a set of conductors (:class:`~openg2g.core.state.BranchSet`):

- a line's phase conductors at its sending end (``bus1``, OpenDSS's terminal 1, the end OpenDSS
  checks against ``normamps``): ``I1 = (Ys + Yc/2) V1 - Ys V2`` with the line's series admittance
  matrix ``Ys`` and total shunt admittance ``Yc``, zero while the line is out of service;
- a transformer's phase conductors at both windings' terminals (for a delta winding, the line
  currents, not the coil currents), from the same per-phase blocks and anti-float shunt that
  build the nodal admittance (:func:`~openg2g.grid.feeder.network.transformer_phase_block`), at the
  taps in force. The grounded-wye neutral conductor is not reported.

Ratings (A per conductor):

- lines: ``normamps`` (normal, 100% loading) and ``emergamps`` (emergency) from the line or its
  linecode; where the file sets none, OpenDSS's defaults 400 A and 600 A, flagged as defaults;
- transformers: the rated line current of each winding, ``kVA / phases / V_phase`` with winding
  1's ``kva`` (or ``normhkva`` where the file sets it) and the winding's own rated voltage
  (``kv / sqrt(3)`` for three-phase windings, ``kv`` for single-phase ones); emergency at
  ``emerghkva``, by default 150% of the kVA as in OpenDSS. OpenDSS's own transformer ``NormAmps``
  is winding 1's current at ``normhkva``, whose default is 110% of the kVA: openg2g rates a
  transformer at its nameplate (as pandapower's ``loading_percent`` of a transformer does).

All currents of a batch of operating points come from one sparse product ``|M V|`` (a gather
and a segmented sum over the few nonzeros of ``M``), ``M`` rebuilt only when taps or line states
change.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np

from openg2g.core.errors import FeederError
from openg2g.core.state import BranchSet
from openg2g.grid.feeder.model import (
    FeederModel,
    TransformerModel,
)
from openg2g.grid.feeder.network import (
    NodeIndex,
    Switching,
    antifloat_admittance,
    line_admittance,
    transformer_phase_block,
    winding_incidence,
)
from openg2g.grid.feeder.powerflow import magnitude_slopes

__all__ = ["BranchFlows", "TerminalMeter", "transformer_current_entries", "transformer_rated_a"]

_SQRT3 = math.sqrt(3.0)

_CURRENT_PRODUCTS = 200_000
"""Products of a conductor's admittance and a node voltage (complex, 3.2 MB) summed in one pass
of :meth:`BranchFlows.currents_a`: 8 columns on the IEEE 8500-node feeder (7x faster than all
100 columns at once on an 8,430-node feeder, ``bench/bench_grid.py``), a whole batch on a small
one (one pass instead of two for the 10 columns of an ieee13 control step)."""


def transformer_rated_a(t: TransformerModel, winding: int, kva: float) -> float:
    """Line current (A) of winding ``winding`` (0-based) of ``t`` carrying ``kva`` (all phases)."""
    wd = t.windings[winding]
    v_phase_kv = wd.kv / _SQRT3 if t.n_phases == 3 else wd.kv
    return kva / t.n_phases / v_phase_kv


def _branch_set(model: FeederModel) -> BranchSet:
    names: list[str] = []
    branch: list[int] = []
    terminal: list[int] = []
    phase: list[str] = []
    rating: list[float] = []
    emergency: list[float] = []
    default_rating: list[bool] = []
    default_emergency: list[bool] = []

    def add(
        name: str,
        term: int,
        phases: tuple[str, ...],
        norm_a: float | None,
        emerg_a: float | None,
        norm_default: float,
        emerg_default: float,
    ) -> None:
        for ph in phases:
            branch.append(len(names) - 1)
            terminal.append(term)
            phase.append(ph)
            rating.append(norm_default if norm_a is None else norm_a)
            emergency.append(emerg_default if emerg_a is None else emerg_a)
            default_rating.append(norm_a is None)
            default_emergency.append(emerg_a is None)

    for ln in model.lines:
        names.append(f"line.{ln.name}")
        add(names[-1], 1, ln.phases1, ln.norm_amps, ln.emerg_amps, *ln.ratings_a())
    for t in model.transformers:
        names.append(f"transformer.{t.name}")
        norm_kva, emerg_kva = t.ratings_kva()
        for w, wd in enumerate(t.windings):
            norm_a, emerg_a = transformer_rated_a(t, w, norm_kva), transformer_rated_a(t, w, emerg_kva)
            add(names[-1], w + 1, wd.phases, norm_a, None if t.emerg_kva is None else emerg_a, norm_a, emerg_a)
    return BranchSet(
        names=tuple(names),
        branch=np.array(branch, dtype=np.int64),
        terminal=np.array(terminal, dtype=np.int64),
        phase=tuple(phase),
        rating_a=np.array(rating),
        emergency_a=np.array(emergency),
        default_rating=np.array(default_rating, dtype=bool),
        default_emergency=np.array(default_emergency, dtype=bool),
    )


def transformer_current_entries(
    t: TransformerModel, taps_pu: np.ndarray, nodes: NodeIndex
) -> Iterator[tuple[int, int, list[int], Sequence[complex]]]:
    """The admittances (S) that make each conductor current of ``t`` at winding-2 taps ``taps_pu``
    (pu per phase), from the per-phase blocks and anti-float shunt that build the nodal admittance:
    ``(winding (0-based), conductor node, column nodes, admittances)``; the current into the
    transformer at a conductor is the sum over its entries of admittance times column voltage."""
    for k in range(t.n_phases):
        idx, blk = transformer_phase_block(t, k, float(taps_pu[k]), nodes)
        # winding 1's share of a phase block: its conductor and neutral (wye) or two conductors
        # (delta); a neutral's rows are not reported by BranchFlows or TerminalMeter
        n1 = len(winding_incidence(t, 0, k, nodes)[0])
        for r, node in enumerate(idx):
            w = 0 if r < n1 else 1
            yield w, node, idx, blk[r]
            if t.ppm_antifloat:  # the anti-float shunt of network.admittance, at the same nodes
                yield w, node, [node], [antifloat_admittance(t, w)]


class TerminalMeter:
    """What a control's potential and current transformers see at one terminal of a line or
    transformer: the terminal's conductor voltages to ground (V) and the currents into the element
    through them (A), in the element's conductor order, from solved node voltages.

    :param model: the feeder.
    :param nodes: its node numbering.
    :param element: ``"line.<name>"`` or ``"transformer.<name>"`` (any case).
    :param terminal: 1-based terminal (a transformer's winding).
    :raises FeederError: an element that is not a line or transformer of ``model``, or a terminal
        it does not have.
    """

    def __init__(self, model: FeederModel, nodes: NodeIndex, element: str, terminal: int) -> None:
        kind, _, name = element.lower().partition(".")
        line = next((ln for ln in model.lines if ln.name.lower() == name), None) if kind == "line" else None
        trafo = next((t for t in model.transformers if t.name.lower() == name), None) if kind == "transformer" else None
        if line is None and trafo is None:
            raise FeederError(f"{element!r} is not a line or transformer of feeder {model.name}")
        if terminal not in (1, 2):
            raise FeederError(f"{element}: terminal {terminal} does not exist (1 or 2)")
        self.element = element
        self.terminal = terminal
        self._nodes = nodes
        self._line = line
        self._transformer = trafo
        self._key: bytes | None = None
        self._m = np.zeros((0, 0), dtype=complex)
        if line is not None:
            ends = [
                [nodes.index[(line.bus1, p)] for p in line.phases1],
                [nodes.index[(line.bus2, p)] for p in line.phases2],
            ]
            near, far = ends if terminal == 1 else ends[::-1]
            self.node = np.array(near, dtype=np.int64)
            self._cols = np.array(near + far, dtype=np.int64)
            # I = (Ys + Yc/2) V_near - Ys V_far, as BranchFlows has it at the sending end
            ys, yc = line_admittance(line)
            self._m = np.hstack([ys + yc, -ys])
        else:
            assert trafo is not None
            wd = trafo.windings[terminal - 1]
            self.node = np.array([nodes.index[(wd.bus, p)] for p in wd.phases], dtype=np.int64)
            self._cols = np.zeros(0, dtype=np.int64)  # made with the matrix, at the first taps

    def voltages(self, v: np.ndarray) -> np.ndarray:
        """Conductor voltages to ground (V, complex) at node voltages ``v`` (V, ``(n_nodes,)``)."""
        return v[self.node]

    def currents(self, v: np.ndarray, state: Switching) -> np.ndarray:
        """Currents into the element through the terminal's conductors (A, complex) at node voltages
        ``v`` (V, ``(n_nodes,)``) and the switching ``state`` (taps, line in service)."""
        if self._line is not None:
            if not state.lines[self._line.name]:
                return np.zeros(len(self.node), dtype=complex)
            return self._m @ v[self._cols]
        m = self._transformer_matrix(state)
        return m @ v[self._cols]

    def power_va(self, v: np.ndarray, state: Switching) -> complex:
        """Complex power into the element through the terminal, all conductors (VA)."""
        return complex(np.sum(self.voltages(v) * np.conj(self.currents(v, state))))

    def _transformer_matrix(self, state: Switching) -> np.ndarray:
        """The terminal's rows of ``I = M V`` at the taps of ``state``, made once per tap setting."""
        t = self._transformer
        assert t is not None
        taps = state.taps_pu[t.name]
        if self._key != taps.tobytes():
            row = {int(n): r for r, n in enumerate(self.node)}
            entries = [
                (row[node], j, y)
                for w, node, idx, vals in transformer_current_entries(t, taps, self._nodes)
                if w == self.terminal - 1 and node in row
                for j, y in zip(idx, vals)
            ]
            self._cols = np.array(sorted({j for _, j, _ in entries}), dtype=np.int64)
            col = {int(n): c for c, n in enumerate(self._cols)}
            m = np.zeros((len(self.node), len(self._cols)), dtype=complex)
            for r, j, y in entries:
                m[r, col[j]] += y
            self._m, self._key = m, taps.tobytes()
        return self._m


class BranchFlows:
    """Currents and loading of every line and transformer conductor of a feeder.

    :param model: the feeder.
    :param nodes: its node numbering (the rows of a solution's ``v``).
    """

    def __init__(self, model: FeederModel, nodes: NodeIndex) -> None:
        self.branches = _branch_set(model)
        self._model = model
        self._nodes = nodes
        self._starts = self.branches.starts
        self._pct_per_a = (100.0 / self.branches.rating_a)[:, None]  # % of its rating per ampere, per conductor
        # line rows never change but for the line's service state: kept as coordinates
        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        owner: list[np.ndarray] = []
        row = 0
        for li, ln in enumerate(model.lines):
            n = len(ln.phases1)
            ys, yc = line_admittance(ln)
            idx = [nodes.index[(ln.bus1, p)] for p in ln.phases1] + [nodes.index[(ln.bus2, p)] for p in ln.phases2]
            block = np.hstack([ys + yc, -ys])
            r, c = np.meshgrid(np.arange(row, row + n), idx, indexing="ij")
            rows.append(r.ravel())
            cols.append(c.ravel())
            vals.append(block.ravel())
            owner.append(np.full(r.size, li))
            row += n
        empty_i, empty_c = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=complex)
        self._line_rows = np.concatenate(rows) if rows else empty_i
        self._line_cols = np.concatenate(cols) if cols else empty_i
        self._line_vals = np.concatenate(vals) if vals else empty_c
        self._line_owner = np.concatenate(owner) if owner else empty_i
        self._first_transformer_row = row
        self._key: tuple[object, ...] | None = None
        self._matrix: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _transformer_entries(self, state: Switching) -> tuple[list[int], list[int], list[complex]]:
        """Coordinates of the transformer rows at the taps of ``state``."""
        nodes = self._nodes
        rows: list[int] = []
        cols: list[int] = []
        vals: list[complex] = []
        row0 = self._first_transformer_row
        for t in self._model.transformers:
            # conductor row of each (winding, node): winding 1's conductors, then winding 2's
            row_of = {}
            for w, wd in enumerate(t.windings):
                for ph in wd.phases:
                    row_of[(w, nodes.index[(wd.bus, ph)])] = row0
                    row0 += 1
            for w, node, idx, vals_ in transformer_current_entries(t, state.taps_pu[t.name], nodes):
                if (w, node) not in row_of:  # a winding's neutral
                    continue
                rows.extend([row_of[(w, node)]] * len(idx))
                cols.extend(idx)
                vals.extend(vals_)
        return rows, cols, vals

    def matrix(self, state: Switching) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``M`` with conductor currents ``I = M V`` (A from V) at the switching ``state``, as
        coordinates ``(row starts, columns, values)`` sorted by row. An out-of-service line keeps
        its entries at zero, so every row has some and the layout never changes with the lines."""
        # asked at every batch: the key reads the state's own containers (their names never change)
        key = (tuple(t.tobytes() for t in state.taps_pu.values()), tuple(state.lines.values()))
        if key != self._key or self._matrix is None:
            live = np.array([state.lines[ln.name] for ln in self._model.lines], dtype=bool)
            line_vals = self._line_vals * live[self._line_owner] if self._line_owner.size else self._line_vals
            t_rows, t_cols, t_vals = self._transformer_entries(state)
            rows = np.concatenate([self._line_rows, np.array(t_rows, dtype=np.int64)])
            order = np.argsort(rows, kind="stable")
            cols = np.concatenate([self._line_cols, np.array(t_cols, dtype=np.int64)])[order]
            vals = np.concatenate([line_vals, np.array(t_vals, dtype=complex)])[order]
            starts = np.searchsorted(rows[order], np.arange(len(self.branches)))
            self._matrix = (starts, cols, vals)
            self._key = key
        return self._matrix

    def currents_a(self, v: np.ndarray, state: Switching) -> np.ndarray:
        """Current magnitude per conductor (A), ``(n_conductors, n_cols)``, for node voltages ``v``
        (V, complex, ``(n_nodes, n_cols)``) at the switching ``state``.

        Columns go about :data:`_CURRENT_PRODUCTS` products at a time, so those of a large feeder
        stay in cache; each row is summed in order as in one pass over all columns (never in a
        chunk of one column of several, which numpy would sum pairwise)."""
        starts, cols, vals = self.matrix(state)
        n_cols = v.shape[1]
        edges = list(range(0, n_cols, max(2, _CURRENT_PRODUCTS // max(1, len(cols))))) + [n_cols]
        if n_cols > 1 and edges[-1] - edges[-2] == 1:
            del edges[-2]
        out = np.empty((len(starts), n_cols))
        for a, b in itertools.pairwise(edges):
            out[:, a:b] = np.abs(np.add.reduceat(vals[:, None] * v[cols, a:b], starts, axis=0))
        return out

    def current_slopes(self, v: np.ndarray, dv: np.ndarray, state: Switching) -> tuple[np.ndarray, np.ndarray]:
        """Current magnitude per conductor (A, ``(n_conductors,)``) at node voltages ``v`` (V,
        complex, ``(n_nodes,)``) and its derivatives (A per unit of ``x``, ``(n_conductors, k)``)
        along node-voltage derivatives ``dv = dV/dx`` (V per unit of ``x``, ``(n_nodes, k)``), at the
        switching ``state``: with ``I = M V``, ``d|I| = Re(conj(I) M dV) / |I|``, 0 where no current
        flows (an open line)."""
        starts, cols, vals = self.matrix(state)
        current = np.add.reduceat(vals * v[cols], starts)
        d_current = np.add.reduceat(vals[:, None] * dv[cols], starts, axis=0)
        return np.abs(current), magnitude_slopes(current, d_current)

    def loading_pct(self, current_a: np.ndarray) -> np.ndarray:
        """Loading per branch (%), ``(n_branches, n_cols)``: the largest of its conductors'
        ``100 * current / rating``."""
        per_conductor = current_a * self._pct_per_a
        return np.maximum.reduceat(per_conductor, self._starts, axis=0)

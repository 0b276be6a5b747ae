"""An asymmetric pandapower net back with ``runpp_3ph``'s result tables, filled from the phase frame.

:func:`results_net_3ph` takes an operating point of the converted net (:mod:`openg2g.grid.nets.asymmetric`,
solved by :class:`~openg2g.grid.feeder.backend.FeederGrid`) and returns a copy of the net with each
site as an ``asymmetric_load`` (wye) named ``openg2g:<site>`` carrying the per-phase power the
grid drew, the load scale in the ``scaling`` of its load-like rows, and:

- ``res_bus_3ph``: ``vm_*_pu``, ``va_*_degree``, ``unbalance_percent`` (``|V2 / V1|``) and
  ``p_*_mw``/``q_*_mvar`` as ``runpp_3ph`` fills them: the per-phase power of the elements at the
  bus (loads positive, a delta row's ``p_a`` on phase a), the ext_grid's negative;
- ``res_line_3ph``: every column ``runpp_3ph`` fills, from the phase currents at both ends
  ``I1 = (Ys + Yc/2) V1 - Ys V2`` (and the same from the other end) and ``S = V conj(I)``;
- ``res_trafo_3ph``: likewise, from the bank's terminal currents at the taps in force plus the
  zero-sequence complement's (:class:`~openg2g.grid.feeder.model.ZeroSequenceModel`): the whole
  zero-sequence path, as ``runpp_3ph`` counts it (a Dyn's LV currents carry the neutral's share).

``pandapower.runpp_3ph`` on the returned net gives the same tables (tests/grid/test_pp3ph_results.py).
The ext_grid's per-phase power in ``res_bus_3ph`` is the physical one of the phase-frame source;
``runpp_3ph`` splits it differently where zero-sequence current reaches the source (a YNyn), the
total agreeing. ``res_ext_grid_3ph`` and the element result tables are not filled.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from openg2g.core.errors import ScenarioError
from openg2g.core.state import PHASES, DatacenterState
from openg2g.grid.config import GridSite
from openg2g.grid.feeder.backend import FeederGrid, NodeSolution
from openg2g.grid.feeder.model import FeederModel
from openg2g.grid.feeder.network import (
    FORTESCUE,
    line_admittance,
    source_admittance,
    source_current,
    transformer_phase_block,
)
from openg2g.grid.feeder.ports import band_power_va
from openg2g.grid.nets.asymmetric import feeder_buses
from openg2g.grid.nets.source import BusNames

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

__all__ = ["fill_results_3ph", "results_net_3ph", "site_name"]

_TO_SEQUENCE = np.linalg.inv(FORTESCUE)
_LOAD_TABLES = ("load", "sgen", "asymmetric_load", "asymmetric_sgen")


def site_name(site: str) -> str:
    """The name of the ``asymmetric_load`` row a site becomes in the results net."""
    return f"openg2g:{site}"


def results_net_3ph(
    net: pandapowerNet,
    label: str,
    grid: FeederGrid,
    sites: Sequence[GridSite],
    loads: Mapping[str, DatacenterState],
    t_s: float = 0.0,
) -> pandapowerNet:
    """A copy of the asymmetric net ``net`` at one operating point of ``grid`` (its conversion),
    with the sites added and ``runpp_3ph``'s result tables filled (see the module docstring).

    :param net: the net, as loaded (``grid.pandapower``).
    :param label: its name in messages.
    :param grid: the backend on its conversion (:func:`openg2g.grid.nets.asymmetric.asymmetric_grid`).
    :param sites: the datacenter sites of ``grid``.
    :param loads: each site's state at the step (W, var per phase).
    :param t_s: the step (s).
    :raises ScenarioError: PV, storage or extra loads in the grid spec (no row of the net carries
        them), or a row whose phases are at different load scales.
    :raises PowerFlowError: the operating point does not converge.
    """
    import pandapower as pp

    extra = [f"grid.{k}" for k in ("pv", "storage", "extra_loads") if getattr(grid.spec, k)]
    if extra:
        raise ScenarioError([(k, "the results net of an asymmetric net carries sites only") for k in extra])
    sol = grid.node_solution(t_s, loads)
    model = grid.feeder.model
    out = copy.deepcopy(net)
    scale = {ld.name: s for ld, s in zip(model.loads, sol.load_scale)}
    for table in _LOAD_TABLES:
        if table not in out or not len(out[table]):
            continue
        for idx in out[table].index:
            row_scale = {scale[f"{table}.{idx}.{p}"] for p in PHASES if f"{table}.{idx}.{p}" in scale}
            if len(row_scale) > 1:
                raise ScenarioError([(f"{table}.{idx}", "its phases are at different load scales")])
            out[table].at[idx, "scaling"] *= row_scale.pop() if row_scale else 1.0
    names = BusNames(out)
    for site in sites:
        state = loads.get(site.name)
        if state is None:
            continue
        s_va = np.asarray(state.p_w) + 1j * np.asarray(state.q_var)
        if site.load_model != "constant_power":  # OpenDSS model 1: what it draws outside its band
            nodes = [sol.nodes.index[(site.bus.lower(), p)] for p in PHASES]
            s_va = band_power_va(sol.v_v[nodes], s_va, sol.nodes.v_base_v[nodes[0]], site.vminpu, site.vmaxpu)
        p_mw, q_mvar = s_va.real / 1e6, s_va.imag / 1e6
        pp.create_asymmetric_load(
            out,
            names.bus(site.bus),
            **{f"p_{p}_mw": float(p_mw[k]) for k, p in enumerate(PHASES)},
            **{f"q_{p}_mvar": float(q_mvar[k]) for k, p in enumerate(PHASES)},
            name=site_name(site.name),
            type="wye",
        )
    fill_results_3ph(out, label, model, sol)
    return out


def fill_results_3ph(net: pandapowerNet, label: str, model: FeederModel, sol: NodeSolution) -> None:
    """Fill ``net.res_bus_3ph``, ``res_line_3ph`` and ``res_trafo_3ph`` from ``sol``, an operating
    point of ``model``, the conversion of ``net`` (with its load-like rows as they are in ``net``).
    Out-of-service elements read 0 (voltages NaN)."""
    v_bus = {b: _phase_v(sol, name) for b, name in feeder_buses(net, label).items()}
    net.res_bus_3ph = _bus_frame(net, model, sol, v_bus)
    net.res_line_3ph = _line_frame(net, model, sol)
    net.res_trafo_3ph = _trafo_frame(net, model, sol)


def _phase_v(sol: NodeSolution, bus: str) -> np.ndarray:
    """Phase voltages a, b, c of feeder bus ``bus`` (V)."""
    return sol.v_v[[sol.nodes.index[(bus, p)] for p in PHASES]]


def _v_base(net: pandapowerNet, bus: int) -> float:
    """Line-to-neutral base voltage of pandapower bus ``bus`` (V)."""
    return float(net.bus.at[bus, "vn_kv"]) * 1000.0 / math.sqrt(3.0)


def _bus_frame(
    net: pandapowerNet, model: FeederModel, sol: NodeSolution, v_bus: Mapping[int, np.ndarray]
) -> pd.DataFrame:
    n = len(net.bus)
    v_pu = np.full((n, 3), np.nan, dtype=complex)
    for i, b in enumerate(net.bus.index):
        if int(b) in v_bus:
            v_pu[i] = v_bus[int(b)] / _v_base(net, int(b))
    seq = v_pu @ _TO_SEQUENCE.T
    s = np.zeros((n, 3), dtype=complex)  # per-phase power of the elements at each bus (MVA, load > 0)
    pos = {int(b): i for i, b in enumerate(net.bus.index)}
    for table in _LOAD_TABLES:
        if table not in net or not len(net[table]):
            continue
        df = net[table][net[table]["in_service"].astype(bool)]
        sign = (-1.0 if table.endswith("sgen") else 1.0) * df["scaling"].to_numpy(float)
        if table.startswith("asymmetric"):
            per = np.stack([df[f"p_{p}_mw"] + 1j * df[f"q_{p}_mvar"] for p in PHASES], axis=1)
        else:
            per = np.repeat(((df["p_mw"] + 1j * df["q_mvar"]).to_numpy() / 3.0)[:, None], 3, axis=1)
        np.add.at(s, [pos[int(b)] for b in df["bus"]], per * sign[:, None])
    src_nodes = [sol.nodes.index[(model.source.bus, p)] for p in PHASES]
    v_src = sol.v_v[src_nodes]
    i_src = source_current(model, sol.nodes, sol.switching.source_pu)[src_nodes] - source_admittance(model) @ v_src
    eg = net.ext_grid[net.ext_grid["in_service"].astype(bool)]
    s[pos[int(eg["bus"].iloc[0])]] -= v_src * np.conj(i_src) / 1e6
    cols: dict[str, np.ndarray] = {}
    for k, p in enumerate(PHASES):
        cols[f"vm_{p}_pu"] = np.abs(v_pu[:, k])
        cols[f"va_{p}_degree"] = np.degrees(np.angle(v_pu[:, k]))
    for k, p in enumerate(PHASES):
        cols[f"p_{p}_mw"], cols[f"q_{p}_mvar"] = s[:, k].real, s[:, k].imag
    with np.errstate(divide="ignore", invalid="ignore"):  # a de-energized bus reads NaN
        cols["unbalance_percent"] = np.abs(seq[:, 2] / seq[:, 1]) * 100.0
    return pd.DataFrame(cols, index=net.bus.index)


def _ends(
    v1: np.ndarray, v2: np.ndarray, i1: np.ndarray, i2: np.ndarray, ends: tuple[str, str]
) -> dict[str, np.ndarray]:
    """The per-phase flow columns of branches with phase voltages ``v1``/``v2`` (V) and currents
    ``i1``/``i2`` (A, into the branch) at its two ends, ``(n, 3)`` each, as ``runpp_3ph`` names them."""
    s1, s2 = v1 * np.conj(i1) / 1e6, v2 * np.conj(i2) / 1e6
    a, b = ends
    cols: dict[str, np.ndarray] = {}
    for k, p in enumerate(PHASES):
        cols |= {f"p_{p}_{a}_mw": s1[:, k].real, f"q_{p}_{a}_mvar": s1[:, k].imag}
    for k, p in enumerate(PHASES):
        cols |= {f"p_{p}_{b}_mw": s2[:, k].real, f"q_{p}_{b}_mvar": s2[:, k].imag}
    for k, p in enumerate(PHASES):
        cols |= {f"pl_{p}_mw": (s1 + s2)[:, k].real, f"ql_{p}_mvar": (s1 + s2)[:, k].imag}
    for k, p in enumerate(PHASES):
        cols |= {f"i_{p}_{a}_ka": np.abs(i1[:, k]) / 1e3, f"i_{p}_{b}_ka": np.abs(i2[:, k]) / 1e3}
    return cols


def _line_frame(net: pandapowerNet, model: FeederModel, sol: NodeSolution) -> pd.DataFrame:
    n = len(net.line)
    v1, v2, i1, i2 = (np.zeros((n, 3), dtype=complex) for _ in range(4))
    converted = {ln.name: ln for ln in model.lines}
    for r, idx in enumerate(net.line.index):
        ln = converted.get(str(idx))
        if ln is None or not sol.switching.lines[ln.name]:
            continue
        ys, yc = line_admittance(ln)
        v1[r], v2[r] = _phase_v(sol, ln.bus1), _phase_v(sol, ln.bus2)
        i1[r] = (ys + yc) @ v1[r] - ys @ v2[r]
        i2[r] = (ys + yc) @ v2[r] - ys @ v1[r]
    cols = _ends(v1, v2, i1, i2, ("from", "to"))
    i_ka = np.maximum(np.abs(i1), np.abs(i2)) / 1e3
    i_n = np.abs(i1.sum(axis=1)) / 1e3, np.abs(i2.sum(axis=1)) / 1e3
    rating_ka = (net.line["max_i_ka"] * net.line["df"] * net.line["parallel"]).to_numpy(float)
    for k, p in enumerate(PHASES):
        cols[f"i_{p}_ka"] = i_ka[:, k]
    cols |= {"i_n_from_ka": i_n[0], "i_n_to_ka": i_n[1], "i_n_ka": np.maximum(*i_n)}
    for k, p in enumerate(PHASES):
        cols[f"loading_{p}_percent"] = i_ka[:, k] / rating_ka * 100.0
    cols["loading_percent"] = i_ka.max(axis=1) / rating_ka * 100.0
    return pd.DataFrame(cols, index=net.line.index)


def _trafo_frame(net: pandapowerNet, model: FeederModel, sol: NodeSolution) -> pd.DataFrame:
    n = len(net.trafo)
    v_hv, v_lv, i_hv, i_lv = (np.zeros((n, 3), dtype=complex) for _ in range(4))
    converted = {t.name: t for t in model.transformers}
    complement = {z.name: z for z in model.zero_sequence}  # zero sequence only: the same on every phase
    for r, idx in enumerate(net.trafo.index):
        t = converted.get(str(idx))
        if t is None:
            continue
        node_of = {
            sol.nodes.index[(w.bus, p)]: (w_i, PHASES.index(p)) for w_i, w in enumerate(t.windings) for p in PHASES
        }
        current = np.zeros((2, 3), dtype=complex)  # into the bank at each (winding, conductor)
        for k in range(t.n_phases):
            nodes, block = transformer_phase_block(t, k, float(sol.switching.taps_pu[t.name][k]), sol.nodes)
            for node, i in zip(nodes, block @ sol.v_v[nodes]):
                current[node_of[node]] += i
        v = np.stack([_phase_v(sol, w.bus) for w in t.windings])
        current += (complement[f"transformer.{idx}"].y_s() @ v.mean(axis=1))[:, None]
        v_hv[r], v_lv[r] = v
        i_hv[r], i_lv[r] = current
    cols = _ends(v_hv, v_lv, i_hv, i_lv, ("hv", "lv"))
    tr = net.trafo
    kv = tr["vn_hv_kv"].to_numpy(float), tr["vn_lv_kv"].to_numpy(float)
    rated = (tr["sn_mva"] * tr["parallel"] * tr["df"]).to_numpy(float)
    loading = (
        np.maximum(np.abs(i_hv) * kv[0][:, None], np.abs(i_lv) * kv[1][:, None])
        / 1e3
        * math.sqrt(3.0)
        / rated[:, None]
        * 100.0
    )
    for k, p in enumerate(PHASES):
        cols[f"loading_{p}_percent"] = loading[:, k]
    cols["loading_percent"] = loading.max(axis=1)
    return pd.DataFrame(cols, index=net.trafo.index)

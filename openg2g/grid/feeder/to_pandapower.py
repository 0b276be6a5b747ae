"""The pandapower view of a feeder: standard tables plus the phase data pandapower cannot hold.

Standard tables (``bus``, ``line``, ``trafo``, ``asymmetric_load``, ``shunt``, ``ext_grid``) carry
sequence-frame values (positive and zero sequence of each line's phase matrix, one tap per
transformer), which is what ``runpp_3ph`` solves. Extra columns and tables keep the rest:

- ``bus.phases``, ``line.phases`` / ``line.phases_to``, ``asymmetric_load.model``,
  ``shunt.phases``: phase letters (``"abc"``, ``"cb"``) and OpenDSS load models;
- ``net["line_phase"]``: per line, the full resistance/reactance/susceptance matrices (ohm, uS,
  whole line) as nested lists;
- ``net["regulator"]``: one row per regulated phase: bank, transformer, phase, tap step, limits;
- ``net["primitive"]``: the static elements pandapower has no table for (center-tapped and
  multi-winding transformers, reactors), with their terminals and primitive admittance.

The exact solver works from :class:`~openg2g.grid.feeder.model.FeederModel` (kept on the
:class:`~openg2g.grid.feeder.library.Feeder`), not from these tables.
"""

from __future__ import annotations

import math

import numpy as np
import pandapower as pp
import pandas as pd

from openg2g.grid.feeder.model import FeederModel
from openg2g.grid.feeder.network import FORTESCUE

__all__ = ["sequence_impedance", "to_pandapower"]


def sequence_impedance(z: np.ndarray) -> tuple[complex, complex]:
    """Positive- and zero-sequence values of a phase matrix (1-, 2- or 3-phase).

    A 3x3 matrix is transformed exactly (diagonal of ``A^-1 Z A``); a smaller one is treated as
    balanced with its mean self and mutual terms.
    """
    n = z.shape[0]
    if n == 3:
        z012 = np.linalg.inv(FORTESCUE) @ z @ FORTESCUE
        return complex(z012[1, 1]), complex(z012[0, 0])
    zs = complex(np.mean(np.diag(z)))
    zm = complex(np.mean(z[~np.eye(n, dtype=bool)])) if n > 1 else 0j
    return zs - zm, zs + 2 * zm


def _add_source(net: pp.pandapowerNet, model: FeederModel, bus_idx: dict[str, int]) -> None:
    """The source as an external grid with its short-circuit impedance."""
    src = model.source
    z1 = complex(*src.z1_ohm)
    z0 = complex(*src.z0_ohm)
    s_sc_mva = src.base_kv**2 / max(abs(z1), 1e-9)
    pp.create_ext_grid(
        net,
        bus_idx[src.bus],
        vm_pu=src.v_pu,
        va_degree=src.angle_deg,
        name="source",
        s_sc_max_mva=s_sc_mva,
        rx_max=z1.real / z1.imag if z1.imag else 0.1,
        x0x_max=z0.imag / z1.imag if z1.imag else 1.0,
        r0x0_max=z0.real / z0.imag if z0.imag else 0.1,
    )


def _add_lines(net: pp.pandapowerNet, model: FeederModel, bus_idx: dict[str, int]) -> None:
    """Lines from their sequence impedances; the phase data kept in ``net.line_phase``."""
    w = 2 * math.pi * model.frequency_hz
    phase_rows = []
    cols: dict[str, list[float]] = {k: [] for k in ("r", "x", "c", "r0", "x0", "c0", "length")}
    for ln in model.lines:
        z1l, z0l = sequence_impedance(ln.z_ohm())
        b1, b0 = sequence_impedance(np.asarray(ln.b_us).astype(complex))
        length = ln.length_km if np.isfinite(ln.length_km) and ln.length_km > 0 else 1.0
        cols["length"].append(length)
        cols["r"].append(max(z1l.real, 1e-9) / length)
        cols["x"].append(z1l.imag / length)
        cols["c"].append(max(b1.real, 0.0) / (w * 1e-3) / length)
        cols["r0"].append(max(z0l.real, 1e-9) / length)
        cols["x0"].append(z0l.imag / length)
        cols["c0"].append(max(b0.real, 0.0) / (w * 1e-3) / length)
        phase_rows.append(
            {
                "line": ln.name,
                "phases": "".join(ln.phases1),
                "phases_to": "".join(ln.phases2),
                "switch": ln.switch,
                "r_ohm": ln.r_ohm,
                "x_ohm": ln.x_ohm,
                "b_us": ln.b_us,
            }
        )
    if model.lines:
        pp.create_lines_from_parameters(
            net,
            [bus_idx[ln.bus1] for ln in model.lines],
            [bus_idx[ln.bus2] for ln in model.lines],
            length_km=cols["length"],
            r_ohm_per_km=cols["r"],
            x_ohm_per_km=cols["x"],
            c_nf_per_km=cols["c"],
            max_i_ka=1.0,
            r0_ohm_per_km=cols["r0"],
            x0_ohm_per_km=cols["x0"],
            c0_nf_per_km=cols["c0"],
            name=[ln.name for ln in model.lines],
            in_service=[ln.in_service for ln in model.lines],
        )
    net.line["phases"] = [r["phases"] for r in phase_rows]
    net.line["phases_to"] = [r["phases_to"] for r in phase_rows]
    net.line["switch"] = [r["switch"] for r in phase_rows]
    net["line_phase"] = pd.DataFrame(phase_rows)


def _add_transformers(net: pp.pandapowerNet, model: FeederModel, bus_idx: dict[str, int]) -> None:
    """One pandapower transformer per regulator bank (it has a single tap) or plain transformer;
    the per-phase taps of the banks in ``net.regulator``."""
    reg_rows = []
    made_banks: set[str] = set()
    trafo_banks: list[str | None] = []
    for t in model.transformers:
        w1, w2 = t.windings
        steps = [round((tap - 1.0) / t.step_pu) for tap in [w2.tap] * t.n_phases]
        if t.bank:
            for k, ph in enumerate(w2.phases[: t.n_phases]):
                reg_rows.append(
                    {
                        "bank": t.bank,
                        "transformer": t.name,
                        "phase": ph,
                        "tap_pos": steps[k],
                        "tap_min": round((t.min_tap_pu - 1) / t.step_pu),
                        "tap_max": round((t.max_tap_pu - 1) / t.step_pu),
                        "tap_step_pu": t.step_pu,
                    }
                )
            if t.bank in made_banks:
                continue  # one pandapower transformer per bank: it has a single tap
            made_banks.add(t.bank)
        trafo_banks.append(t.bank)
        vg = ("D" if w1.conn == "delta" else "YN") + ("d" if w2.conn == "delta" else "yn")
        z_pct = math.hypot(w1.r_pct + w2.r_pct, t.x_pct)
        hv_kv = w1.kv if t.n_phases == 3 else w1.kv * math.sqrt(3)
        lv_kv = w2.kv if t.n_phases == 3 else w2.kv * math.sqrt(3)
        step_pct = t.step_pu * 100.0
        pp.create_transformer_from_parameters(
            net,
            bus_idx[w1.bus],
            bus_idx[w2.bus],
            sn_mva=w1.kva / 1000.0 * (3 / t.n_phases),
            vn_hv_kv=hv_kv,
            vn_lv_kv=lv_kv,
            vkr_percent=w1.r_pct + w2.r_pct,
            vk_percent=max(z_pct, 1e-6),
            pfe_kw=0.0,
            i0_percent=0.0,
            vector_group=vg,
            vk0_percent=max(z_pct, 1e-6),
            vkr0_percent=w1.r_pct + w2.r_pct,
            mag0_percent=1e6,
            mag0_rx=0.0,
            si0_hv_partial=0.9,
            shift_degree=30.0 if vg in ("Dyn", "YNd") else 0.0,
            tap_side="lv" if t.bank else None,
            tap_neutral=0 if t.bank else np.nan,
            tap_min=round((t.min_tap_pu - 1) / t.step_pu) if t.bank else np.nan,
            tap_max=round((t.max_tap_pu - 1) / t.step_pu) if t.bank else np.nan,
            tap_step_percent=step_pct if t.bank else np.nan,
            tap_pos=int(np.mean(steps)) if t.bank else np.nan,
            tap_changer_type="Ratio" if t.bank else None,
            name=t.bank or t.name,
        )
    net.trafo["bank"] = trafo_banks
    net["regulator"] = pd.DataFrame(
        reg_rows, columns=["bank", "transformer", "phase", "tap_pos", "tap_min", "tap_max", "tap_step_pu"]
    )


def _add_loads(net: pp.pandapowerNet, model: FeederModel, bus_idx: dict[str, int]) -> None:
    """Loads as asymmetric loads (a delta branch's power on its first phase), the table written at
    once (pandapower has no vectorized ``create_asymmetric_loads``)."""
    rows = []
    for ld in model.loads:
        p = {ph: 0.0 for ph in "abc"}
        q = {ph: 0.0 for ph in "abc"}
        conds = ld.phases
        for k in range(ld.n_phases):
            if ld.conn == "wye" or len(conds) == 1:
                key = conds[k] or "a"
            else:
                pair = frozenset(c for c in (conds[k], conds[(k + 1) % len(conds)]) if c)
                key = {frozenset("ab"): "a", frozenset("bc"): "b", frozenset("ca"): "c"}.get(pair, "a")
            p[key] += ld.kw / 1000.0 / ld.n_phases
            q[key] += ld.kvar / 1000.0 / ld.n_phases
        rows.append(
            {
                "name": ld.name,
                "bus": bus_idx[ld.bus],
                **{f"p_{ph}_mw": p[ph] for ph in "abc"},
                **{f"q_{ph}_mvar": q[ph] for ph in "abc"},
                "sn_a_mva": np.nan,
                "sn_b_mva": np.nan,
                "sn_c_mva": np.nan,
                "sn_mva": np.nan,
                "scaling": 1.0,
                "in_service": True,
                "type": "delta" if ld.conn == "delta" and ld.n_phases == 3 else "wye",
            }
        )
    if rows:
        table = pd.DataFrame(rows, columns=net.asymmetric_load.columns)
        net.asymmetric_load = table.astype(net.asymmetric_load.dtypes.to_dict())
    net.asymmetric_load["model"] = [ld.model for ld in model.loads] if model.loads else []
    net.asymmetric_load["phases"] = ["".join(p or "" for p in ld.phases) for ld in model.loads] if model.loads else []


def _add_capacitors(net: pp.pandapowerNet, model: FeederModel, bus_idx: dict[str, int]) -> None:
    """Capacitors as shunts."""
    for cap in model.capacitors:
        pp.create_shunt(
            net,
            bus_idx[cap.bus],
            q_mvar=-cap.kvar / 1000.0,
            p_mw=0.0,
            vn_kv=model.bus_kv[cap.bus],
            name=cap.name,
            in_service=cap.closed,
        )
    net.shunt["phases"] = ["".join(c.phases) for c in model.capacitors] if model.capacitors else []


def to_pandapower(model: FeederModel) -> pp.pandapowerNet:
    """Build the pandapower network of ``model`` (see the module docstring for its tables)."""
    net = pp.create_empty_network(name=model.name, f_hz=model.frequency_hz)
    names = list(model.bus_kv)
    index = pp.create_buses(
        net,
        len(names),
        vn_kv=[model.bus_kv[b] for b in names],
        name=names,
        geodata=[model.coords.get(b) for b in names]
        if model.coords and all(b in model.coords for b in names)
        else None,
    )
    bus_idx = dict(zip(names, (int(i) for i in index)))
    if model.coords and not all(b in model.coords for b in names):
        for b, (x, y) in model.coords.items():
            net.bus.at[bus_idx[b], "geo"] = f'{{"coordinates": [{x!r}, {y!r}], "type": "Point"}}'
    net.bus["phases"] = ["".join(model.bus_phases[b]) for b in net.bus.name]
    _add_source(net, model, bus_idx)
    _add_lines(net, model, bus_idx)
    _add_transformers(net, model, bus_idx)
    _add_loads(net, model, bus_idx)
    _add_capacitors(net, model, bus_idx)
    net["primitive"] = pd.DataFrame(
        [
            {"name": prim.name, "terminals": prim.terminals, "g_s": prim.g_s, "b_s": prim.b_s}
            for prim in model.primitives
        ],
        columns=["name", "terminals", "g_s", "b_s"],
    )
    return net

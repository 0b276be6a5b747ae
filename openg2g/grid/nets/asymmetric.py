"""An asymmetric pandapower net as a phase-frame feeder: the model ``runpp_3ph`` solves, converted exactly.

A net whose ``asymmetric_load`` or ``asymmetric_sgen`` table has rows (see :func:`is_asymmetric`)
is not solved balanced: :func:`feeder_model` turns it into a :class:`~openg2g.grid.feeder.model.FeederModel`
and the phase-frame solver of :class:`~openg2g.grid.feeder.backend.FeederGrid` solves it. Every element
is converted to what ``pandapower.runpp_3ph`` (pandapower 3.x) makes of it, so both give the same
voltages (tests/grid/test_pp3ph.py):

- **ext_grid** (exactly one in service): ``runpp_3ph`` holds the *positive-sequence* voltage at
  ``vm_pu``/``va_degree`` (no source impedance in that sequence) and puts the short-circuit
  impedance ``1.1 vn_kv^2 / s_sc_max_mva`` (``rx_max``; zero sequence ``x0x_max``, ``r0x0_max``;
  the 1.1 is its voltage factor c) to ground in the negative and zero sequences only. The source
  is that: a stiff positive-sequence impedance (:data:`STIFF_SOURCE` of the short-circuit one),
  the negative- and zero-sequence ones as given.
- **line**: phase impedance and susceptance matrices ``A diag(z0, z1, z1) A^-1`` of the whole
  line from ``r/x/c`` and ``r0/x0/c0`` per km, ``length_km`` and ``parallel``; rated at
  ``max_i_ka * df * parallel`` (emergency rating the same: pandapower has none).
- **trafo** ``Dyn`` (``shift_degree`` 30, 150 or 270: the delta winding's conductors rotated) and
  ``YNyn`` (``shift_degree`` 0): a bank of single-phase units at ``vk_percent``/``vkr_percent``
  with the tap in force (``Ratio`` changers), and a zero-sequence-only admittance
  (:class:`~openg2g.grid.feeder.model.ZeroSequenceModel`) adding what ``runpp_3ph``'s zero-sequence
  T model (``vk0_percent``, ``vkr0_percent``, ``mag0_percent``, ``mag0_rx``, ``si0_hv_partial``)
  has beyond the bank. No magnetizing branch in the positive sequence: ``pfe_kw`` and
  ``i0_percent`` must be 0.
- **asymmetric_load / asymmetric_sgen / load / sgen**: constant power at every voltage per phase
  (``runpp_3ph`` has no voltage dependence), ``type`` ``wye`` (phase to ground) or ``delta``
  (``p_a`` between a and b, ``p_b`` b-c, ``p_c`` c-a), times ``scaling``; a ``load``/``sgen`` row
  is split equally over the phases. Each phase is a feeder load named ``<table>.<index>.<phase>``.
- **switch**: a closed bus-bus switch joins its buses (the lowest index names the joined bus), an
  open one does nothing; an open line or transformer switch takes the element out of service.
- out-of-service buses drop with what is attached to them; out-of-service lines stay, open.

Buses keep the names of :class:`~openg2g.grid.nets.source.BusNames` (lower case, as feeder buses);
lines and transformers are named by their index (branches ``line.<index>``, ``transformer.<index>``
as on a balanced net). Anything else (generators,
shunts, three-winding transformers, impedances, wards, storage, other vector groups, ...) is
refused with the table and row, never dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from openg2g.core.errors import FeederError, ScenarioError
from openg2g.grid.config import GridSite, GridSpec
from openg2g.grid.feeder.backend import FeederGrid
from openg2g.grid.feeder.checks import check_against_feeder
from openg2g.grid.feeder.library import Feeder, feeder_from_model
from openg2g.grid.feeder.model import (
    FeederModel,
    LineModel,
    LoadModel,
    SourceModel,
    TransformerModel,
    WindingModel,
    ZeroSequenceModel,
)
from openg2g.grid.feeder.network import FORTESCUE, NodeIndex, sequence_to_phase, transformer_phase_block
from openg2g.grid.nets.source import NET_RATINGS, BusNames

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

__all__ = [
    "ASYMMETRIC_TABLES",
    "STIFF_SOURCE",
    "asymmetric_grid",
    "check_asymmetric_spec",
    "feeder_buses",
    "feeder_from_net",
    "feeder_model",
    "is_asymmetric",
]

ASYMMETRIC_TABLES = ("asymmetric_load", "asymmetric_sgen")
"""Tables whose rows make a net asymmetric (solved by the phase-frame solver)."""

STIFF_SOURCE = 1e-4
"""Positive-sequence source impedance as a fraction of the short-circuit one. ``runpp_3ph`` holds
that sequence's voltage exactly; this leaves an error of this fraction of the source's
positive-sequence voltage drop (about ``1.1 S_load / s_sc_max_mva`` pu): under 1e-9 pu on the
European LV feeder, 1e-6 pu for a load of 1% of the short-circuit power. Stiffer, the nodal matrix
loses digits: at 1e-6 line currents on the feeder's 1 m cables are off by mA (0.04%)."""

_C_MAX = 1.1
"""``runpp_3ph``'s voltage factor c in the ext_grid's short-circuit impedance."""

_UNSUPPORTED = {
    "gen": "a voltage-controlled generator",
    "shunt": "a shunt",
    "trafo3w": "a three-winding transformer",
    "impedance": "an impedance",
    "ward": "a ward equivalent",
    "xward": "an extended ward",
    "dcline": "a DC line",
    "storage": "a storage unit",
    "motor": "a motor",
    "svc": "an SVC",
    "tcsc": "a TCSC",
    "ssc": "an SSC",
    "vsc": "a VSC",
}
"""Element tables the converter refuses (in-service rows), with what a row is."""

_DELTA_PAIR = {"a": ("a", "b"), "b": ("b", "c"), "c": ("c", "a")}
"""Conductors of the delta branch that a pandapower delta load's phase power sits on."""

_DYN_HV_PHASES = {30: ("a", "b", "c"), 150: ("b", "c", "a"), 270: ("c", "a", "b")}
"""Delta winding conductors giving a Dyn bank's low side a lag of ``shift_degree``."""


def is_asymmetric(net: pandapowerNet) -> bool:
    """Whether ``net`` has rows in an asymmetric element table (:data:`ASYMMETRIC_TABLES`)."""
    return any(table in net and len(net[table]) for table in ASYMMETRIC_TABLES)


class _Refuse:
    """Builds the error of one element of the net."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __call__(self, table: str, idx: object, what: str) -> FeederError:
        return FeederError(f"grid.pandapower: net {self.label!r}: {table} row {idx}: {what}")


def _live(net: pandapowerNet, table: str) -> pd.DataFrame:
    """The in-service rows of ``table`` (empty when the net has no such table)."""
    if table not in net or not len(net[table]):
        return pd.DataFrame()
    df = net[table]
    return df[df["in_service"].astype(bool)] if "in_service" in df else df


def _need(row: pd.Series, cols: tuple[str, ...], refuse: _Refuse, table: str, why: str) -> list[float]:
    """The values of ``cols`` of ``row``, refusing a missing or NaN one."""
    out = []
    for c in cols:
        v = row.get(c)
        if v is None or pd.isna(v):
            raise refuse(table, row.name, f"{c} is missing: {why}")
        out.append(float(v))
    return out


class _Buses:
    """In-service buses joined by closed bus-bus switches, and their feeder names."""

    def __init__(self, net: pandapowerNet, refuse: _Refuse) -> None:
        names = BusNames(net)
        name = {i: n.lower() for i, n in zip(names.index, names.names)}
        live = {int(i) for i in net.bus.index[net.bus["in_service"].astype(bool)]}
        parent = {i: i for i in live}

        def root(i: int) -> int:
            while parent[i] != i:
                i = parent[i]
            return i

        for idx, sw in net.switch.iterrows() if "switch" in net else ():
            if sw["et"] != "b" or not bool(sw["closed"]):
                continue
            a, b = int(sw["bus"]), int(sw["element"])
            if a not in live or b not in live:
                continue
            if not pd.isna(sw.get("z_ohm")) and float(sw["z_ohm"]) != 0.0:
                raise refuse("switch", idx, "a closed bus-bus switch with z_ohm > 0 is not converted (set z_ohm 0)")
            ra, rb = root(a), root(b)
            parent[max(ra, rb)] = min(ra, rb)
        self.of: dict[int, str] = {i: name[root(i)] for i in live}
        """pandapower bus index -> feeder bus name, for every in-service bus."""
        self.kv = {name[i]: float(net.bus.at[i, "vn_kv"]) for i in sorted(live) if root(i) == i}
        """Feeder bus name -> line-to-line base voltage (kV)."""

    def pair(self, *buses: object) -> tuple[str, ...] | None:
        """Feeder names of ``buses``, None when one is out of service."""
        out = tuple(self.of.get(int(b)) for b in buses)  # type: ignore[call-overload]
        return None if any(b is None for b in out) else out  # type: ignore[return-value]


def feeder_buses(net: pandapowerNet, label: str) -> dict[int, str]:
    """pandapower bus index -> the feeder bus it is converted to, for every in-service bus
    (buses joined by closed bus-bus switches share one).

    :raises FeederError: a closed bus-bus switch with an impedance.
    """
    return _Buses(net, _Refuse(label)).of


def _open_switched(net: pandapowerNet, et: str) -> set[int]:
    """Indices of lines (``et="l"``) or transformers (``"t"``) with an open switch."""
    if "switch" not in net or not len(net.switch):
        return set()
    sw = net.switch
    return {int(e) for e in sw.loc[(sw["et"] == et) & ~sw["closed"].astype(bool), "element"]}


def _source(net: pandapowerNet, buses: _Buses, refuse: _Refuse) -> SourceModel:
    """The one in-service ext_grid as ``runpp_3ph`` models it (see the module docstring)."""
    eg = _live(net, "ext_grid")
    if len(eg) != 1:
        raise refuse("ext_grid", list(eg.index), f"{len(eg)} external grids in service: give exactly one")
    row = eg.iloc[0]
    why = "runpp_3ph needs the short-circuit data of the external grid"
    s_sc, rx, x0x, r0x0 = _need(row, ("s_sc_max_mva", "rx_max", "x0x_max", "r0x0_max"), refuse, "ext_grid", why)
    if s_sc <= 0:
        raise refuse("ext_grid", row.name, f"s_sc_max_mva must be > 0, got {s_sc}")
    bus = buses.pair(row["bus"])
    if bus is None:
        raise refuse("ext_grid", row.name, "its bus is out of service")
    kv = float(net.bus.at[int(row["bus"]), "vn_kv"])
    x = _C_MAX * kv**2 / s_sc / math.sqrt(rx**2 + 1.0)
    z2 = complex(rx * x, x)
    z0 = complex(r0x0 * x0x * x, x0x * x)
    z1 = z2 * STIFF_SOURCE
    return SourceModel(
        bus=bus[0],
        base_kv=kv,
        v_pu=float(row["vm_pu"]),
        angle_deg=float(row["va_degree"]),
        z1_ohm=[z1.real, z1.imag],
        z0_ohm=[z0.real, z0.imag],
        z2_ohm=[z2.real, z2.imag],
    )


def _lines(net: pandapowerNet, buses: _Buses, refuse: _Refuse) -> Iterator[LineModel]:
    """Every line whose buses are in service (see the module docstring)."""
    if not len(net.line):
        return
    w = 2.0 * math.pi * float(net.f_hz)
    opened = _open_switched(net, "l")
    seq = ("r_ohm_per_km", "x_ohm_per_km", "c_nf_per_km", "r0_ohm_per_km", "x0_ohm_per_km", "c0_nf_per_km")
    why = "runpp_3ph needs the line's zero-sequence data"
    for idx, row in net.line.iterrows():
        ends = buses.pair(row["from_bus"], row["to_bus"])
        if ends is None:
            continue
        if ends[0] == ends[1]:
            raise refuse("line", idx, f"both ends on bus {ends[0]!r} (joined by closed bus-bus switches)")
        for g in ("g_us_per_km", "g0_us_per_km"):
            if g in row and not pd.isna(row[g]) and float(row[g]) != 0.0:
                raise refuse("line", idx, f"{g} = {row[g]}: shunt conductance is not converted (set it to 0)")
        r1, x1, c1, r0, x0, c0 = _need(row, seq, refuse, "line", why)
        length, par = float(row["length_km"]), float(row["parallel"])
        z = sequence_to_phase(complex(r0, x0), complex(r1, x1), complex(r1, x1)) * length / par
        b_us = sequence_to_phase(w * c0, w * c1, w * c1).real * 1e-3 * length * par  # nF/km -> uS
        rating = float(row["max_i_ka"]) * 1000.0 * float(row["df"]) * par
        yield LineModel(
            name=str(idx),
            bus1=ends[0],
            bus2=ends[1],
            phases1=("a", "b", "c"),
            phases2=("a", "b", "c"),
            r_ohm=z.real.tolist(),
            x_ohm=z.imag.tolist(),
            b_us=b_us.tolist(),
            length_km=length,
            in_service=bool(row["in_service"]) and int(idx) not in opened,
            norm_amps=rating,
            emerg_amps=rating,
        )


def _tapped_kv(row: pd.Series, refuse: _Refuse) -> tuple[float, float]:
    """Rated HV and LV voltages (kV) with the tap in force: pandapower moves them for a ``Ratio``
    changer only (none for an empty ``tap_changer_type``)."""
    hv, lv = float(row["vn_hv_kv"]), float(row["vn_lv_kv"])
    kind = row.get("tap_changer_type")
    if kind is None or pd.isna(kind) or kind == "" or pd.isna(row.get("tap_pos")):
        return hv, lv
    table = row.get("tap_dependency_table")
    if kind != "Ratio" or (table is not None and not pd.isna(table) and bool(table)):
        raise refuse("trafo", row.name, f"tap_changer_type {kind!r} (or a tap dependency table) is not converted")
    if not pd.isna(row.get("tap_step_degree")) and float(row["tap_step_degree"]) != 0.0:
        raise refuse("trafo", row.name, "a phase-shifting tap (tap_step_degree != 0) is not converted")
    neutral = 0.0 if pd.isna(row.get("tap_neutral")) else float(row["tap_neutral"])
    ratio = 1.0 + (float(row["tap_pos"]) - neutral) * float(row["tap_step_percent"]) / 100.0
    return (hv * ratio, lv) if row["tap_side"] == "hv" else (hv, lv * ratio)


def _zero_sequence_target(row: pd.Series, hv_kv: float, lv_kv: float, refuse: _Refuse) -> np.ndarray:
    """``runpp_3ph``'s zero-sequence admittance over (HV, LV) of a Dyn or YNyn transformer (S):
    its T model (leakage split ``si0_hv_partial`` towards HV, magnetizing ``mag0_percent`` of the
    leakage magnitude at ``mag0_rx`` in the middle) in ohms on the LV side, the HV side shorted
    by the delta of a Dyn."""
    why = "runpp_3ph needs the transformer's zero-sequence data"
    cols = ("vk0_percent", "vkr0_percent", "mag0_percent", "mag0_rx", "si0_hv_partial")
    vk0, vkr0, mag0, mag0_rx, si0 = _need(row, cols, refuse, "trafo", why)
    if vk0 <= 0 or not 0 <= vkr0 < vk0:
        raise refuse("trafo", row.name, f"need 0 <= vkr0_percent < vk0_percent, got {vkr0} and {vk0}")
    if mag0 <= 0 or not 0 < si0 < 1:
        raise refuse("trafo", row.name, f"need mag0_percent > 0 and 0 < si0_hv_partial < 1, got {mag0}, {si0}")
    z_base = lv_kv**2 / float(row["sn_mva"])
    par = float(row["parallel"])
    z_sc = vk0 / 100.0 * z_base
    r_sc = vkr0 / 100.0 * z_base
    z0k = complex(r_sc, math.sqrt(z_sc**2 - r_sc**2)) / par
    x_m = z_sc * mag0 / 100.0 / math.sqrt(mag0_rx**2 + 1.0)
    z_hv, z_lv, z_m = si0 * z0k, (1.0 - si0) * z0k, complex(x_m * mag0_rx, x_m) / par
    z_t = z_hv * z_lv + z_lv * z_m + z_hv * z_m
    y_a, y_b, y_c = z_lv / z_t, z_hv / z_t, z_m / z_t  # pi: HV shunt, LV shunt, series
    if str(row["vector_group"]).lower() == "dyn":
        return np.array([[0.0, 0.0], [0.0, y_c + y_b]])
    n = hv_kv / lv_kv
    return np.array([[(y_c + y_a) / n**2, -y_c / n], [-y_c / n, y_c + y_b]])


def _zero_sequence_of_bank(t: TransformerModel) -> np.ndarray:
    """Zero-sequence admittance over (HV, LV) of the bank ``t`` as the phase-frame solver stamps it (S)."""
    keys = [(w.bus, p) for w in t.windings for p in "abc"]
    nodes = NodeIndex(tuple(f"{b}.{p}" for b, p in keys), {k: i for i, k in enumerate(keys)}, np.ones(6))
    y = np.zeros((6, 6), dtype=complex)
    for k in range(3):
        idx, blk = transformer_phase_block(t, k, t.windings[1].tap, nodes)
        for i, a in enumerate(idx):
            for j, b in enumerate(idx):
                y[a, b] += blk[i, j]
    f_inv = np.linalg.inv(FORTESCUE)
    return np.array(
        [[(f_inv @ y[3 * i : 3 * i + 3, 3 * j : 3 * j + 3] @ FORTESCUE)[0, 0] for j in (0, 1)] for i in (0, 1)]
    )


def _transformers(
    net: pandapowerNet, buses: _Buses, refuse: _Refuse
) -> Iterator[tuple[TransformerModel, ZeroSequenceModel]]:
    """Every in-service transformer whose buses are in service, with its zero-sequence complement."""
    trafos = _live(net, "trafo")
    opened = _open_switched(net, "t")
    for idx, row in trafos.iterrows():
        ends = buses.pair(row["hv_bus"], row["lv_bus"])
        if ends is None or int(idx) in opened:
            continue
        if ends[0] == ends[1]:
            raise refuse("trafo", idx, f"both sides on bus {ends[0]!r} (joined by closed bus-bus switches)")
        group = str(row.get("vector_group", "")).lower()
        shift = round(float(row["shift_degree"])) % 360
        if group == "dyn" and shift in _DYN_HV_PHASES:
            hv_phases, hv_conn = _DYN_HV_PHASES[shift], "delta"
        elif group == "ynyn" and shift == 0:
            hv_phases, hv_conn = ("a", "b", "c"), "wye"
        else:
            raise refuse(
                "trafo",
                idx,
                f"vector_group {row.get('vector_group')!r} with shift_degree {row['shift_degree']} is not converted "
                "(Dyn with shift_degree 30, 150 or 270; YNyn with 0)",
            )
        for col in ("pfe_kw", "i0_percent"):
            if float(row[col]) != 0.0:
                raise refuse("trafo", idx, f"{col} = {row[col]}: the magnetizing branch is not converted (set it to 0)")
        if not pd.isna(row.get("tap2_changer_type")) and row.get("tap2_changer_type") != "":
            raise refuse("trafo", idx, "a second tap changer (tap2_*) is not converted")
        hv_kv, lv_kv = _tapped_kv(row, refuse)
        vk, vkr = float(row["vk_percent"]), float(row["vkr_percent"])
        kva = float(row["sn_mva"]) * 1000.0 * float(row["parallel"])
        taps = (hv_kv / float(row["vn_hv_kv"]), lv_kv / float(row["vn_lv_kv"]))
        bank = TransformerModel(
            name=str(idx),
            n_phases=3,
            windings=[
                WindingModel(ends[0], hv_phases, hv_conn, float(row["vn_hv_kv"]), kva, vkr / 2, taps[0]),
                WindingModel(ends[1], ("a", "b", "c"), "wye", float(row["vn_lv_kv"]), kva, vkr / 2, taps[1]),
            ],
            x_pct=math.sqrt(vk**2 - vkr**2),
            ppm_antifloat=0.0,
            norm_kva=kva * float(row["df"]),
            emerg_kva=kva * float(row["df"]),
        )
        extra = _zero_sequence_target(row, hv_kv, lv_kv, refuse) - _zero_sequence_of_bank(bank)
        yield bank, ZeroSequenceModel(f"transformer.{idx}", ends, extra.real.tolist(), extra.imag.tolist())


def _loads(net: pandapowerNet, buses: _Buses, refuse: _Refuse) -> Iterator[LoadModel]:
    """One constant-power load per phase of every load-like row (see the module docstring)."""
    for table in ("load", "sgen", "asymmetric_load", "asymmetric_sgen"):
        sign = -1.0 if table.endswith("sgen") else 1.0
        for idx, row in _live(net, table).iterrows():
            bus = buses.pair(row["bus"])
            if bus is None:
                continue
            kind = row.get("type", "wye")
            if kind not in ("wye", "delta"):
                raise refuse(table, idx, f"type {kind!r}: runpp_3ph draws only wye and delta rows (set type)")
            scale = sign * float(row["scaling"])
            kv = buses.kv[bus[0]]
            for ph in "abc":
                if table.startswith("asymmetric"):
                    p, q = float(row[f"p_{ph}_mw"]), float(row[f"q_{ph}_mvar"])
                else:
                    p, q = float(row["p_mw"]) / 3.0, float(row["q_mvar"]) / 3.0
                if p == 0.0 and q == 0.0:
                    continue
                yield LoadModel(
                    name=f"{table}.{idx}.{ph}",
                    bus=bus[0],
                    phases=_DELTA_PAIR[ph] if kind == "delta" else (ph,),
                    conn=kind,
                    model=1,
                    kv=kv if kind == "delta" else kv / math.sqrt(3.0),
                    kw=p * scale * 1000.0,
                    kvar=q * scale * 1000.0,
                    n_phases=1,
                    vminpu=0.0,  # constant power at every voltage, as runpp_3ph
                    vmaxpu=math.inf,
                    vlowpu=0.0,
                )


def feeder_model(net: pandapowerNet, label: str) -> FeederModel:
    """The phase-frame model of an asymmetric net (see the module docstring).

    :param net: the net, as loaded (:func:`openg2g.grid.nets.source.load_net`).
    :param label: the net's name in messages (``grid.pandapower``).
    :raises FeederError: an element that is not converted, or one missing the data ``runpp_3ph``
        needs (zero-sequence impedances, short-circuit power), naming the table and row.
    """
    refuse = _Refuse(label)
    for table, what in _UNSUPPORTED.items():
        live = _live(net, table)
        if len(live):
            raise refuse(
                table,
                live.index[0],
                f"{what} is not converted to the phase-frame model (see openg2g.grid.nets.asymmetric)",
            )
    buses = _Buses(net, refuse)
    source = _source(net, buses, refuse)
    pairs = list(_transformers(net, buses, refuse))
    return FeederModel(
        name=label,
        source=source,
        bus_kv=buses.kv,
        bus_phases={b: ("a", "b", "c") for b in buses.kv},
        lines=list(_lines(net, buses, refuse)),
        transformers=[t for t, _ in pairs],
        loads=list(_loads(net, buses, refuse)),
        zero_sequence=[z for _, z in pairs],
        frequency_hz=float(net.f_hz),
    )


def feeder_from_net(net: pandapowerNet, label: str) -> Feeder:
    """:func:`feeder_model` wrapped as a :class:`~openg2g.grid.feeder.library.Feeder`."""
    return feeder_from_model(feeder_model(net, label))


def check_asymmetric_spec(feeder: Feeder, spec: GridSpec, sites: Sequence[GridSite]) -> list[tuple[str, str]]:
    """Problems of ``spec``/``sites`` on the converted net ``feeder`` as ``(field path, message)``:
    those of any feeder (:func:`~openg2g.grid.feeder.checks.check_against_feeder`), site transformers
    and a solver other than the phase-frame one."""
    problems = [p for p in check_against_feeder(feeder, spec, sites) if p[0] != "grid.site_transformers"]
    if spec.site_transformers:
        problems.append(("grid.site_transformers", "available on balanced pandapower nets only, not asymmetric ones"))
    if spec.branch_ratings:
        problems = [p for p in problems if not p[0].startswith("grid.branch_ratings")]
        problems.append(("grid.branch_ratings", NET_RATINGS))
    if spec.solver != "exact":
        problems.append(("grid.solver", "an asymmetric net is solved by the phase-frame solver (solver: exact)"))
    return problems


def asymmetric_grid(net: pandapowerNet, spec: GridSpec, sites: Sequence[GridSite], base_dir: Path) -> FeederGrid:
    """The grid backend on the asymmetric net ``net`` (``grid.pandapower``): a
    :class:`~openg2g.grid.feeder.backend.FeederGrid` on its phase-frame model.

    :raises FeederError: the net cannot be converted (:func:`feeder_model`).
    :raises ScenarioError: the spec does not fit it (:func:`check_asymmetric_spec`).
    """
    assert spec.pandapower is not None, "asymmetric_grid needs grid.pandapower"
    feeder = feeder_from_net(net, spec.pandapower)
    problems = check_asymmetric_spec(feeder, spec, sites)
    if problems:
        raise ScenarioError(problems)
    return FeederGrid(feeder, spec, sites, base_dir)

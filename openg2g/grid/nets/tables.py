"""The values of a pandapower net's tables that a power flow divides by, checked before it runs.

pandapower builds its admittance matrix from the element tables without checking them: a line of
zero length or zero impedance, a transformer with ``vk_percent`` 0 or a bus with ``vn_kv`` 0
divide by zero inside ``makeYbus``/``makeBdc``, and a NaN impedance or setpoint spreads NaN through
every voltage. :func:`net_table_problems` finds such values and names each by table, row index and
column, so that a scenario on the net is refused at ``validate`` with a message the user can act on.

The rules (:data:`NET_COLUMN_RULES`) are what the solve needs and no more: negative resistances,
reactances and short-circuit voltages stay allowed (MATPOWER's cases convert series compensators to
them); a branch rating (``line.max_i_ka``, ``trafo.sn_mva``) must be a number above 0, since every
loading figure divides by it. Element indices must be integers (pandapower numbers elements, and
the grid's bus names and results rely on it), and every bus an element names must exist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pandapower.auxiliary import pandapowerNet

__all__ = ["MAX_PROBLEMS", "NET_COLUMN_RULES", "net_table_problems"]

Rule = tuple[str, Callable[[np.ndarray], np.ndarray]]
"""What a column must be, in words, and the test of its values (True where a value is fine)."""

_FINITE: Rule = ("a finite number", np.isfinite)
_POSITIVE: Rule = ("a finite number above 0", lambda v: np.isfinite(v) & (v > 0))
_NONZERO: Rule = ("a finite number other than 0", lambda v: np.isfinite(v) & (v != 0))

NET_COLUMN_RULES: dict[str, dict[str, Rule]] = {
    "bus": {"vn_kv": _POSITIVE},
    "line": {
        "length_km": _POSITIVE,
        "r_ohm_per_km": _FINITE,
        "x_ohm_per_km": _FINITE,
        "c_nf_per_km": _FINITE,
        "max_i_ka": _POSITIVE,
        "df": _POSITIVE,
        "parallel": _POSITIVE,
    },
    "trafo": {
        "sn_mva": _POSITIVE,
        "vn_hv_kv": _POSITIVE,
        "vn_lv_kv": _POSITIVE,
        "vk_percent": _NONZERO,
        "vkr_percent": _FINITE,
        "pfe_kw": _FINITE,
        "i0_percent": _FINITE,
        "shift_degree": _FINITE,
        "df": _POSITIVE,
        "parallel": _POSITIVE,
    },
    "trafo3w": {
        **{f"sn_{w}_mva": _POSITIVE for w in ("hv", "mv", "lv")},
        **{f"vn_{w}_kv": _POSITIVE for w in ("hv", "mv", "lv")},
        **{f"vk_{w}_percent": _NONZERO for w in ("hv", "mv", "lv")},
        **{f"vkr_{w}_percent": _FINITE for w in ("hv", "mv", "lv")},
    },
    "impedance": {"rft_pu": _FINITE, "xft_pu": _FINITE, "rtf_pu": _FINITE, "xtf_pu": _FINITE, "sn_mva": _POSITIVE},
    "ext_grid": {"vm_pu": _POSITIVE, "va_degree": _FINITE},
    "gen": {"p_mw": _FINITE, "vm_pu": _POSITIVE},
    "load": {"p_mw": _FINITE, "q_mvar": _FINITE, "scaling": _FINITE},
    "sgen": {"p_mw": _FINITE, "q_mvar": _FINITE, "scaling": _FINITE},
    "shunt": {"p_mw": _FINITE, "q_mvar": _FINITE, "vn_kv": _POSITIVE},
    "ward": {"ps_mw": _FINITE, "qs_mvar": _FINITE, "pz_mw": _FINITE, "qz_mvar": _FINITE},
    "xward": {"ps_mw": _FINITE, "qs_mvar": _FINITE, "pz_mw": _FINITE, "qz_mvar": _FINITE, "vm_pu": _POSITIVE},
    "asymmetric_load": {f"{q}_{ph}_{u}": _FINITE for q, u in (("p", "mw"), ("q", "mvar")) for ph in "abc"},
    "asymmetric_sgen": {f"{q}_{ph}_{u}": _FINITE for q, u in (("p", "mw"), ("q", "mvar")) for ph in "abc"},
}
"""Table -> column -> what its values must be (module docstring). A column the table lacks is
pandapower's to fill or refuse, and is skipped here."""

_BUS_COLUMNS = ("bus", "from_bus", "to_bus", "hv_bus", "mv_bus", "lv_bus")
"""Columns that name a bus by its index in ``net.bus``."""

_ZERO_IMPEDANCE = {
    "line": ("r_ohm_per_km", "x_ohm_per_km", "a line without impedance (join the buses by a bus-bus switch)"),
    "impedance": ("rft_pu", "xft_pu", "an impedance element without impedance"),
}
"""Tables whose rows need a series impedance: its resistance and reactance columns, and the words
for a row with neither."""

MAX_PROBLEMS = 10
"""Problems listed in one message (the count says how many more there are)."""


def _values(column: object) -> np.ndarray:
    """A table column as floats, NaN where a value is no number (text, None)."""
    import pandas as pd

    return np.asarray(pd.to_numeric(column, errors="coerce"), dtype=float)


def net_table_problems(net: pandapowerNet) -> list[str]:
    """Every value of ``net``'s element tables a power flow cannot use, as ``"<table> <row>: <column>
    is <value>, need <rule>"`` sentences (module docstring); empty when there is none."""
    import pandas as pd

    frames = {t: net[t] for t in NET_COLUMN_RULES if t in net and isinstance(net[t], pd.DataFrame) and len(net[t])}
    # rows are found by their index (and buses by theirs): with a table numbered otherwise, that is the problem
    problems = [
        f"{table}: index {next(i for i in frame.index if not isinstance(i, (int, np.integer)))!r} is not an "
        "integer (pandapower numbers the rows of a table)"
        for table, frame in frames.items()
        if not pd.api.types.is_integer_dtype(frame.index)
    ]
    if problems:
        return problems
    buses = set(net.bus.index.tolist())
    for table, frame in frames.items():
        rules = NET_COLUMN_RULES[table]
        index = frame.index.tolist()
        for column, (need, ok) in rules.items():
            if column not in frame:
                continue
            raw = frame[column].tolist()
            for row in np.flatnonzero(~ok(_values(frame[column]))).tolist():
                problems.append(f"{table} {index[row]}: {column} is {raw[row]!r}, need {need}")
        if table in _ZERO_IMPEDANCE:
            r_col, x_col, words = _ZERO_IMPEDANCE[table]
            if r_col in frame and x_col in frame:
                zero = (_values(frame[r_col]) == 0) & (_values(frame[x_col]) == 0)
                problems += [
                    f"{table} {index[row]}: {r_col} and {x_col} are 0, {words}" for row in np.flatnonzero(zero)
                ]
        for column in _BUS_COLUMNS:
            if column in frame:
                problems += [
                    f"{table} {i}: {column} {b!r} is not a bus of net.bus"
                    for i, b in zip(index, frame[column].tolist())
                    if b not in buses
                ]
    return problems

"""The faults and source sags openg2g is validated on against OpenDSS: the slow
``test_fault_validation.py`` asserts them, ``bench/fault_validation.py`` prints their table for
``docs/disturbances.md``."""

from __future__ import annotations

from openg2g.core.commands import ApplyFault, SetSourceVoltage

FAULT_BUSES: dict[str, tuple[str, str, str]] = {
    "ieee13": ("632", "671", "675"),
    "ieee123": ("149", "67", "83"),
    "ieee8500": ("e192860", "l3027116", "m1069310"),
}
"""Three-phase primary buses per bundled feeder: near the source (the first past the substation
regulator), mid-feeder, and one of the farthest (in branches from the source)."""

FAULT_R_OHM = (0.0001, 1.0)
"""Fault resistances (ohm): OpenDSS's default bolted fault, and one that leaves the faulted phases
partly up (loads near it between their ``vlowpu`` and ``vminpu``)."""

FAULT_KINDS = ("SLG", "LL", "LLG", "3ph")
"""Line to ground (a), line to line (b-c), double line to ground (b, c), three-phase to ground."""

SITE: dict[str, tuple[str, float]] = {"ieee13": ("671", 1.0), "ieee123": ("67", 1.0), "ieee8500": ("e192860", 2.0)}
"""Bus and MW of a datacenter drawn as an OpenDSS model-1 load (``load_model: opendss``), faulted
at its own bus."""

SAGS: dict[str, SetSourceVoltage] = {
    "0.9 pu": SetSourceVoltage(v_pu=(0.9,)),
    "0.5/1/1 pu": SetSourceVoltage(v_pu=(0.5, 1.0, 1.0)),
    "0.7/0.8/0.9 pu": SetSourceVoltage(v_pu=(0.7, 0.8, 0.9)),
}
"""Source sags: every phase alike (OpenDSS: the Vsource's ``pu``) and per phase (its Norton equivalent)."""


def fault(kind: str, bus: str, r_ohm: float) -> ApplyFault:
    """The fault of ``kind`` (:data:`FAULT_KINDS`) at three-phase ``bus``."""
    if kind == "SLG":
        return ApplyFault(name="f", bus1=f"{bus}.1", r_ohm=r_ohm)
    if kind == "LL":
        return ApplyFault(name="f", bus1=f"{bus}.2", bus2=f"{bus}.3", r_ohm=r_ohm)
    if kind == "LLG":
        return ApplyFault(name="f", bus1=f"{bus}.2.3", phases=2, r_ohm=r_ohm)
    if kind == "3ph":
        return ApplyFault(name="f", bus1=bus, phases=3, r_ohm=r_ohm)
    raise ValueError(f"fault kind {kind!r}: one of {FAULT_KINDS}")

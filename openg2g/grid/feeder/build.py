"""Build the bundled feeder artifacts from the OpenDSS sources (``openg2g feeders build``).

Each feeder's master file is read with :func:`openg2g.grid.feeder.opendss.read_opendss` (OpenDSS's own
engine) and written as the
project's own JSON (``{"format_version": 1, "feeder": FeederModel.to_dict()}``) under
``openg2g/grid/feeder/data/``, together with ``PROVENANCE.md`` recording the source files and their
SHA-256 digests. The .dss text itself is not copied.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from openg2g.grid.feeder.library import DATA_DIR, FORMAT_VERSION
from openg2g.grid.feeder.opendss import read_opendss

__all__ = ["SOURCES", "build_feeders"]

SOURCES: dict[str, str] = {
    "ieee13": "ieee13-published/IEEE13Nodeckt.dss",
    "ieee34": "ieee34-published/ieee34Mod1.dss",
    "ieee123": "ieee123-published/IEEE123Master.dss",
    "openg2g-ieee13": "openg2g-ieee13/IEEE13Bus.dss",
    "openg2g-ieee34": "openg2g-ieee34/IEEE34Bus.dss",
    "openg2g-ieee123": "openg2g-ieee123/IEEE123Bus.dss",
}
"""Bundled feeder name -> master file, relative to the source folder (``shared/data/feeders``)."""

_NOTES = {
    "ieee13": "IEEE 13 node test feeder as published (OpenDSS IEEE13Nodeckt, corrected mtx606, bus coordinates).",
    "ieee34": "IEEE 34 node test feeder, OpenDSS 'Mod 1' model (34Bus folder of the OpenDSS distribution).",
    "ieee123": "IEEE 123 node test feeder (123Bus folder of the OpenDSS distribution).",
    "openg2g-ieee13": "OpenG2G study variant of IEEE 13: load at 671 removed, other loads reduced, capacitors off.",
    "openg2g-ieee34": "OpenG2G study variant of IEEE 34: line lengths halved.",
    "openg2g-ieee123": "OpenG2G study variant of IEEE 123 in one self-contained file.",
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_feeders(source_dir: Path, out_dir: Path = DATA_DIR) -> list[Path]:
    """Read every feeder in :data:`SOURCES` under ``source_dir`` and write its JSON artifact and
    ``PROVENANCE.md`` to ``out_dir``.

    :return: the files written.
    :raises FeederError: a source file is missing or unreadable.
    """
    source_dir = Path(source_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    prov = [
        "# Provenance of the bundled feeders",
        "",
        "Built by `openg2g feeders build --source <shared/data/feeders>` (`openg2g/grid/feeder/build.py`).",
        "",
        "Source: the IEEE distribution test feeders (IEEE PES Distribution System Analysis Subcommittee)",
        "as distributed with OpenDSS (EPRI, https://sourceforge.net/projects/electricdss, mirrored at",
        "github.com/tshort/OpenDSS, Distrib/IEEETestCases), and the OpenG2G study variants of them;",
        "license Apache-2.0 (IEEE test feeders as distributed with OpenDSS). See each source folder's",
        "README for the exact upstream commit and file blobs.",
        "",
        "What the script did: parsed each OpenDSS master file (and the files it redirects to) with the",
        "project's own reader (`openg2g/grid/feeder/dss.py`), resolved line codes, units and in-line math into",
        "whole-line phase impedance and susceptance matrices, grouped regulators into banks, computed",
        "bus base voltages, attached bus coordinates (SetBusXY, or the BusXY/BusCoords file beside the",
        "master), kept the thermal ratings the files give (line/linecode `normamps`/`emergamps`,",
        "transformer `normhkva`/`emerghkva`; `null` where a file sets none, and none of these sources",
        "does, so their lines carry OpenDSS's default 400 A normal / 600 A emergency and their",
        "transformers their nameplate kVA, see docs/backends.md), and wrote the result as JSON",
        '(`{"format_version": 1, "feeder": ...}`). No .dss text is copied.',
        "",
        "| feeder | master file | files read (SHA-256) | note |",
        "| --- | --- | --- | --- |",
    ]
    for name, rel in SOURCES.items():
        master = source_dir / rel
        model = read_opendss(master, name=name)
        out = out_dir / f"{name}.json"
        out.write_text(json.dumps({"format_version": FORMAT_VERSION, "feeder": model.to_dict()}, indent=1) + "\n")
        written.append(out)
        files = sorted(
            p for p in master.parent.iterdir() if p.is_file() and p.suffix.lower() in (".dss", ".csv", ".dat")
        )
        digests = "<br>".join(f"`{p.name}` {_sha256(p)[:16]}" for p in files)
        prov.append(f"| `{name}` | `{rel}` | {digests} | {_NOTES[name]} |")
    path = out_dir / "PROVENANCE.md"
    path.write_text("\n".join(prov) + "\n")
    written.append(path)
    return written

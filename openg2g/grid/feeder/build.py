"""Build the bundled feeder artifacts from the OpenDSS sources (``openg2g feeders build``).

Each feeder's master file is read with :func:`openg2g.grid.feeder.opendss.read_opendss` (OpenDSS's
own engine) and written as the project's own JSON (``{"format_version": 2, "feeder":
FeederModel.to_dict()}``) under ``openg2g/grid/feeder/data/``, gzipped when it is larger than
:data:`GZIP_ABOVE_BYTES` (IEEE 8500), together with ``PROVENANCE.md`` recording the source files and
their SHA-256 digests. The .dss text itself is not copied.
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

from openg2g.core.atomic import replace_atomically, write_text_atomic
from openg2g.core.jsontext import json_text
from openg2g.grid.feeder.library import DATA_DIR, FORMAT_VERSION
from openg2g.grid.feeder.opendss import read_opendss

__all__ = ["GZIP_ABOVE_BYTES", "SOURCES", "build_feeders"]

SOURCES: dict[str, str] = {
    "ieee13": "feeders/ieee13-published/IEEE13Nodeckt.dss",
    "ieee34": "feeders/ieee34-published/ieee34Mod1.dss",
    "ieee37": "opendss-test-cases/IEEETestCases/37Bus/ieee37.dss",
    "ieee123": "feeders/ieee123-published/IEEE123Master.dss",
    "ieee8500": "opendss-test-cases/IEEETestCases/8500-Node/Master.dss",
    "openg2g-ieee13": "feeders/openg2g-ieee13/IEEE13Bus.dss",
    "openg2g-ieee34": "feeders/openg2g-ieee34/IEEE34Bus.dss",
    "openg2g-ieee123": "feeders/openg2g-ieee123/IEEE123Bus.dss",
}
"""Bundled feeder name -> master file, relative to the source data folder (``shared/data``)."""

GZIP_ABOVE_BYTES = 1_000_000
"""A feeder whose JSON is larger than this is stored gzipped (``<name>.json.gz``)."""

_NOTES = {
    "ieee13": "IEEE 13 node test feeder as published (OpenDSS IEEE13Nodeckt, corrected mtx606, bus coordinates).",
    "ieee34": "IEEE 34 node test feeder, OpenDSS 'Mod 1' model (34Bus folder of the OpenDSS distribution).",
    "ieee37": "IEEE 37 node test feeder: 4.8 kV delta, open-delta regulators (37Bus folder of the OpenDSS test collection).",
    "ieee123": "IEEE 123 node test feeder (123Bus folder of the OpenDSS distribution).",
    "ieee8500": (
        "IEEE 8500-node test feeder, balanced load case (Master.dss of the 8500-Node folder of the OpenDSS test "
        "collection): 12.47 kV primary, 1177 center-tapped service transformers and 120/240 V secondaries."
    ),
    "openg2g-ieee13": "OpenG2G study variant of IEEE 13: load at 671 removed, other loads reduced, capacitors off.",
    "openg2g-ieee34": "OpenG2G study variant of IEEE 34: line lengths halved.",
    "openg2g-ieee123": "OpenG2G study variant of IEEE 123 in one self-contained file.",
}

_LICENSES = {
    "feeders": "Apache-2.0 (IEEE test feeders as distributed with OpenDSS; see the folder's README)",
    "opendss-test-cases": "BSD-style (EPRI and DSS-Extensions contributors; opendss-test-cases/License.txt)",
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_feeders(source_dir: Path, out_dir: Path = DATA_DIR) -> list[Path]:
    """Read every feeder in :data:`SOURCES` under ``source_dir`` and write its JSON artifact and
    ``PROVENANCE.md`` to ``out_dir``.

    :param source_dir: the source data folder (``shared/data``).
    :return: the files written.
    :raises FeederError: a source file is missing or unreadable.
    """
    source_dir = Path(source_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    prov = [
        "# Provenance of the bundled feeders",
        "",
        "Built by `openg2g feeders build --source <shared/data>` (`openg2g/grid/feeder/build.py`).",
        "",
        "Sources: the IEEE distribution test feeders (IEEE PES Distribution System Analysis Subcommittee)",
        "as distributed with OpenDSS, the OpenG2G study variants of them (`feeders/`), and the OpenDSS",
        "test collection as kept by DSS-Extensions (`opendss-test-cases/`, electricdss-tst commit",
        "3b208397160213cae4a9e2d0a7d1aa3528ce26e1). Each source folder's README names the upstream files.",
        "",
        "What the script did: compiled each master file (and what it redirects to) with OpenDSS's own",
        "engine (DSS-Python), solved one snapshot with the controls held, and took from the compiled",
        "circuit each bus's nodes, voltage base (OpenDSS's `kVBase`) and coordinates, each line's whole",
        "phase impedance and susceptance matrices and ratings, each two-winding transformer's windings,",
        "taps and regulator control, capacitors and their controls, loads (models 1, 2, 4, 5) and every",
        "other element (center-tapped transformers, reactors) by its primitive admittance; every",
        "element's admittance was checked against the engine's to 1e-9 (`openg2g/grid/feeder/opendss.py`).",
        "Ratings are `null` where the file sets none (OpenDSS's default 400 A normal / 600 A emergency,",
        "transformers at their nameplate kVA; see docs/backends.md); a line's `length_km` is `null` where",
        "the file gives its length without a unit (`units=none`: the impedances hold it), and the file's",
        "number is then its `length_unitless` (OpenDSS's `Bus.Distance` counts it as km). Written as JSON",
        '(`{"format_version": 2, "feeder": ...}`), gzipped above 1 MB. No .dss text is copied.',
        "",
        "| feeder | master file | license | files of its folder (SHA-256) | note |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, rel in SOURCES.items():
        master = source_dir / rel
        model = read_opendss(master, name=name)
        text = (
            json_text({"format_version": FORMAT_VERSION, "feeder": model.to_dict()}, f"feeder {name}", indent=1) + "\n"
        )
        for stale in (out_dir / f"{name}.json", out_dir / f"{name}.json.gz"):
            stale.unlink(missing_ok=True)
        if len(text) > GZIP_ABOVE_BYTES:
            out = out_dir / f"{name}.json.gz"
            # mtime 0: the archive is the same bytes whatever day it is built
            with replace_atomically(out) as tmp:
                tmp.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
        else:
            out = out_dir / f"{name}.json"
            write_text_atomic(out, text)
        written.append(out)
        files = sorted(
            p for p in master.parent.iterdir() if p.is_file() and p.suffix.lower() in (".dss", ".csv", ".dat")
        )
        digests = "<br>".join(f"`{p.name}` {_sha256(p)[:16]}" for p in files)
        license_ = _LICENSES[rel.split("/", 1)[0]]
        prov.append(f"| `{name}` | `{rel}` | {license_} | {digests} | {_NOTES[name]} |")
    path = out_dir / "PROVENANCE.md"
    write_text_atomic(path, "\n".join(prov) + "\n")
    written.append(path)
    return written

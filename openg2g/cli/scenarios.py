"""``openg2g scenarios list [--json]``: the bundled scenario, sweep, study and benchmark suite files.

One row per file under ``scenarios/`` (the names every command takes in place of a path), in name
order: its kind, the feeder it runs on, its sites (``name@bus``), its run length and the first
sentence of its description. A sweep or study shows its base scenario's feeder and sites, with the
overrides of its ``set`` (and a study's own ``duration_s``) applied; a benchmark suite the feeders
of its cases. Only the YAML is read: no controller, feeder or trace library is loaded, so the
list runs no code a file names.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openg2g.core.jsontext import json_text

__all__ = ["first_sentence", "register", "scenario_rows"]

KIND_LABELS = {"scenario": "scenario", "sweep": "sweep", "study": "study", "suite": "benchmark suite"}
"""Kind (:func:`openg2g.cli.validate.data_kind`) -> the word the list shows."""

_SENTENCE = re.compile(r"(.+?[.!?])(?=\s|$)", re.DOTALL)


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (up to the first ``.``, ``!`` or ``?`` followed by a space or
    the end, so ``0.95 pu`` does not end one), on one line; the whole text when none ends."""
    flat = " ".join(text.split())
    found = _SENTENCE.match(flat)
    return found.group(1) if found else flat


def _feeder(data: Mapping[str, Any]) -> str | None:
    """The feeder a scenario's data names: ``grid.feeder``, or ``pandapower:NET``."""
    grid = data.get("grid")
    if not isinstance(grid, Mapping):
        return None
    if grid.get("feeder") is not None:
        return str(grid["feeder"])
    return f"pandapower:{grid['pandapower']}" if grid.get("pandapower") is not None else None


def _sites(data: Mapping[str, Any]) -> list[str]:
    """``name@bus`` of each site of a scenario's data (``kind`` added where it is not replay)."""
    sites = data.get("datacenters")
    if not isinstance(sites, list):
        return []
    out = []
    for site in sites:
        if isinstance(site, Mapping):
            kind = site.get("kind", "replay")
            out.append(f"{site.get('name')}@{site.get('bus')}" + ("" if kind == "replay" else f" ({kind})"))
    return out


def _duration_s(data: Mapping[str, Any]) -> float | None:
    value = data.get("duration_s")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _based(path: Path, data: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep's or study's base scenario data with the file's ``set`` applied."""
    from openg2g.scenario.loader import apply_override, read_yaml_mapping
    from openg2g.sweep.spec import resolve_base

    base = read_yaml_mapping(resolve_base(str(data["base"]), path.parent, path), "base scenario")
    given = data.get("set") or []
    for assignment in given if isinstance(given, list) else [given]:
        apply_override(base, str(assignment), f"{path}: set")
    return base


def _row(path: Path) -> dict[str, Any]:
    from openg2g.cli.validate import data_kind
    from openg2g.scenario.loader import read_yaml_mapping, resolve_scenario_path

    data = read_yaml_mapping(path)
    kind = data_kind(data)
    described = data.get("description")
    row: dict[str, Any] = {
        "name": path.stem,
        "kind": KIND_LABELS[kind],
        "feeder": None,
        "sites": [],
        "duration_s": None,
        "description": first_sentence(described) if isinstance(described, str) else "",
    }
    if kind == "suite":  # the feeders of its cases' scenarios, in order of first appearance
        scenarios = [c.get("scenario") for c in data.get("cases", []) if isinstance(c, Mapping)]
        feeders = [_feeder(read_yaml_mapping(resolve_scenario_path(str(s)))) for s in scenarios if s is not None]
        row["feeder"] = ", ".join(dict.fromkeys(f for f in feeders if f is not None)) or None
        return row
    scenario = _based(path, data) if kind in ("sweep", "study") else data
    row.update(feeder=_feeder(scenario), sites=_sites(scenario))
    row["duration_s"] = (
        _duration_s(data) if kind == "study" and _duration_s(data) is not None else _duration_s(scenario)
    )
    return row


def scenario_rows(folder: Path | None = None) -> list[dict[str, Any]]:
    """One row per YAML file of ``folder`` (default: the bundled ``scenarios/``), in name order:
    ``name``, ``kind`` (:data:`KIND_LABELS`), ``feeder`` (``None`` where none is named), ``sites``
    (``name@bus``), ``duration_s`` (s; ``None`` for a suite) and ``description`` (its first
    sentence).

    :raises ScenarioError: a file that is not a YAML mapping, or a base scenario that is missing.
    """
    from openg2g.core.paths import bundled_dir

    return [_row(path) for path in sorted((folder or bundled_dir("scenarios")).glob("*.yaml"))]


def _list(args: argparse.Namespace) -> int:
    rows = scenario_rows()
    if args.json:
        print(json_text(rows, "scenarios list --json", indent=1))
        return 0
    cells = [
        [
            r["name"],
            r["kind"],
            r["feeder"] or "-",
            ", ".join(r["sites"]) or "-",
            "-" if r["duration_s"] is None else f"{r['duration_s']:g}",
            r["description"],
        ]
        for r in rows
    ]
    headers = ["name", "kind", "feeder", "sites", "duration (s)", "description"]
    widths = [max(len(c) for c in column) for column in zip(headers, *cells)]
    for line in [headers, *cells]:  # the description last and unpadded: it is the long one
        print("  ".join(c.ljust(w) for c, w in zip(line[:-1], widths)) + "  " + line[-1])
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``scenarios`` sub-command group (``list``)."""
    p = subparsers.add_parser("scenarios", description=__doc__)
    sub = p.add_subparsers(dest="scenarios_command", metavar="ACTION", required=True)
    lst = sub.add_parser("list", help="one row per bundled file: kind, feeder, sites, duration, description")
    lst.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    lst.set_defaults(func=_list)

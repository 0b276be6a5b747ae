"""``openg2g schema``: print the scenario file reference (Markdown) generated from the schema."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def _schema(args: argparse.Namespace) -> int:
    from openg2g.scenario.reference import scenario_reference

    print(scenario_reference(), end="")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``schema`` sub-command."""
    p = subparsers.add_parser("schema", description=__doc__)
    p.set_defaults(func=_schema)

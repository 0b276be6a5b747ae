"""A sweep run function that kills its worker process on request, to test crash attribution.

It lives with the tests (nothing in the library kills a process). Sweep workers import it by
module name, ``tests.studies.crashing``: local workers and Ray workers get the driver's
``sys.path``, where pytest's ``pythonpath = ["."]`` put the repository root.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openg2g.testing import toy_data, toy_run

CRASH_EXIT_CODE = 3


def crashing_toy_run(scenario: str, overrides: tuple[str, ...], out_dir: Path) -> Mapping[str, Any]:
    """:func:`~openg2g.testing.toy_run`, except that ``toy.crash: once`` kills the worker process the
    first time (a marker file beside the run folder remembers) and ``toy.crash: always`` every time."""
    crash = toy_data(scenario, overrides).get("toy", {}).get("crash")
    if crash:
        marker = Path(out_dir).parent / f".{Path(out_dir).name}.crashed"
        if crash == "always" or not marker.exists():
            marker.touch()
            os._exit(CRASH_EXIT_CODE)
    return toy_run(scenario, overrides, out_dir)

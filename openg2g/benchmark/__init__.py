"""Controller benchmark: a suite of cases (reference scenarios and seeded variations) run once per
controller and once without control, scored into a leaderboard (``openg2g benchmark SUITE.yaml``).

The names below are loaded on first use (PEP 562), so that validating a suite file does not
import pandas and matplotlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openg2g.core.lazy import lazy_exports

if TYPE_CHECKING:
    from openg2g.benchmark.plot import plot_leaderboard
    from openg2g.benchmark.run import BenchmarkResult, case_table, leaderboard, plan_benchmark, run_benchmark
    from openg2g.benchmark.spec import (
        BASELINE,
        SCORES,
        Case,
        CaseGroup,
        ControllerChoice,
        LoadedSuite,
        SuiteSpec,
        check_suite,
        controllers_override,
        load_suite,
    )

_MODULES = {
    "plot": ("plot_leaderboard",),
    "run": ("BenchmarkResult", "case_table", "leaderboard", "plan_benchmark", "run_benchmark"),
    "spec": (
        "BASELINE",
        "SCORES",
        "Case",
        "CaseGroup",
        "ControllerChoice",
        "LoadedSuite",
        "SuiteSpec",
        "check_suite",
        "controllers_override",
        "load_suite",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, _MODULES)

__all__ = [
    "BASELINE",
    "SCORES",
    "BenchmarkResult",
    "Case",
    "CaseGroup",
    "ControllerChoice",
    "LoadedSuite",
    "SuiteSpec",
    "case_table",
    "check_suite",
    "controllers_override",
    "leaderboard",
    "load_suite",
    "plan_benchmark",
    "plot_leaderboard",
    "run_benchmark",
]

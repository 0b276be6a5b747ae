"""``openg2g plot RUN_DIR``: draw a finished run's plots again from its tables.

Writes every figure the run has the data for (the same PNGs ``openg2g run`` writes at the end of
a run) into the run folder and says which it skipped and why. The voltage limits, the feeder and
the datacenter buses come from the folder's ``scenario.yaml``; ``--v-min``/``--v-max`` override
the limits. ``summary.json`` is left as it is.

Reading a run folder runs nothing it names: a pickle net (grid.pandapower ending in .p, .pkl or
.pickle) is read only with --trust-pickle, whatever the folder's own grid.trust_pickle says (a
run folder may come from anyone); without it the feeder map and voltage profile are skipped,
naming the file.

A failure that stops the drawing (memory running out on a large feeder's tables, a table no
figure can be drawn from) is one line naming the folder, and exit status 1.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from openg2g.cli.table import print_plot_report
from openg2g.core.errors import G2GError

__all__ = ["register"]


def _plot(args: argparse.Namespace) -> int:
    from openg2g.plot.run import PlotsInterrupted, plot_run  # matplotlib only when plotting

    out_dir = Path(args.run_dir)
    if not (out_dir / "summary.json").is_file():
        raise G2GError(f"{out_dir}: no summary.json (is this a run output directory?)")
    try:
        report = plot_run(out_dir, args.v_min, args.v_max, trust_pickle=args.trust_pickle)
    except PlotsInterrupted as exc:
        print_plot_report(exc.report.as_summary())
        return 130
    except MemoryError as exc:
        raise G2GError(
            f"{out_dir}: out of memory drawing the plots from the run's tables; a run with "
            "--set outputs.voltages=envelope keeps only the per-step voltage envelope, which draws in little "
            "memory (without the feeder map and voltage profile)"
        ) from exc
    except G2GError:
        raise
    except Exception as exc:  # a table no figure can be drawn from: one line, not a traceback
        raise G2GError(
            f"{out_dir}: drawing the plots failed: {type(exc).__name__}: {exc} "
            "(openg2g --traceback plot ... prints where)"
        ) from exc
    print_plot_report(report.as_summary())
    return 1 if report.failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``plot`` sub-command."""
    p = subparsers.add_parser(
        "plot",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", help="run output directory (openg2g run --out)")
    p.add_argument("--v-min", type=float, default=None, help="lower voltage limit (pu); default scenario.yaml's")
    p.add_argument("--v-max", type=float, default=None, help="upper voltage limit (pu); default scenario.yaml's")
    p.add_argument(
        "--trust-pickle",
        action="store_true",
        help="read the pickle net scenario.yaml names (a pickle runs any code it carries; the folder's own "
        "grid.trust_pickle is not taken as yours)",
    )
    p.set_defaults(func=_plot)

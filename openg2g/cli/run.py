"""``openg2g run SCENARIO``: run a scenario file, write outputs, print the summary table.

Before the run starts, the scenario is validated as ``openg2g validate`` does (controllers and
events included) and the output folder is checked writable; each site's GPUs and estimated
peak power are printed first (as ``validate`` prints them), the summary table after the run. The folder keeps the scenario as
run (``scenario.yaml``: overrides applied, paths absolute) beside the tables and ``summary.json``,
and, when an error stops the run, its full traceback (``error.txt``, written whole or, on a disk
that cannot take it, not at all, which stderr then says). Ctrl-C or SIGTERM stops the run with its
tables complete and the summary saying ``interrupted``; the Ctrl-C after the first (a burst) are
ignored until the command has exited, and one at start-up ends it with one line; status 130 either
way. A folder that holds an earlier run (finished or not) is refused unless ``--overwrite`` is
given, and a folder another command is writing is refused at once (it is locked while a command
writes it).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from openg2g.cli.outdir import add_overwrite_option, stop_cleanly_on_signals
from openg2g.cli.table import format_table, print_plot_report
from openg2g.core.atomic import write_text_atomic

if TYPE_CHECKING:
    from openg2g.scenario.loaded import LoadedScenario

__all__ = ["ERROR_FILE", "SCENARIO_IS_CODE", "register", "run_loaded", "site_lines"]

ERROR_FILE = "error.txt"
"""File of a run's folder holding the traceback of the error that stopped the run (written
whether or not ``--traceback`` was given)."""

SCENARIO_IS_CODE = """\
Files that can run code: a controller file (kind: path/to/file.py:Class) is imported, so run, by
`openg2g validate` as by `run`; a pandapower pickle net (grid.pandapower ending .p/.pkl/.pickle) is
read only with grid.trust_pickle: true (powerflow --trust-pickle), and a policy zip holding pickled
objects openg2g does not know (not written by openg2g train) only with trust_pickle: true in the
rl_policy params (evaluate --trust-pickle), as a pickle runs any code it carries; `train --resume`
reads the pickled checkpoints in its --out folder. JSON nets are checked before they are read and
bundled policies load without unpickling. A feeder .dss file is an OpenDSS script run in a box: it
may read files, and a command that would write one, move OpenDSS's folders or load a user-written
model is refused by name before OpenDSS runs. Give those words, and validate or run scenarios and
controller files, only for files you trust (see docs/scenario-reference.md)."""
"""Which files can run code: the epilog of ``run``, ``validate``, ``powerflow`` and ``evaluate`` help."""


def _write_error_file(path: Path, exc: BaseException) -> None:
    """Write ``exc``'s traceback to ``path`` whole (through a temporary file: never an empty or
    half one) and say where it is; where it cannot be written (a full disk, the likely cause of the
    error itself), say so instead. Either way the error follows on stderr."""
    try:
        write_text_atomic(path, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    except OSError as write_error:
        print(
            f"note: the traceback could not be kept in {path} ({write_error.strerror or write_error})", file=sys.stderr
        )
    else:
        print(f"traceback: {path}", file=sys.stderr)


def _power_text(power_w: float) -> str:
    """A facility power for a sentence: MW to one decimal from 1 MW, else whole kW."""
    return f"{power_w / 1e6:,.1f} MW" if power_w >= 1e6 else f"{power_w / 1e3:,.0f} kW"


def site_lines(loaded: LoadedScenario) -> list[str]:
    """One line per datacenter site of a checked scenario, as ``validate`` and ``run`` print them:
    its bus, its GPUs (serving and training) and its peak facility power, estimated from the traces'
    per-batch peaks (:meth:`~openg2g.datacenter.replay.ReplayDatacenter.peak_estimate`); a live
    site's figures are those of its simulated replicas, a plug-in site says what it is."""
    from openg2g.datacenter.live.site import LiveSite
    from openg2g.datacenter.replay import ReplayDatacenter
    from openg2g.datacenter.ridethrough_site import RideThroughSite
    from openg2g.scenario.build import build_sites

    lines = []
    for spec, site in zip(loaded.scenario.datacenters, build_sites(loaded)):
        where = f"site {spec.name} at bus {spec.bus}"
        if isinstance(site, RideThroughSite):  # its UPS chargers draw only after a ride-through
            site = site.inner
        if isinstance(site, LiveSite):
            where += " (live: its simulated replicas)"
            site = site.stand_in()
        if not isinstance(site, ReplayDatacenter):
            kind = getattr(spec, "kind", type(site).__name__)
            lines.append(f"{where}: a plug-in backend ({kind}), no estimate of its power")
            continue
        peak = site.peak_estimate()
        gpus = f"{peak.serving_gpus + peak.training_gpus:,} GPUs"
        if peak.training_gpus:
            gpus += f" ({peak.serving_gpus:,} serving, {peak.training_gpus:,} training)"
        lines.append(
            f"{where}: {gpus}, peak about {_power_text(peak.peak_w)} (an estimate from the traces' per-batch "
            "peaks: every replica at its trace's highest sample over its batch sizes)"
        )
    return lines


def _run(args: argparse.Namespace) -> int:
    # imported here, not at the top: `openg2g --help` and the other commands need none of this
    from openg2g.scenario.loader import load_scenario
    from openg2g.scenario.preflight import check_start

    stop_cleanly_on_signals(once=True)
    loaded = load_scenario(args.scenario, args.set)
    check_start(loaded)  # a bad controller parameter or event fails now, not hours into the run
    for line in site_lines(loaded):  # what the feeder is about to carry, before the run takes its time
        print(line, flush=True)
    return run_loaded(loaded, args.out, args.overwrite, progress=not args.no_progress)


def run_loaded(loaded: LoadedScenario, out: str | None, overwrite: bool, progress: bool) -> int:
    """Run a checked scenario into ``out`` (default ``runs/<name>``) and print its summary table,
    plots and warnings, as ``openg2g run`` does; the exit status."""
    from openg2g.cli.outdir import default_out_dir, prepare_out_dir
    from openg2g.core.limits import CAP_CALIBRATED_MIN_W, CAP_MAX_W
    from openg2g.scenario.run import run_scenario

    out_dir = prepare_out_dir(
        out if out is not None else default_out_dir(loaded.scenario.name),
        command="run",
        name=loaded.scenario.name,
        overwrite=overwrite,
    )
    error_file = out_dir / ERROR_FILE
    error_file.unlink(missing_ok=True)  # left by an earlier run into this folder; this run's outcome is its own
    try:
        result = run_scenario(loaded, out_dir, progress=progress)
    except KeyboardInterrupt as exc:
        report = getattr(exc, "report", None)  # a PlotsInterrupted: the run itself had finished
        if report is None:
            print(f"interrupted; partial outputs kept in {out_dir}", file=sys.stderr)
        else:
            print(
                f"interrupted while drawing the plots; the run is complete in {out_dir} "
                f"(written: {', '.join(report.written) or 'none'}; not drawn: {', '.join(report.missing())}; "
                f"`openg2g plot {out_dir}` draws them)",
                file=sys.stderr,
            )
        return 130
    except Exception as exc:
        _write_error_file(error_file, exc)
        raise
    print(format_table([(loaded.scenario.name, result.summary)]))
    summary = result.summary
    print_plot_report(summary.get("plots"))
    for figure, why in summary.get("unavailable_figures", {}).items():
        print(f"warning: {figure} is not available (null in summary.json): {why}", file=sys.stderr)
    if summary["nonconverged_steps"]:
        print(
            f"warning: {summary['nonconverged_steps']} of {summary['grid_steps']} grid steps did not converge; "
            "the voltage figures cover the converged steps only",
            file=sys.stderr,
        )
    for site, seconds in summary["site_unsupplied_s"].items():
        if seconds:
            print(
                f"warning: site {site} had no supply for {seconds:g} s (its bus cut off from the source): it drew "
                "and served nothing then (events table: supply_lost, supply_restored)",
                file=sys.stderr,
            )
    if summary["power_caps_below_calibration"]:
        print(
            f"warning: {summary['power_caps_below_calibration']} power-cap commands went below "
            f"{CAP_CALIBRATED_MIN_W:g} W per GPU (lowest {summary['lowest_power_cap_w_per_gpu']:g} W), outside the "
            f"{CAP_CALIBRATED_MIN_W:g}-{CAP_MAX_W:g} W the power-cap model is calibrated on: the throughput and "
            "latency under them are extrapolated",
            file=sys.stderr,
        )
    lag = summary.get("realtime")
    if lag:
        print(
            f"real time: {lag['instants']} control instants, behind the wall clock by {lag['lag_mean_s']:.3f} s on "
            f"average, {lag['lag_max_s']:.3f} s at most"
        )
    print(f"\noutputs: {out_dir}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run`` sub-command."""
    p = subparsers.add_parser(
        "run",
        description=__doc__,
        epilog=SCENARIO_IS_CODE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scenario", help="scenario YAML file, or the name of a bundled scenario (e.g. ieee13_ofo)")
    p.add_argument(
        "--out", help="output directory (default runs/<scenario name>, the name reduced to a plain folder name)"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario field, e.g. --set duration_s=600 --set datacenters.0.bus=675 (repeatable)",
    )
    add_overwrite_option(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_run)

"""``openg2g study hosting-capacity|siting|pv-placement|load-loss``: studies built from runs of a base scenario.

``hosting-capacity FEEDER`` finds, per bus and controller, the range of datacenter sizes (the
base scenario's model mix, scaled) hosted without under- or over-voltage (each within
``--tolerance-pu-s``) and without a line or transformer above its rating (``--no-thermal`` drops
that check). Under-voltage and overload grow with the site and set the capacity (the table names
the limit the first larger size broke and where); over-voltage shrinks as it grows and sets the
smallest hosted size. The feeder is first run without the site: a warning says when it already
breaks a limit. With a controller, violations in the first ``--settle-s`` seconds (default 10;
0 without a controller) are not counted. FEEDER is a scenario prefix (``ieee13`` uses the bundled
``ieee13_none``), a base scenario file, or a hosting-capacity study file (``study: hosting_capacity``).

``siting STUDY.yaml`` places a datacenter on candidate buses (and pairs of buses) and ranks the
placements by violation integral and throughput.

``pv-placement STUDY.yaml`` chooses where to build PV plants and how big: a MILP over voltages
linearized at operating points of the base scenario, then a run with the plan as a check.

``load-loss STUDY.yaml`` runs the base scenario's disturbances under each ride-through setting:
the MW that trip or transfer, per disturbance and per site, the UPS energy, the time to full return,
the frequency's extremes and the voltages after the disturbances against the study's limits; with
``holdable``, the largest load the system loses at once within every limit, per setting.

hosting-capacity and siting build the base scenario with each controller choice before any run, and
load-loss with each setting (as ``openg2g validate`` does): a choice that cannot be built is an
error, not a column of failed runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from openg2g.cli.outdir import add_overwrite_option
from openg2g.cli.sweep import add_engine_options, interrupted
from openg2g.core.errors import G2GError, ScenarioError

# The studies (pandas, scipy's MILP, matplotlib) are imported by the handlers that run them, so
# that `openg2g run` and `openg2g --help`, which build this parser too, do not pay for them.
if TYPE_CHECKING:
    import pandas as pd

    from openg2g.studies.common import BaseScenario, Topology
    from openg2g.sweep.engines import Engine

__all__ = ["LOAD_LOSS_HELP", "register"]

LOAD_LOSS_HELP = """\
For a disturbance, how many MW trip or transfer under each ride-through setting, and the largest
simultaneous loss the system holds within its frequency and voltage limits (module
openg2g.studies.load_loss). The study file:

  study: load_loss
  name: NAME                      the default output folder is runs/NAME
  base: SCENARIO                  a scenario with disturbances and datacenter sites (a path relative
                                  to this file, or a bundled name); grid.frequency for f limits
  set: [duration_s=152, ...]      overrides of the base scenario, in every run
  settings:                       the ride-through settings compared, by name (letters, digits, _ . -)
    own: {}                       every site keeps the base scenario's ride_through
    none: {ride_through: null}    no ride-through: the sites draw whatever the voltage
    legacy: {ride_through: {blocks: [...], return_to_service: {...}}}   one for every site
    mixed: {ride_through: {...}, sites: [campus1]}                      for the listed sites only
  limits:                         post-contingency limits; a limit left out is not judged
    f_min_hz: 59.5                lowest frequency over the run, its nadir (Hz)
    f_max_hz: 60.1                highest frequency over the run, its zenith (Hz)
    v_min_pu: 0.9                 lowest monitored voltage after the last disturbance (pu)
    v_max_pu: 1.1                 highest, after the last disturbance (pu)
    voltage_after_s: 0            voltages count from this long after the last disturbance's end
                                  (each run's outputs.metrics_start_s, s)
  holdable:                       optional: per setting, a multiplier on every site's load (replicas,
    multiplier_min: 0.25          training GPUs, base load) bisected to the largest within every
    multiplier_max: 4             limit; the figure is that run's MW lost
    tolerance: 0.05
  retries: 1                      re-attempts of a run whose worker process died

Output (OUT, default runs/NAME): load_loss.parquet (one row per setting), load_loss_sites.parquet
(per setting and site), evaluations.parquet (every run), load_loss.png, load_loss_frequency.png,
runs/<setting>-base/ and runs/<setting>-m<multiplier>/. A rerun into OUT reuses the complete runs.
"""


def _topology(base: BaseScenario, required: bool) -> Topology | None:
    from openg2g.studies.common import base_topology

    try:
        return base_topology(base)
    except (G2GError, OSError) as exc:
        if required:
            raise G2GError(f"cannot read the grid of {base.path} for its buses: {exc}") from None
        print(f"warning: no feeder map ({exc})", file=sys.stderr)
        return None


def _engine(args: argparse.Namespace, retries: int) -> Engine:
    from openg2g.sweep.engines import make_engine

    return make_engine(args.engine, args.workers, retries, args.address)


def _print(df: pd.DataFrame, cols: list[str]) -> None:
    import pandas as pd

    cols = [c for c in cols if c in df.columns]
    with pd.option_context("display.width", 220, "display.max_columns", 30, "display.max_colwidth", 60):
        print(df[cols].to_string(index=False, float_format=lambda x: f"{x:.4g}"))


def _parse_mix(items: list[str] | None) -> dict[str, int] | None:
    from openg2g.sweep.spec import SweepError

    if not items:
        return None
    mix: dict[str, int] = {}
    for item in items:
        model, sep, count = item.rpartition("=")
        if not sep or not model or not count.isdigit():
            raise SweepError([("--mix", f"{item!r}: expected MODEL=REPLICAS, e.g. Llama-3.1-8B=2")])
        mix[model] = int(count)
    return mix


def _hosting(args: argparse.Namespace) -> int:
    from openg2g.scenario.loader import resolve_scenario_path
    from openg2g.studies.common import check_controller_choices, read_base
    from openg2g.studies.hosting import HostingConfig, run_hosting_capacity
    from openg2g.studies.load import load_study
    from openg2g.studies.spec import HostingSpec
    from openg2g.sweep.spec import SweepError, read_yaml_mapping

    try:  # a study or scenario file, or a bundled one's name
        target: Path | None = resolve_scenario_path(args.feeder)
    except ScenarioError:
        target = None
    spec: HostingSpec | None = None
    if target is not None and target.is_file() and read_yaml_mapping(target, "study").get("study"):
        loaded = load_study(target, HostingSpec, args.set)
        assert isinstance(loaded.spec, HostingSpec)
        spec = loaded.spec
        base = loaded.base
        name = spec.name
    else:
        if args.base:
            base_path = resolve_scenario_path(args.base)
        elif target is not None and target.is_file():
            base_path = target
        else:
            try:
                base_path = resolve_scenario_path(f"{args.feeder}_none")
            except ScenarioError:
                raise SweepError(
                    [(args.feeder, f"no bundled scenario {args.feeder}_none; give a scenario file or --base SCENARIO")]
                ) from None
        base = read_base(base_path.resolve(), args.set)
        name = f"{base_path.stem}_hosting"
    given = {
        "buses": None if args.buses is None else list(args.buses),
        "controllers": None if args.controller is None else tuple(args.controller),
        "tolerance_pu_s": args.tolerance_pu_s,
        "thermal": args.thermal,
        "overload_tolerance_pct_s": args.overload_tolerance_pct_s,
        "duration_s": args.duration_s,
        "max_mw": args.max_mw,
        "mix": _parse_mix(args.mix),
        "settle_s": args.settle_s,
    }
    from_file = spec.config_fields() if spec is not None else {}
    config = HostingConfig(**{**from_file, **{k: v for k, v in given.items() if v is not None}})
    topology = _topology(base, required=config.buses is None)
    out = _out(args, name)
    check_controller_choices(
        base, config.controllers, "--controller" if args.controller is not None else f"{target}: controllers"
    )
    engine = _engine(args, spec.retries if spec is not None else 1)
    try:
        table = run_hosting_capacity(base, config, out, engine, topology=topology, progress=not args.no_progress)
    except KeyboardInterrupt:
        return interrupted(out)
    print(f"model mix per block: {table['model_mix'].iloc[0]}")
    thermal = f" and overload <= {config.overload_tolerance_pct_s:g} %.s" if config.thermal else ""
    settle = ", ".join(f"from {config.settle_for(c):g} s ({c})" for c in config.controllers)
    print(
        f"hosted = run completes with under- and over-voltage integrals each <= {config.tolerance_pu_s:g} pu.s"
        f"{thermal} over {config.duration_s:g} s, counted {settle}\n"
    )
    _print(
        table,
        [
            "bus",
            "controller",
            "min_peak_mw",
            "capacity_peak_mw",
            "capacity_mean_mw",
            "capacity_gpus",
            "first_failing_peak_mw",
            "binding_limit",
            "binding_element",
            "lower_limit",
            "empty_range",
            "capped",
            "n_runs",
            "error",
        ],
    )
    _warn_baseline(table)
    print(f"\ntables and plot: {out}")
    return 0


def _warn_baseline(table: pd.DataFrame) -> None:
    """A warning per controller whose feeder, without the site, already breaks a limit."""
    from openg2g.plot.hosting import baseline_warnings

    for text in baseline_warnings(table).values():
        print(f"warning: {text}", file=sys.stderr)


def _siting(args: argparse.Namespace) -> int:
    from openg2g.studies.common import check_controller_choices
    from openg2g.studies.load import load_study
    from openg2g.studies.siting import run_siting
    from openg2g.studies.spec import SitingSpec

    loaded = load_study(args.study, SitingSpec, args.set)
    spec: SitingSpec = loaded.spec  # type: ignore[assignment]
    topology = _topology(loaded.base, required=not isinstance(spec.candidates, list))
    out = _out(args, spec.name)
    check_controller_choices(loaded.base, spec.controllers, f"{loaded.path}: controllers")
    engine = _engine(args, spec.retries)
    try:
        table = run_siting(loaded.base, spec, out, engine, topology=topology, progress=not args.no_progress)
    except KeyboardInterrupt:
        return interrupted(out)
    _print(
        table,
        [
            "rank",
            "controller",
            "placement",
            "status",
            "violation_integral_pu_s",
            "v_min_pu",
            "v_max_pu",
            "mean_throughput_tok_s",
            "energy_mwh",
        ],
    )
    for _, row in table[table["status"] != "complete"].head(10).iterrows():
        print(f"{row['placement']} / {row['controller']}: {row['status']}: {row['error']}", file=sys.stderr)
    print(f"\ntable and plots: {out}")
    return 0 if (table["status"] == "complete").all() else 1


def _pv_placement(args: argparse.Namespace) -> int:
    from openg2g.studies.load import load_study
    from openg2g.studies.pv_placement import run_pv_placement
    from openg2g.studies.spec import PVPlacementSpec

    loaded = load_study(args.study, PVPlacementSpec, args.set)
    spec: PVPlacementSpec = loaded.spec  # type: ignore[assignment]
    topology = _topology(loaded.base, required=False)
    out = _out(args, spec.name)
    engine = _engine(args, spec.retries)
    try:
        result = run_pv_placement(loaded.base, spec, out, engine, topology=topology, progress=not args.no_progress)
    except KeyboardInterrupt:
        return interrupted(out)
    plan = result.plan
    terms = plan["terms_per_year"]
    gap = "n/a" if plan["mip_gap"] is None else f"{plan['mip_gap']:.2g}"
    print(f"MILP {plan['status']} (gap {gap}, {plan['solve_time_s']:.1f} s, {len(plan['rounds'])} rounds)")
    n = len(plan["plan"])
    print(
        f"plan: {n} plant{'' if n == 1 else 's'}, {plan['total_kw']:,.0f} kW, {plan['pv_energy_mwh_per_year']:,.0f} MWh/yr"
    )
    print(
        f"per year: objective {plan['objective_per_year']:,.0f} = investment {terms['investment']:,.0f}"
        f" + sites {terms['site_cost']:,.0f} - energy {terms['energy_value']:,.0f}"
        f" + violation penalty {terms['violation_penalty']:,.0f}"
        f" (without PV {plan['violation_penalty_without_pv_per_year']:,.0f})\n"
    )
    _print(
        result.candidates,
        ["bus", "zone", "chosen", "kw", "dv_self_pu_per_mw", "dv_max_pu_per_mw", "linear_hosting_kw"],
    )
    print()
    _print(
        result.validation,
        [
            "case",
            "status",
            "pv_kw",
            "violation_integral_pu_s",
            "overvoltage_integral_pu_s",
            "undervoltage_integral_pu_s",
            "violation_time_s",
            "v_min_pu",
            "v_max_pu",
            "pv_energy_kwh",
            "max_model_error_pu",
        ],
    )
    for _, row in result.validation[result.validation["status"] != "complete"].iterrows():
        print(f"{row['case']}: {row['status']}: {row['error']}", file=sys.stderr)
    print(f"\ntables, plan.json and plots: {out}")
    return 0


def _load_loss(args: argparse.Namespace) -> int:
    from openg2g.studies.load import load_study
    from openg2g.studies.load_loss import check_settings, disturbances_end_s, run_load_loss
    from openg2g.studies.spec import LoadLossSpec

    loaded = load_study(args.study, LoadLossSpec, args.set)
    spec: LoadLossSpec = loaded.spec  # type: ignore[assignment]
    out = _out(args, spec.name)
    check_settings(loaded.base, spec, f"{loaded.path}: settings")
    engine = _engine(args, spec.retries)
    try:
        result = run_load_loss(loaded.base, spec, out, engine, progress=not args.no_progress)
    except KeyboardInterrupt:
        return interrupted(out)
    table = result.table
    limits = ", ".join(
        f"{name.replace('_', ' ')} {value:g} {'Hz' if name.startswith('f') else 'pu'}"
        for name, value in spec.limits.given().items()
    )
    start = float(disturbances_end_s(loaded.base) + spec.limits.voltage_after_s)
    print(f"limits: {limits} (frequency over the whole run, voltages from {start:g} s)\n")
    _print(
        table,
        [
            "setting",
            "status",
            "mw_before",
            "load_lost_mw",
            *[c for c in table.columns if c.startswith("disturbance.") and c.endswith(".lost_mw")],
            "blocks_transferred",
            "blocks_tripped",
            "ups_energy_kwh",
            "time_to_full_return_s",
            "tokens_not_served",
            "frequency_zenith_hz",
            "frequency_nadir_hz",
            "frequency_rocof_hz_s",
            "v_min_pu",
            "v_max_pu",
            "within_limits",
            "broken_limits",
        ],
    )
    print()
    _print(
        result.sites,
        [
            "setting",
            "site",
            "mw_lost",
            "blocks_transferred",
            "blocks_tripped",
            "transferred",
            "tripped",
            "ups_energy_kwh",
            "time_to_full_return_s",
            "tokens_not_served",
        ],
    )
    if "holdable_mw" in table:
        print("\nthe largest load the system loses at once within its limits, per setting:")
        for row in table.itertuples(index=False):
            print(f"  {_holdable_line(row._asdict())}")
    for row in table[table["status"] != "complete"].itertuples(index=False):
        print(f"{row.setting}: {row.status}: {row.error}", file=sys.stderr)
    print(f"\ntables and plots: {out}")
    return 0 if (table["status"] == "complete").all() else 1


def _holdable_line(row: dict[str, object]) -> str:
    """One setting's holdable figure in words, beside what it loses at the base size."""
    import math

    lost = f"{row['setting']}: loses {row['load_lost_mw']:,.0f} MW at the base size"
    if row["holdable_error"]:
        return f"{lost}; search stopped: {row['holdable_error']}"
    held = float(row["holdable_mw"])  # type: ignore[arg-type]
    beyond = f"at {row['beyond_multiplier']:g}x it loses {row['beyond_mw']:,.0f} MW and breaks {row['beyond_limits']}"
    if math.isnan(held):
        return f"{lost}; none within the limits down to the smallest multiplier ({beyond})"
    at_least = "at least " if row["holdable_capped"] else ""
    text = f"{lost}; holds {at_least}{held:,.0f} MW (at {row['holdable_mw_multiplier']:g}x)"
    if row["holdable_mw_multiplier"] != row["holdable_multiplier"]:
        text += f", within the limits up to {row['holdable_multiplier']:g}x"
    text += ", the largest multiplier tried" if row["holdable_capped"] else f"; {beyond}"
    if not row["loss_monotone"]:
        text += " (the MW lost does not grow with the multiplier: see evaluations.parquet)"
    return text


def _out(args: argparse.Namespace, name: str) -> Path:
    """The study's output folder (``--out``, else ``runs/<name>``), checked writable and locked before any
    run; SIGTERM ends the study as Ctrl-C does from here on."""
    from openg2g.cli.outdir import default_out_dir, prepare_out_dir, stop_cleanly_on_signals

    stop_cleanly_on_signals()
    return prepare_out_dir(
        args.out if args.out is not None else default_out_dir(name, "study"),
        command="study",
        name=name,
        overwrite=args.overwrite,
        resume=True,
    )


def _engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", help="output folder (reused to resume; default runs/<study name>)")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override the base scenario (repeatable)"
    )
    add_engine_options(p)
    add_overwrite_option(p, "a rerun of the same study")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``study`` sub-command with ``hosting-capacity``, ``siting``, ``pv-placement`` and ``load-loss``."""
    p = subparsers.add_parser("study", description=__doc__)
    sub = p.add_subparsers(dest="study", metavar="STUDY", required=True)

    h = sub.add_parser("hosting-capacity", help="largest datacenter each bus hosts", description=__doc__)
    h.add_argument(
        "feeder",
        help="scenario prefix (ieee13 -> bundled ieee13_none), base scenario file, or study file (paths or bundled names)",
    )
    h.add_argument("--base", help="base scenario (file or bundled name) instead of <FEEDER>_none")
    h.add_argument("--buses", nargs="+", help="buses to study (default: every three-phase bus)")
    h.add_argument("--controller", nargs="+", help="controllers, none = no controller (default: none ofo)")
    h.add_argument("--tolerance-pu-s", type=float, help="largest violation integral counted as hosted (default 0)")
    h.add_argument(
        "--overload-tolerance-pct-s",
        type=float,
        help="largest overload integral of lines and transformers counted as hosted (default 0)",
    )
    h.add_argument(
        "--no-thermal",
        dest="thermal",
        action="store_const",
        const=False,
        help="judge voltages only (default: voltages and branch loading)",
    )
    h.add_argument("--duration-s", type=float, help="simulated seconds per run (default 60)")
    h.add_argument("--max-mw", type=float, help="largest site considered, MW peak (default 30)")
    h.add_argument(
        "--settle-s",
        type=float,
        help="violations before this time are not counted (default: 10 s with a controller, 0 without)",
    )
    h.add_argument(
        "--mix", nargs="+", metavar="MODEL=N", help="replicas per block (default: the site's counts over their gcd)"
    )
    _engine_options(h)
    h.set_defaults(func=_hosting)

    s = sub.add_parser("siting", help="rank candidate buses for a datacenter", description=__doc__)
    s.add_argument("study", help="siting study YAML file, or a bundled study's name (e.g. study_ieee13_siting)")
    _engine_options(s)
    s.set_defaults(func=_siting)

    v = sub.add_parser("pv-placement", help="where to build PV plants, and how big", description=__doc__)
    v.add_argument(
        "study", help="PV placement study YAML file, or a bundled study's name (e.g. study_ieee34_pv_placement)"
    )
    _engine_options(v)
    v.set_defaults(func=_pv_placement)

    ll = sub.add_parser(
        "load-loss",
        help="MW lost per ride-through setting, and the largest loss within the limits",
        description=LOAD_LOSS_HELP,
    )
    ll.add_argument(
        "study", help="load-loss study YAML file, or a bundled study's name (e.g. study_virginia_load_loss)"
    )
    _engine_options(ll)
    ll.set_defaults(func=_load_loss)

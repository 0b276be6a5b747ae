"""``openg2g evaluate POLICY --scenarios S1 S2 ...``: run scenarios with a trained policy as controller.

Each scenario runs as written but with its controllers replaced by the ``rl_policy`` controller
(``--keep-controllers`` keeps them beside it), writing normal run outputs to ``OUT/<scenario>``;
``--baseline`` also runs each scenario as written to ``OUT/<scenario>_baseline``. ``--held-out N``
runs the first N held-out variations of each scenario instead (the fixed evaluation set of the
policy's training env: same ranges, episode length and seed), labelled ``<scenario>#k``. Prints the
same summary table as ``openg2g compare``.

OUT is locked while the command runs; an OUT holding an earlier evaluation, or a run folder the
command would write into holding an earlier run, is refused (naming it) unless ``--overwrite``.

Loading the policy unpickles nothing (``openg2g.envs.policy``); a zip holding pickled objects
openg2g does not know is refused unless ``--trust-pickle`` (a pickle runs any code it carries).

Examples::

    openg2g evaluate runs/train_ieee13/policy.zip --scenarios ieee13_none ieee13_ofo --baseline
    openg2g evaluate ieee13_ppo --scenarios ieee13_none --set duration_s=600
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openg2g.cli.outdir import add_overwrite_option, prepare_out_dir, stop_cleanly_on_signals
from openg2g.cli.run import SCENARIO_IS_CODE
from openg2g.cli.table import format_table
from openg2g.core.errors import G2GError, ScenarioError

if TYPE_CHECKING:  # the RL stack (gymnasium, torch) and the scenario stack load only when the command runs
    from openg2g.envs.policy import PolicyMeta
    from openg2g.scenario.loader import LoadedScenario

__all__ = ["evaluate_policy", "policy_controller_spec", "register"]


def policy_controller_spec(policy: Path, trust_pickle: bool = False) -> dict[str, Any]:
    """The scenario ``controllers`` entry that runs ``policy`` with the stock ``rl_policy``."""
    params: dict[str, Any] = {"policy": str(policy)}
    if trust_pickle:
        params["trust_pickle"] = True
    return {"kind": "rl_policy", "name": "rl_policy", "params": params}


def held_out_variations(loaded: LoadedScenario, meta: PolicyMeta, n: int) -> list[tuple[str, LoadedScenario]]:
    """The first ``n`` held-out variations of a scenario, drawn as the policy's training env draws them.

    Same variation ranges, episode window and evaluation seed as the env the policy was trained in,
    so variation ``k`` here is the env's ``reset(options={"eval_index": k})``.
    """
    from openg2g.envs.variations import ScenarioGenerator
    from openg2g.scenario.loader import LoadedScenario

    sc = loaded.scenario
    steps = meta.env.episode_steps
    window = min(sc.duration_s, (steps + 1) * sc.periods.control_s) if steps else sc.duration_s
    generator = ScenarioGenerator(sc, meta.env.variations, window)
    return [
        (f"{sc.name}#{k}", LoadedScenario(v.scenario, loaded.path, loaded.base_dir, loaded.sha256))
        for k, v in enumerate(generator.evaluation_set(n, meta.env.eval_seed))
    ]


def evaluate_policy(
    policy: str | Path,
    scenarios: Sequence[str],
    out: Path,
    overrides: Sequence[str] = (),
    keep_controllers: bool = False,
    baseline: bool = False,
    progress: bool = False,
    held_out: int = 0,
    trust_pickle: bool = False,
    overwrite: bool = False,
) -> list[tuple[str, dict[str, Any]]]:
    """Run every scenario with the policy (and optionally as written); return ``(label, summary)`` rows.

    :param held_out: when > 0, run that many held-out variations of each scenario instead of the
        scenario as written (see :func:`held_out_variations`).
    :param trust_pickle: let SB3 unpickle what openg2g cannot read without it
        (:func:`openg2g.envs.policy.load_policy`); only for a policy you trust.
    :param overwrite: write over earlier outputs in ``out`` and its run folders (else refused).
    :raises G2GError: unknown policy or scenario, or a scenario that does not fit the policy.
    :raises ScenarioError: ``out`` or a run folder in it holds an earlier command's outputs (without
        ``overwrite``), or another process holds its lock.
    """
    from openg2g.engine.simulation import Simulation
    from openg2g.envs.policy import load_policy, resolve_policy
    from openg2g.envs.spaces import SpaceLayout
    from openg2g.scenario.loader import LoadedScenario, load_scenario
    from openg2g.scenario.run import run_scenario
    from openg2g.scenario.schema import ControllerSpec

    zip_path = resolve_policy(policy).resolve()
    model, meta = load_policy(zip_path, trust_pickle=trust_pickle)
    policy_spec = ControllerSpec.model_validate(policy_controller_spec(zip_path, trust_pickle))
    plan: list[tuple[str, str, LoadedScenario]] = []  # (run folder, row label, scenario): checked before any run
    for name in scenarios:
        loaded = load_scenario(name, list(overrides))
        context = Simulation.from_scenario(loaded).context(float(loaded.scenario.periods.control_s))
        layout = SpaceLayout.for_env(context, meta.env, source=str(loaded.path))
        layout.check_spaces(model.observation_space, model.action_space, f"policy {zip_path}")
        runs = held_out_variations(loaded, meta, held_out) if held_out > 0 else [(loaded.scenario.name, loaded)]
        for label, run in runs:
            own = list(run.scenario.controllers) if keep_controllers else []
            update = {"controllers": [*own, policy_spec]}
            if baseline:
                plan.append((f"{label}_baseline", f"{label} (as written)", run))
            plan.append(
                (
                    label,
                    f"{label} (policy)",
                    LoadedScenario(run.scenario.model_copy(update=update), run.path, run.base_dir, run.sha256),
                )
            )
    prepare_out_dir(out, command="evaluate", name=zip_path.stem, overwrite=overwrite)
    for folder, _, run in plan:
        prepare_out_dir(
            out / folder, f"run folder of {out}", command="run", name=run.scenario.name, overwrite=overwrite
        )
    rows: list[tuple[str, dict[str, Any]]] = []
    for folder, label, run in plan:
        rows.append((label, run_scenario(run, out / folder, progress=progress).summary))
    return rows


def _evaluate(args: argparse.Namespace) -> int:
    if args.held_out < 0:
        raise ScenarioError([(f"--held-out {args.held_out}", "must be >= 0 (0: the scenarios as written)")])
    out = Path(args.out) if args.out else Path("runs") / f"evaluate_{Path(args.policy).stem}"
    stop_cleanly_on_signals()
    try:
        rows = evaluate_policy(
            args.policy,
            args.scenarios,
            out,
            args.set,
            args.keep_controllers,
            args.baseline,
            not args.no_progress,
            args.held_out,
            args.trust_pickle,
            args.overwrite,
        )
    except KeyboardInterrupt:
        print(f"interrupted; partial outputs kept in {out}", file=sys.stderr)
        return 130
    if not rows:
        raise G2GError("no scenario given")
    print(format_table(rows, markdown=args.markdown))
    print(f"\noutputs: {out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` sub-command."""
    p = subparsers.add_parser(
        "evaluate",
        description=__doc__,
        epilog=SCENARIO_IS_CODE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("policy", help="policy .zip (with its .json beside it) or bundled policy name")
    p.add_argument("--scenarios", nargs="+", required=True, metavar="SCENARIO", help="scenario files or bundled names")
    p.add_argument("--out", help="output folder (default runs/evaluate_<policy>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every scenario")
    p.add_argument("--keep-controllers", action="store_true", help="run the scenarios' own controllers too")
    p.add_argument("--baseline", action="store_true", help="also run each scenario as written")
    p.add_argument(
        "--held-out",
        type=int,
        default=0,
        metavar="N",
        help="run N held-out variations of each scenario (as the policy's training env draws them) instead",
    )
    p.add_argument(
        "--trust-pickle",
        action="store_true",
        help="let SB3 unpickle a policy zip openg2g cannot read without it (not written by openg2g train): "
        "a pickle runs any code it carries, so only for a policy you trust",
    )
    add_overwrite_option(p)
    p.add_argument("--markdown", action="store_true", help="Markdown table")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_evaluate)

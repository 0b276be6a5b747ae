"""RL policies against no control and the rule-based controller on held-out variations of a scenario.

Usage::

    python bench/rl_heldout.py --policies ieee13_ppo                        # 8 held-out variations of ieee13_none
    python bench/rl_heldout.py --policies old=/tmp/old.zip ieee13_ppo --as-written
    python bench/rl_heldout.py --policies runs/x/checkpoints/*.zip --eval-seed 1  # the validation set
    python bench/rl_heldout.py --policies ieee13_ppo --rule-based ieee13_rule_based ieee13_joint

Every policy is run, as the ``rl_policy`` controller, on the first ``--held-out`` variations of the
scenario drawn as the policy's training env draws its evaluation set (``EnvConfig.eval_seed``: never
seen in training; all policies must share the episode window, ranges and seed; ``--eval-seed``
draws another set instead, e.g. a validation set for choosing a checkpoint), and so are no control
and the controllers of each ``--rule-based`` scenario (default: those of ``ieee13_rule_based``).
``--as-written`` adds the whole scenario as written (for ieee13_none an hour each).

Prints one row per controller: violation integral summed over the runs (under- and over-voltage),
throughput (mean over the runs of each run's time mean), the token-weighted ITL deadline-miss
fraction of all models, and per model its miss fraction over all runs' tokens and in its worst run.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from openg2g.cli.evaluate import held_out_variations, policy_controller_spec
from openg2g.envs.policy import read_meta, resolve_policy
from openg2g.plot.run import read_table
from openg2g.scenario.loader import LoadedScenario, load_scenario
from openg2g.scenario.run import run_scenario
from openg2g.scenario.schema import ControllerSpec


def _window(meta: Any) -> tuple[Any, ...]:
    env = meta.env
    return (env.episode_steps, env.variations, env.eval_seed)


def run_set(runs: list[tuple[str, LoadedScenario]], controllers: list[Any], out: Path) -> dict[str, Any]:
    """Run every scenario with ``controllers`` and pool the figures (see the module doc)."""
    violation = under = over = 0.0
    throughputs, tokens, missed, worst = [], {}, {}, {}
    for label, loaded in runs:
        scenario = loaded.scenario.model_copy(update={"controllers": controllers})
        run_dir = out / label.replace("#", "_")
        summary = run_scenario(LoadedScenario(scenario, loaded.path, loaded.base_dir, loaded.sha256), run_dir).summary
        violation += summary["violation_integral_pu_s"]
        under += summary["undervoltage_integral_pu_s"]
        over += summary["overvoltage_integral_pu_s"]
        throughputs.append(summary["mean_throughput_tok_s"])
        models = read_table(run_dir, "models")
        models = models.assign(missed=models["throughput_tok_s"] * models["deadline_miss_fraction"])
        for model, df in models.groupby("model", observed=True):
            tok, miss = float(df["throughput_tok_s"].sum()), float(df["missed"].sum())
            tokens[model] = tokens.get(model, 0.0) + tok
            missed[model] = missed.get(model, 0.0) + miss
            worst[model] = max(worst.get(model, 0.0), miss / tok if tok > 0 else 0.0)
    return {
        "violation": violation,
        "under": under,
        "over": over,
        "throughput": float(np.mean(throughputs)),
        "miss": sum(missed.values()) / sum(tokens.values()),
        "per_model": {m: (missed[m] / tokens[m] if tokens[m] > 0 else 0.0, worst[m]) for m in tokens},
    }


def print_table(title: str, rows: list[tuple[str, dict[str, Any]]]) -> None:
    models = list(rows[0][1]["per_model"])
    short = [m.split("-", 1)[-1] if m.startswith("Llama") else m for m in models]
    head = ["controller", "viol. (pu.s)", "under", "over", "throughput (tok/s)", "misses (%)"]
    head += [f"{s} misses % (worst run)" for s in short]
    print(f"\n{title}\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, r in rows:
        cells = [name, f"{r['violation']:.4f}", f"{r['under']:.4f}", f"{r['over']:.4f}"]
        cells += [f"{r['throughput']:,.0f}", f"{100 * r['miss']:.2f}"]
        cells += [f"{100 * r['per_model'][m][0]:.2f} ({100 * r['per_model'][m][1]:.2f})" for m in models]
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--policies", nargs="+", required=True, help="policy names or paths, optionally LABEL=PATH")
    parser.add_argument("--scenario", default="ieee13_none")
    parser.add_argument(
        "--rule-based",
        nargs="*",
        default=["ieee13_rule_based"],
        help="scenarios whose controllers to compare (given alone: none)",
    )
    parser.add_argument(
        "--eval-seed", type=int, default=None, help="draw the variations with this seed (default: the policies')"
    )
    parser.add_argument("--held-out", type=int, default=8)
    parser.add_argument("--as-written", action="store_true", help="also run the scenario as written")
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args()

    policies = []
    for item in args.policies:
        label, _, path = item.rpartition("=")
        zip_path = resolve_policy(path).resolve()
        policies.append((label or Path(path).stem, zip_path, read_meta(zip_path)))
    if len({_window(meta) for _, _, meta in policies}) != 1:
        raise SystemExit("the policies were trained on different held-out sets (episode_steps, variations, eval_seed)")
    loaded = load_scenario(args.scenario)
    controllers: list[tuple[str, list[Any]]] = [("no control", [])]
    controllers += [(name, list(load_scenario(name).scenario.controllers)) for name in args.rule_based]
    controllers += [(label, [ControllerSpec.model_validate(policy_controller_spec(p))]) for label, p, _ in policies]

    meta = policies[0][2]
    if args.eval_seed is not None:
        meta = meta.model_copy(update={"env": meta.env.model_copy(update={"eval_seed": args.eval_seed})})
    seed_note = "" if args.eval_seed is None else f" (eval_seed {args.eval_seed})"
    sets = [
        (
            f"{args.held_out} held-out variations of {args.scenario}{seed_note}",
            held_out_variations(loaded, meta, args.held_out),
        )
    ]
    if args.as_written:
        sets.append((f"{args.scenario} as written", [(loaded.scenario.name, loaded)]))
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        for title, runs in sets:
            rows = [(name, run_set(runs, specs, out / title.replace(" ", "_") / name)) for name, specs in controllers]
            print_table(title, rows)


if __name__ == "__main__":
    main()

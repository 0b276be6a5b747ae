"""``openg2g train SCENARIO``: train an RL batch-size policy on a scenario (Stable-Baselines3).

Examples::

    openg2g train ieee13_none --algo ppo --steps 200000 --n-envs 2 --out runs/train_ieee13 \\
        --env episode_steps=300
    openg2g train --steps 400000 --out runs/train_ieee13 --resume  # the rest from train.json
    openg2g train toy --steps 5000 --out runs/train_toy            # analytic toy case
    openg2g train toy --steps 5000 --tensorboard runs/tb            # also TensorBoard logs
    openg2g train ieee13_none --steps 50000 --env miss_budget=0.05 --init-from ieee13_ppo  # fine-tune
    openg2g train toy --steps 20000 --eval-every 2000 --out runs/train_toy  # keeps best_model.zip

``--env KEY=VALUE`` sets an env setting (:class:`openg2g.envs.EnvConfig`), dotted for nested ones:
``--env action=box --env reward.voltage=200 --env observation.voltages=bus_phases``; custom terms
(``openg2g.envs.terms``) as YAML lists: ``--env 'reward_terms=[{term: batch_reversals, weight: -0.1}]'``.
Writes ``policy.zip`` + ``policy.json`` (use with ``kind: rl_policy``) and ``vecnormalize.pkl``
(the reward normalization's statistics), checkpoints, CSV logs, ``monitor.csv`` and ``train.json``;
with ``--eval-every N`` the policy is also scored every N steps on the env's validation variations
(not the held-out ones the final score uses), each score appended to ``evaluations.npz`` and the
best model kept as ``best_model.zip`` + ``.json`` (rl-zoo's layout, see
:mod:`openg2g.envs.training_run`). ``--resume`` continues the run in OUT: same logs, monitor file
and evaluations, reward-normalization statistics restored, one more segment in ``train.json``.
What is not given again comes from OUT/train.json (scenario, --set, --algo, hyper-parameters,
--steps, --n-envs, --seed, --eval-every, --val-episodes; each --env over the stored env settings);
what is given must match the run, and a refusal names each field with its old and new value.
Without --resume, an OUT holding a training run is refused unless --overwrite is given; OUT is
locked while training writes it, and policies are written through a temporary file and a rename.
SIGINT (Ctrl-C) or SIGTERM (``kill``, a scheduler) stops training at the next env step: checkpoint
saved, segment marked interrupted, env workers ended; exit status 130 or 143.
Loading a policy this writes unpickles nothing (``evaluate``, ``rl_policy``, ``--init-from``; see
``openg2g.envs.policy``); ``--resume`` reads the checkpoints in OUT, which are pickles, so resume
only runs you made.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from openg2g.cli.outdir import prepare_out_dir
from openg2g.core.errors import G2GError, ScenarioError
from openg2g.envs.train_options import TrainOptions

__all__ = ["parse_env_settings", "register"]


def parse_env_settings(assignments: list[str], base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``["action=box", "reward.voltage=200"]`` -> ``{"action": "box", "reward": {"voltage": 200}}``.

    :param base: settings the assignments are applied over (a copy is changed), e.g. a resumed run's.
    """
    from openg2g.scenario.loader import apply_override

    data: dict[str, Any] = copy.deepcopy(dict(base or {}))
    for assignment in assignments:
        try:
            apply_override(data, assignment, "--env")
        except G2GError as exc:
            raise G2GError(str(exc).replace("--set", "--env")) from None
    return data


_OPTION = {"learning_rate": "--lr", "normalize_reward": "--raw-reward"}
"""Fields of :class:`~openg2g.envs.train_options.TrainOptions` whose option is not ``--<field-with-dashes>``."""


def _help(field: str) -> str:
    """The help of a :class:`~openg2g.envs.train_options.TrainOptions` field's option: the field's
    description, lower-cased like the other options' help unless it opens on an acronym (``PPO/A2C``),
    and its default: ``"... (default 4)"``."""
    info = TrainOptions.model_fields[field]
    text = (info.description or field).removesuffix(".")
    if text[1:2].islower():
        text = text[0].lower() + text[1:]
    default = info.default
    if isinstance(default, tuple):
        shown = " ".join(map(str, default))  # as the option takes it (nargs="+")
    elif isinstance(default, float):
        shown = f"{default:g}"
    else:
        shown = str(default)
    return f"{text} (default {shown})"


def _stored_options(record: Mapping[str, Any] | None) -> dict[str, Any]:
    """The :class:`~openg2g.envs.train_options.TrainOptions` fields a resumed run's ``train.json`` holds:
    algorithm, hyper-parameters, and the last segment's target steps, env count, seed and periodic
    evaluation."""
    if record is None:
        return {}
    last = record["segments"][-1] if record["segments"] else {}
    stored = {
        **(record.get("settings") or {}),
        "algo": record.get("algo"),
        "steps": record.get("steps"),
        "n_envs": last.get("n_envs"),
        "seed": last.get("seed"),
        "eval_every": last.get("eval_every"),
        "val_episodes": last.get("val_episodes"),
    }
    return {k: v for k, v in stored.items() if v is not None}


def _options(args: argparse.Namespace, stored: Mapping[str, Any]) -> TrainOptions:
    """train's numbers and choices, validated together; each problem is reported by its option.
    An option not given takes its value from ``stored`` (a resumed run's), else its default.

    :raises ScenarioError: one ``(option, message)`` per problem.
    """
    from pydantic import ValidationError

    given = {
        "algo": args.algo,
        "steps": args.steps,
        "n_envs": args.n_envs,
        "seed": args.seed,
        "checkpoint_every": args.checkpoint_every,
        "eval_episodes": args.eval_episodes,
        "eval_every": args.eval_every,
        "val_episodes": args.val_episodes,
        "n_steps": args.n_steps,
        "batch_size": args.batch_size,
        "learning_rate": args.lr,
        "gamma": args.gamma,
        "net_arch": None if args.net_arch is None else tuple(args.net_arch),
        "ent_coef": args.ent_coef,
        "normalize_reward": None if args.raw_reward is None else not args.raw_reward,
        "critic_warmup": args.critic_warmup,
    }
    values = {k: stored[k] for k in given if k in stored} | {k: v for k, v in given.items() if v is not None}
    try:
        return TrainOptions(**values)
    except ValidationError as exc:
        raise ScenarioError(
            [(f"{_option(str(err['loc'][0]))} {err['input']}", err["msg"]) for err in exc.errors()]
        ) from None


def _option(field: str) -> str:
    """The option of a :class:`~openg2g.envs.train_options.TrainOptions` field (other names as they are)."""
    if field not in TrainOptions.model_fields:
        return field
    return _OPTION.get(field, "--" + field.replace("_", "-"))


def _run_folder(args: argparse.Namespace) -> tuple[str | Path, dict[str, Any] | None]:
    """The output folder and, with ``--resume``, the ``train.json`` record of the run it holds.

    :raises ScenarioError: no scenario and nothing to take it from (a fresh run, or ``--resume``
        without ``--out`` or without a ``train.json`` there).
    """
    from openg2g.envs.training_run import TrainRecord

    if args.out is None and args.scenario is None:
        raise ScenarioError([("scenario", "missing: give a scenario file or bundled name (or --resume --out OUT)")])
    out: str | Path = args.out if args.out is not None else Path("runs") / f"train_{Path(args.scenario).stem}"
    # an empty --out is left as given for prepare_out_dir to refuse (as a Path it would be ".")
    record = TrainRecord.read(Path(out) / "train.json") if args.resume and str(out).strip() else None
    if args.scenario is None and record is None:
        why = "--resume found no train.json in " + str(out) if args.resume else "a fresh run needs one"
        raise ScenarioError([("scenario", f"missing ({why}): give a scenario file or bundled name")])
    return out, record


def _train(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from openg2g.envs.rl_extra import require_sb3

    require_sb3("openg2g train")
    from openg2g.envs.config import EnvConfig
    from openg2g.envs.training import TrainingInterrupted, require_tensorboard, train_policy

    out_path, record = _run_folder(args)
    stored = record or {}
    scenario = args.scenario if args.scenario is not None else stored["scenario"]
    overrides = args.set if args.set is not None else stored.get("overrides", [])
    options = _options(args, _stored_options(record))
    try:
        env_config = EnvConfig.model_validate(parse_env_settings(args.env or [], stored.get("env")))
    except ValidationError as exc:
        for err in exc.errors():
            print(f"error: --env {'.'.join(map(str, err['loc']))}: {err['msg']}", file=sys.stderr)
        return 2
    if args.tensorboard:  # before the output folder is made: a refused run leaves nothing behind
        require_tensorboard()
    out = prepare_out_dir(
        out_path,
        command="train",
        name=str(scenario),
        overwrite=args.overwrite,
        resume=args.resume,
    )
    settings = options.settings()
    try:
        result = train_policy(
            scenario,
            out,
            algo=options.algo,
            steps=options.steps,
            n_envs=options.n_envs,
            seed=options.seed,
            overrides=overrides,
            env_config=env_config,
            settings=settings,
            resume=args.resume,
            checkpoint_every=options.checkpoint_every,
            eval_episodes=options.eval_episodes,
            eval_every=options.eval_every,
            val_episodes=options.val_episodes,
            tensorboard=Path(args.tensorboard) if args.tensorboard else None,
            progress=not args.no_progress,
            init_from=args.init_from,
            overwrite=args.overwrite,
        )
    except ScenarioError as exc:  # an option the env refuses (more --eval-episodes than held-out variations)
        raise ScenarioError([(_option(loc), msg) for loc, msg in exc.problems]) from None
    except KeyboardInterrupt as exc:  # TrainingInterrupted on SIGINT or SIGTERM, after the checkpoint
        print(f"interrupted; checkpoints kept in {out / 'checkpoints'} (continue with --resume)", file=sys.stderr)
        return 128 + exc.signum if isinstance(exc, TrainingInterrupted) else 130
    print(f"policy: {result.policy} ({result.timesteps} steps, {result.wall_time_s:.0f} s)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``train`` sub-command."""
    p = subparsers.add_parser(
        "train",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "scenario", nargs="?", help="scenario YAML file, bundled scenario name, or 'toy' (with --resume: optional)"
    )
    p.add_argument("--algo", choices=get_args(TrainOptions.model_fields["algo"].annotation), help=_help("algo"))
    p.add_argument("--steps", type=int, help=_help("steps"))
    p.add_argument("--out", help="output folder (default runs/train_<scenario>)")
    p.add_argument("--n-envs", type=int, help=_help("n_envs"))
    again = p.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in OUT from its latest checkpoint (same logs, new segment); options not given "
        "again are those of OUT/train.json",
    )
    again.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh in an OUT that holds an earlier run (its checkpoints, best model, evaluations and "
        "statistics are deleted); without it or "
        "--resume such a folder is refused, naming what it holds",
    )
    p.add_argument(
        "--init-from",
        metavar="POLICY",
        help="start from a saved policy's network weights (path or bundled name; same algorithm and spaces, "
        "or a discrete policy whose action families are the first of the run's: added entries start at 'stay'; "
        "a PPO/A2C policy whose features are the first of the run's: added ones start with zero weights)",
    )
    p.add_argument("--seed", type=int, help=_help("seed"))
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="scenario override (repeatable)")
    p.add_argument("--env", action="append", metavar="KEY=VALUE", help="env setting (repeatable)")
    p.add_argument("--checkpoint-every", type=int, metavar="STEPS", help=_help("checkpoint_every"))
    p.add_argument("--eval-episodes", type=int, help=_help("eval_episodes"))
    p.add_argument("--eval-every", type=int, metavar="STEPS", help=_help("eval_every"))
    p.add_argument("--val-episodes", type=int, help=_help("val_episodes"))
    p.add_argument("--n-steps", type=int, help=_help("n_steps"))
    p.add_argument("--batch-size", type=int, help=_help("batch_size"))
    p.add_argument("--lr", type=float, help=_help("learning_rate"))
    p.add_argument("--gamma", type=float, help=_help("gamma"))
    p.add_argument("--ent-coef", type=float, help=_help("ent_coef"))
    p.add_argument("--net-arch", type=int, nargs="+", metavar="UNITS", help=_help("net_arch"))
    p.add_argument(
        "--raw-reward",
        action="store_true",
        default=None,
        help="train on raw rewards, turning off normalize_reward: " + _help("normalize_reward"),
    )
    p.add_argument("--critic-warmup", type=int, metavar="STEPS", help=_help("critic_warmup"))
    p.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="also log to TensorBoard under DIR, run <OUT name>_<k> (needs: pip install tensorboard)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_train)

"""``openg2g train SCENARIO``: train an RL batch-size policy on a scenario (Stable-Baselines3).

Examples::

    openg2g train ieee13_none --algo ppo --steps 200000 --n-envs 2 --out runs/train_ieee13 \\
        --env episode_steps=300
    openg2g train ieee13_none --steps 400000 --out runs/train_ieee13 --resume
    openg2g train toy --steps 5000 --out runs/train_toy            # analytic toy case
    openg2g train toy --steps 5000 --tensorboard runs/tb            # also TensorBoard logs
    openg2g train ieee13_none --steps 50000 --env miss_budget=0.05 --init-from ieee13_ppo  # fine-tune

``--env KEY=VALUE`` sets an env setting (:class:`openg2g.envs.EnvConfig`), dotted for nested ones:
``--env action=box --env reward.voltage=200 --env observation.voltages=bus_phases``.
Writes ``policy.zip`` + ``policy.json`` (use with ``kind: rl_policy``), checkpoints, CSV logs,
``monitor.csv`` and ``train.json`` (see :mod:`openg2g.envs.training_run`). ``--resume`` continues
the run in OUT: same logs and monitor file, reward-normalization statistics restored, one more
segment in ``train.json``; give the same scenario, --set, --env, --algo and hyper-parameters.
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
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openg2g.cli.outdir import prepare_out_dir
from openg2g.core.errors import G2GError, ScenarioError
from openg2g.scenario.loader import apply_override

if TYPE_CHECKING:
    from openg2g.envs.training import TrainOptions

__all__ = ["parse_env_settings", "register"]


def parse_env_settings(assignments: list[str]) -> dict[str, Any]:
    """``["action=box", "reward.voltage=200"]`` -> ``{"action": "box", "reward": {"voltage": 200}}``."""
    data: dict[str, Any] = {}
    for assignment in assignments:
        try:
            apply_override(data, assignment, "--env")
        except G2GError as exc:
            raise G2GError(str(exc).replace("--set", "--env")) from None
    return data


_OPTION = {"learning_rate": "--lr", "normalize_reward": "--raw-reward"}
"""Fields of :class:`~openg2g.envs.training.TrainOptions` whose option is not ``--<field-with-dashes>``."""


def _options(args: argparse.Namespace) -> TrainOptions:
    """train's numbers and choices, validated together; each problem is reported by its option.

    :raises ScenarioError: one ``(option, message)`` per problem.
    """
    from pydantic import ValidationError

    from openg2g.envs.training import TrainOptions

    given = {
        "algo": args.algo,
        "steps": args.steps,
        "n_envs": args.n_envs,
        "seed": args.seed,
        "checkpoint_every": args.checkpoint_every,
        "eval_episodes": args.eval_episodes,
        "n_steps": args.n_steps,
        "batch_size": args.batch_size,
        "learning_rate": args.lr,
        "gamma": args.gamma,
        "net_arch": tuple(args.net_arch),
        "ent_coef": args.ent_coef,
        "normalize_reward": not args.raw_reward,
        "critic_warmup": args.critic_warmup,
    }
    try:
        return TrainOptions(**given)
    except ValidationError as exc:
        raise ScenarioError(
            [(f"{_option(str(err['loc'][0]))} {err['input']}", err["msg"]) for err in exc.errors()]
        ) from None


def _option(field: str) -> str:
    """The option of a :class:`~openg2g.envs.training.TrainOptions` field (other names as they are)."""
    from openg2g.envs.training import TrainOptions

    if field not in TrainOptions.model_fields:
        return field
    return _OPTION.get(field, "--" + field.replace("_", "-"))


def _train(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from openg2g.envs.config import EnvConfig
    from openg2g.envs.training import TrainingInterrupted, TrainSettings, require_tensorboard, train_policy

    options = _options(args)
    try:
        env_config = EnvConfig.model_validate(parse_env_settings(args.env))
    except ValidationError as exc:
        for err in exc.errors():
            print(f"error: --env {'.'.join(map(str, err['loc']))}: {err['msg']}", file=sys.stderr)
        return 2
    if args.tensorboard:  # before the output folder is made: a refused run leaves nothing behind
        require_tensorboard()
    out = prepare_out_dir(
        args.out if args.out is not None else Path("runs") / f"train_{Path(args.scenario).stem}",
        command="train",
        name=str(args.scenario),
        overwrite=args.overwrite,
        resume=args.resume,
    )
    settings = TrainSettings(**{k: getattr(options, k) for k in TrainSettings.__dataclass_fields__})
    try:
        result = train_policy(
            args.scenario,
            out,
            algo=options.algo,
            steps=options.steps,
            n_envs=options.n_envs,
            seed=options.seed,
            overrides=args.set,
            env_config=env_config,
            settings=settings,
            resume=args.resume,
            checkpoint_every=options.checkpoint_every,
            eval_episodes=options.eval_episodes,
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
        help="train an RL policy on a scenario",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scenario", help="scenario YAML file, bundled scenario name, or 'toy'")
    p.add_argument("--algo", default="ppo", choices=("ppo", "a2c", "sac", "td3"), help="SB3 algorithm (default ppo)")
    p.add_argument("--steps", type=int, default=100_000, help="total env steps, resumed ones included (default 100000)")
    p.add_argument("--out", help="output folder (default runs/train_<scenario>)")
    p.add_argument(
        "--n-envs",
        type=int,
        default=1,
        help="parallel envs, in subprocesses when > 1 (default 1; at most 4 per CPU)",
    )
    again = p.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in OUT from its latest checkpoint (same logs, new segment)",
    )
    again.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh in an OUT that holds an earlier run (its checkpoints are deleted); without it or "
        "--resume such a folder is refused, naming what it holds",
    )
    p.add_argument(
        "--init-from",
        metavar="POLICY",
        help="start from a saved policy's network weights (path or bundled name; same algorithm and spaces)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the algorithm and the envs' variation draws (0 to 2**32-1)"
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="scenario override (repeatable)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="env setting (repeatable)")
    p.add_argument("--checkpoint-every", type=int, default=10_000, metavar="STEPS", help="default 10000")
    p.add_argument(
        "--eval-episodes",
        type=int,
        default=4,
        help="held-out episodes scored at the end (0: none; at most the env's n_eval)",
    )
    p.add_argument("--n-steps", type=int, default=256, help="PPO/A2C rollout steps per env (default 256)")
    p.add_argument("--batch-size", type=int, default=64, help="minibatch size (default 64)")
    p.add_argument("--lr", type=float, default=3e-4, help="learning rate, >= 0 (default 3e-4)")
    p.add_argument("--gamma", type=float, default=0.95, help="discount per control step, 0 to 1 (default 0.95)")
    p.add_argument("--ent-coef", type=float, default=0.0, help="PPO/A2C entropy bonus (default 0)")
    p.add_argument(
        "--net-arch",
        type=int,
        nargs="+",
        default=[64, 64],
        metavar="UNITS",
        help="hidden layers, 1 to 4096 units each (default 64 64)",
    )
    p.add_argument(
        "--raw-reward", action="store_true", help="train on raw rewards (default: scaled by the return's running std)"
    )
    p.add_argument(
        "--critic-warmup",
        type=int,
        default=0,
        metavar="STEPS",
        help="PPO/A2C: train only the value network for the first STEPS steps (default 0), e.g. after --init-from",
    )
    p.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="also log to TensorBoard under DIR, run <OUT name>_<k> (needs: pip install tensorboard)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_train)

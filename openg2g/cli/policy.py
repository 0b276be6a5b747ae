"""``openg2g policy wrap MODEL.zip --scenario S``: make an SB3 model trained elsewhere deployable.

Examples::

    openg2g policy wrap logs/ppo/best_model.zip --scenario ieee13_none --vecnormalize logs/ppo/vecnormalize.pkl
    openg2g policy wrap sac.zip --scenario scenarios/rl_ieee13_short.yaml --env observation.voltages=bus_phases
    openg2g policy wrap ppo.zip --scenario toy --set duration_s=31 --vecnormalize none

Writes ``MODEL.json`` beside the zip (the env settings ``kind: rl_policy`` and ``openg2g evaluate``
read; see ``docs/rl.md``) after checking that the scenario, with those settings, gives the model's
observation and action spaces; a difference is named (shape, bounds, number of actions).
``--vecnormalize`` names the ``VecNormalize`` statistics the model was trained with (stored relative
to the JSON file), or ``none`` (raw observations). Without it, a ``vecnormalize.pkl`` beside the zip
(or in rl-zoo's folder named after it) is taken; else raw observations, unless a PPO or A2C zip
shows it was trained under ``VecNormalize`` (then the statistics, or ``none`` for rewards only,
are asked for). A SAC, TD3 or DQN zip cannot show it: give ``--vecnormalize`` for one trained on
normalized observations. The
algorithm is read from the zip (sb3-contrib's MaskablePPO deploys as PPO). Nothing in the zip or
the statistics is unpickled.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from openg2g.cli.train import parse_env_settings
from openg2g.core.errors import ControllerError

__all__ = ["register"]


def _wrap(args: argparse.Namespace) -> int:
    from openg2g.envs.policy import wrap_policy

    try:
        written = wrap_policy(
            args.model,
            args.scenario,
            args.set,
            parse_env_settings(args.env),
            args.vecnormalize,
            args.algo,
            args.force,
        )
    except ControllerError as exc:  # the model, its statistics or the scenario do not fit: bad input
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"settings: {written}")
    print(f"observations: {_normalization(written)}")
    return 0


def _normalization(settings: Path) -> str:
    """What the written settings say the policy's observations are, for the terminal."""
    from openg2g.envs.policy import read_meta

    stats = read_meta(settings).vecnormalize
    return f"normalized by {settings.parent / stats}" if stats is not None else "raw (no VecNormalize statistics)"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``policy`` sub-command (``policy wrap``)."""
    p = subparsers.add_parser(
        "policy",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    wrap = actions.add_parser(
        "wrap",
        help="write MODEL.json, the env settings of an SB3 zip, checked against a scenario",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    wrap.add_argument("model", help="the Stable-Baselines3 zip")
    wrap.add_argument("--scenario", required=True, help="scenario YAML file, bundled name or 'toy' it acts on")
    wrap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="scenario override (repeatable)")
    wrap.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="env setting it was trained with (repeatable)"
    )
    wrap.add_argument(
        "--vecnormalize",
        metavar="PATH|none",
        help="its VecNormalize statistics (vecnormalize.pkl), or none (default: a vecnormalize.pkl beside the zip)",
    )
    wrap.add_argument("--algo", help="SB3 algorithm: ppo, a2c, sac, td3 or dqn (default: read from the zip)")
    wrap.add_argument("--force", action="store_true", help="replace an existing MODEL.json")
    wrap.set_defaults(func=_wrap)

"""``openg2g app [RUNS_DIR] [--port N]``: a local web app over a folder of runs.

Opens in a browser at the address it prints (http://127.0.0.1:8050 by default): the runs under
RUNS_DIR (default runs/) with their status and key figures; the selected runs over time (power,
batch sizes, latency, throughput, voltages, substation, taps, branch loading, commands and
events); the feeder map coloured by voltage and the voltage profile at the time under a slider;
runs compared against a baseline; the hosting capacity per bus of `openg2g study
hosting-capacity` outputs and the ranked placements of `openg2g study siting` outputs on the
feeder map, and the leaderboard of `openg2g benchmark` outputs found in RUNS_DIR; and what-if runs of a bundled scenario (site bus, replicas and batch sizes,
training job, controller, duration, tap mode), run by `openg2g run` into RUNS_DIR/whatif/.

Safe by default: it listens on 127.0.0.1 only (another --host is warned about: the app has no
login) and serves only the regular files of RUNS_DIR, never through a symbolic link out of it;
viewing a run never runs code (a pickle net a run names is read only with --allow-code, whatever
its scenario.yaml says); what-if runs use stock controllers and no pickles unless --allow-code is
given, and end with the app (Ctrl-C or SIGTERM). Needs the app extra: pip install -e ".[app]".
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from pathlib import Path

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "is_loopback", "register"]

DEFAULT_HOST = "127.0.0.1"
"""The address the app listens on unless told otherwise: this machine only."""

DEFAULT_PORT = 8050
"""The port the app listens on unless told otherwise."""


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address of this machine (a name that
    does not resolve is not)."""
    try:
        found = socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return False
    addresses = {str(info[4][0]).partition("%")[0] for info in found}  # an IPv6 address may carry its zone
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def _app(args: argparse.Namespace) -> int:
    from openg2g.core.errors import G2GError

    try:
        from openg2g.app import create_app
    except ImportError as exc:
        raise G2GError(f'openg2g app needs Dash: pip install -e ".[app]" ({exc})') from None
    from openg2g.app.data import AppError
    from openg2g.cli.outdir import stop_cleanly_on_signals

    if args.max_running < 1:
        raise AppError(f"--max-running must be at least 1, got {args.max_running}")
    runs_dir = Path(args.runs_dir)
    if not runs_dir.exists() and args.runs_dir == "runs":
        runs_dir.mkdir()
    app, queue = create_app(runs_dir, allow_code=args.allow_code, max_running=args.max_running)
    if not is_loopback(args.host):
        code = ", and what-if runs that run code (--allow-code)" if args.allow_code else ""
        print(
            f"warning: --host {args.host} is not a loopback address: anyone who can reach this machine on port "
            f"{args.port} can read every file of {runs_dir.resolve()} and start what-if runs{code}; the app has no "
            f"login. To use it from another machine, keep the default and tunnel: "
            f"ssh -L {args.port}:127.0.0.1:{args.port} THIS_MACHINE",
            file=sys.stderr,
        )
    print(f"openg2g app on http://{args.host}:{args.port} (runs folder {runs_dir.resolve()}); Ctrl-C stops it")
    stop_cleanly_on_signals()  # SIGTERM ends the server as Ctrl-C does, so the what-if runs end with it
    try:
        app.run(host=args.host, port=args.port, debug=False)
    finally:
        ended = queue.close()
        if ended:
            print(f"ended the what-if runs {', '.join(ended)} with the app", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``app`` sub-command."""
    p = subparsers.add_parser(
        "app",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs_dir", nargs="?", default="runs", help="folder of run folders (default runs/)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}: this machine only; anything else exposes the runs folder)",
    )
    p.add_argument("--max-running", type=int, default=1, metavar="N", help="what-if runs at the same time (default 1)")
    p.add_argument(
        "--allow-code",
        action="store_true",
        help="let what-if runs take free --set lines, which may name controller files and trusted pickles, and "
        "read the pickle nets runs name (a run folder's own grid.trust_pickle is never taken)",
    )
    p.set_defaults(func=_app)

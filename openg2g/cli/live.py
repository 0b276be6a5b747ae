"""``openg2g live``: hardware in the loop.

``openg2g live demo`` starts a real inference server on this machine (``transformers serve`` of a
tiny model built locally, nothing downloaded; on the CPU) and runs the bundled
``live_ieee13_ofo`` scenario against it in real time: OFO on the IEEE 13 feeder commands batch
sizes, the server's requests in flight follow, and the inter-token latency and throughput in the
``models`` table are measured from its streams. The model and the server's log go in ``OUT/server``.

``openg2g live check URL`` asks a server what it serves and streams one request from it: what a
live site's endpoint needs. To run a live site against your own servers, set its ``endpoints``
and ``power`` in a scenario and ``openg2g run`` it (docs/live.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from openg2g.cli.outdir import add_overwrite_option, stop_cleanly_on_signals

__all__ = ["register"]

DEMO_SCENARIO = "live_ieee13_ofo"


def _demo(args: argparse.Namespace) -> int:
    from openg2g.cli.run import run_loaded
    from openg2g.datacenter.live.demo import DemoServer, free_port
    from openg2g.scenario.loader import load_scenario
    from openg2g.scenario.preflight import check_start

    stop_cleanly_on_signals(once=True)  # a burst of Ctrl-C ends the run once, and the server with it
    url = f"http://127.0.0.1:{args.port or free_port()}"
    plain = load_scenario(DEMO_SCENARIO, args.set)
    endpoints = [
        f"datacenters.{i}.models.{j}.endpoints.{k}.url={url}"
        for i, site in enumerate(plain.scenario.datacenters)
        for j, model in enumerate(getattr(site, "models", []))
        for k in range(len(getattr(model, "endpoints", [])))
    ]
    loaded = load_scenario(DEMO_SCENARIO, [f"duration_s={args.duration}", *args.set, *endpoints])
    check_start(loaded)
    out = Path(args.out if args.out is not None else f"runs/{DEMO_SCENARIO}")
    folder = out / "server"
    folder.mkdir(parents=True, exist_ok=True)
    print(f"starting transformers serve at {url} (the tiny model and its log in {folder}) ...", file=sys.stderr)
    with DemoServer(folder, port=int(url.rsplit(":", 1)[1])):
        print(f"running {DEMO_SCENARIO} for {args.duration:g} s in real time", file=sys.stderr)
        return run_loaded(loaded, str(out), args.overwrite, progress=not args.no_progress)


def _check(args: argparse.Namespace) -> int:
    from openg2g.datacenter.live.load import ReplicaLoad, prompt_cycle, served_models
    from openg2g.datacenter.live.site import load_prompts

    url = args.url.rstrip("/")
    models = served_models(url)
    print(f"{url} serves: {', '.join(models) or 'nothing'}")
    model = args.model or (models[0] if models else None)
    if model is None:
        return 1
    load = ReplicaLoad(url, model, prompt_cycle(load_prompts("bundled", Path("."))), args.api, 64, 1, 30.0)
    load.start(1)
    deadline = time.monotonic() + 60
    while len(load.tokens) < 32 and load.error is None and time.monotonic() < deadline:
        time.sleep(0.05)
    load.stop()
    if load.error is not None:
        print(f"error: {url}: {load.error[1]}", file=sys.stderr)
        return 1
    now = time.monotonic()
    tokens = load.tokens.window(now - 120, now)
    if not tokens.itl_s:
        print(f"error: {url} streamed {tokens.count} token(s) of {model} in 60 s", file=sys.stderr)
        return 1
    mean_ms = 1000 * sum(tokens.itl_s) / len(tokens.itl_s)
    print(f"{model}: {tokens.count} tokens streamed, mean inter-token latency {mean_ms:.1f} ms (one request)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``live demo`` and ``live check``."""
    p = subparsers.add_parser(
        "live",
        description=__doc__,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    demo = actions.add_parser("demo", help="start a tiny local server and run live_ieee13_ofo against it in real time")
    demo.add_argument("--duration", type=float, default=60.0, help="seconds of real (and simulated) time (default 60)")
    demo.add_argument("--out", help="output folder (default runs/live_ieee13_ofo)")
    demo.add_argument("--port", type=int, default=0, help="the server's port on 127.0.0.1 (default: a free one)")
    demo.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario field")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_overwrite_option(demo)
    demo.set_defaults(func=_demo)
    check = actions.add_parser("check", help="list what a server serves and stream one request from it")
    check.add_argument("url", help="the server's base URL, e.g. http://127.0.0.1:8000")
    check.add_argument("--model", help="the model to ask for (default: the first it serves)")
    check.add_argument("--api", choices=["chat", "completions"], default="chat", help="the API to use (default chat)")
    check.set_defaults(func=_check)

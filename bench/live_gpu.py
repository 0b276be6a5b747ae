"""A live site on one NVIDIA GPU: measured power and ITL per batch size, beside the ML.ENERGY traces.

Builds a transformers model with random weights in Llama-3.1-8B's widths (``--layers`` of its 32
layers), serves it with ``transformers serve`` on CUDA (continuous batching), and runs a live site
on IEEE 13 with NVML power read every 0.1 s and no controller: the batch size steps through
``--batches`` (default 8, 16, 32, 64, 128), ``--hold-s`` each. Prints, per batch size, the measured
GPU power, ITL and tokens per second (the last ``hold_s - settle`` seconds of each hold) beside the
trace library's H100 means for Llama-3.1-8B at the same batch size, and draws
``OUT/live_gpu_power.png`` (measured power and requests in flight over time).

    python bench/live_gpu.py --out /tmp/live_gpu                 # on a GPU machine (about 3 min)
    python bench/live_gpu.py --device cpu --layers 1 --hidden 256 --power profile --hold-s 8   # the loop on a CPU

Needs the ``live`` extra and a PyTorch with CUDA.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from openg2g.datacenter.library import TraceLibrary
from openg2g.datacenter.live.demo import DemoServer, Layout, eight_b_layout
from openg2g.scenario.loader import load_scenario
from openg2g.scenario.run import run_scenario

PROFILE = "Llama-3.1-8B"


def scenario(url: str, model: str, batches: list[int], hold_s: float, power: str) -> dict:
    meter = {"source": "nvml"} if power == "nvml" else {"source": "profile"}
    events = [
        {"t_s": hold_s * i, "command": "set_batch_size", "site": "dc1", "model": PROFILE, "batch_size": b}
        for i, b in enumerate(batches)
        if i > 0
    ]
    return {
        "name": "live_gpu",
        "duration_s": hold_s * len(batches),
        "periods": {"datacenter_s": 0.1, "grid_s": 0.1, "control_s": 1},
        "grid": {"feeder": "openg2g-ieee13", "source_pu": 1.0},
        "datacenters": [
            {
                "kind": "live",
                "name": "dc1",
                "bus": "671",
                "power": meter,
                "stagger_s": 0,  # every simulated replica follows the GPU at once: the steps stay sharp
                "requests": {"api": "chat", "max_tokens": 512},
                "models": [
                    {
                        "model": PROFILE,
                        "served_model": model,
                        "gpus_per_replica": 1,
                        "replicas": 100,
                        "batch_size": batches[0],
                        "batch_sizes": sorted(set(batches)),
                        "itl_deadline_s": 0.08,
                        "endpoints": [{"url": url, "gpus": ["0"] if power == "nvml" else []}],
                    }
                ],
            }
        ],
        "events": events,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/live_gpu"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--layers", type=int, default=4, help="layers of Llama-3.1-8B's 32 (default 4)")
    parser.add_argument("--hidden", type=int, default=None, help="a smaller width (a CPU check of the loop)")
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    parser.add_argument("--hold-s", type=float, default=20.0)
    parser.add_argument("--settle-s", type=float, default=5.0, help="left out after each change (s)")
    parser.add_argument("--power", choices=["nvml", "profile"], default="nvml")
    args = parser.parse_args()
    layout = eight_b_layout(args.layers)
    if args.hidden is not None:
        layout = Layout(args.hidden, 4 * args.hidden, args.layers, 4, 2)
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"openg2g-llama8b-{layout.layers}l" if args.hidden is None else f"openg2g-h{args.hidden}-{layout.layers}l"
    started = time.monotonic()
    with DemoServer(args.out / "server", name=name, layout=layout, device=args.device, start_timeout_s=600) as server:
        print(f"server up in {time.monotonic() - started:.0f} s at {server.url} ({name} on {args.device})", flush=True)
        spec = args.out / "live_gpu.yaml"
        spec.write_text(yaml.safe_dump(scenario(server.url, name, args.batches, args.hold_s, args.power)))
        result = run_scenario(load_scenario(spec), args.out / "run", progress=False)
    print(json.dumps({"status": result.summary["status"], "realtime": result.summary.get("realtime")}))
    models = pd.read_parquet(args.out / "run" / "models")
    library = TraceLibrary.load(None)
    rows = []
    for i, batch in enumerate(args.batches):
        t0, t1 = args.hold_s * i + args.settle_s, args.hold_s * (i + 1)
        held = models[(models["t_s"] > t0) & (models["t_s"] <= t1)]
        meta = library.config(PROFILE, 1, batch)
        rows.append(
            {
                "batch": batch,
                "in_flight": held["in_flight"].mean(),
                "measured_w": held["measured_power_w"].mean(),
                "itl_ms": 1000 * held["itl_s"].mean(),
                "tok_s_per_gpu": held["throughput_tok_s"].mean() / 100,
                "h100_trace_w": meta.mean_power_w,
                "h100_trace_itl_ms": 1000 * meta.mean_itl_s if meta.mean_itl_s is not None else float("nan"),
                "h100_trace_tok_s": meta.throughput_tok_s,
            }
        )
    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    table.to_csv(args.out / "live_gpu_power.csv", index=False)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_p, ax_b) = plt.subplots(2, 1, sharex=True, figsize=(8, 5))
    ax_p.plot(models["t_s"], models["measured_power_w"], lw=0.8)
    ax_p.set_ylabel("measured GPU power (W)")
    ax_b.plot(models["t_s"], models["in_flight"], lw=0.8, label="in flight")
    ax_b.step(models["t_s"], models["batch_size"], where="post", lw=0.8, label="commanded batch")
    ax_b.set_ylabel("requests")
    ax_b.set_xlabel("t (s)")
    ax_b.legend()
    ax_p.set_title(f"{name} on {args.device}: NVML power under batch-size steps")
    fig.tight_layout()
    fig.savefig(args.out / "live_gpu_power.png", dpi=120)
    print(f"wrote {args.out / 'live_gpu_power.png'} and live_gpu_power.csv")
    return 0 if result.summary["status"] == "complete" and np.isfinite(table["itl_ms"]).all() else 1


if __name__ == "__main__":
    sys.exit(main())

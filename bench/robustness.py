"""Control robustness: each stock controller of the fixed-tap ieee13 hour under what a deployment meets.

For every controller of ``ieee13_fixedtap_{rule_based,pid,ofo,mpc}`` (and the same case without
control, each variant's baseline) this runs the hour as it is and in four variants, each a change
to the scenario file's own data:

- ``delay 2 s``: the controller's commands take effect 2 s after it sends them
  (``controllers[0].delay_s``);
- ``noise 0.005 pu``: each voltage it reads carries a Gaussian error of 0.005 pu (0.5%, a revenue-class
  meter; ``controllers[0].voltage_noise_pu``, :mod:`openg2g.engine.sensors`);
- ``second site``: a third of the campus's inference replicas (of each model) and of its base load
  moved to a second campus at bus 675, the training job staying at 671; the controller acts on
  both (every site);
- ``fault + return``: the site's load as OpenDSS's model 1 (what a fault solution needs) behind four
  halls on UPS (``scenarios/ieee13_fault_return.yaml``'s), and a three-phase fault at bus 675 at
  1500 s (in the training job), cleared in 0.1 s and reclosed after 2 s and 10 s; the halls that
  transferred wait for the return coordinator (2 MW a minute, 30 s settled), which runs after the
  controller.

Prints one Markdown table: per controller and variant the violation integral (pu.s), the
throughput against the same variant without control, the worst model's ITL misses (% of its
tokens) and the most batch changes of one model in any 60 s. Runs go two at a time
(``--workers``); ``--duration-s`` shortens them (the fault is then at the middle of the run);
``--only`` picks controllers. Asserts nothing: ``python bench/robustness.py [--workers 2]
[--only pid ofo] [--json rows.json]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONTROLLERS = ("rule_based", "pid", "ofo", "mpc")
HALL_WINDOWS = [[0.5, 0.033], [0.7, 0.1], [0.85, 1.0]]
"""A hall's input window (``scenarios/ieee13_fault_return.yaml``): below 0.5 pu for two cycles,
0.7 pu for 0.1 s or 0.85 pu for 1 s transfers it to its UPS."""


def _as_is(data: dict[str, Any], duration_s: float) -> None:
    """No change."""


def _delay(data: dict[str, Any], duration_s: float) -> None:
    for spec in data.get("controllers") or []:
        spec["delay_s"] = 2


def _noise(data: dict[str, Any], duration_s: float) -> None:
    for spec in data.get("controllers") or []:
        spec["voltage_noise_pu"] = 0.005


def _second_site(data: dict[str, Any], duration_s: float) -> None:
    first = data["datacenters"][0]
    second = copy.deepcopy(first)
    second.pop("training", None)
    second.update(name="dc2", bus="675")
    for kept, moved in zip(first["models"], second["models"]):
        moved["replicas"] = kept["replicas"] // 3
        kept["replicas"] -= moved["replicas"]
    second["base_load_kw_per_phase"] = first["base_load_kw_per_phase"] / 3
    first["base_load_kw_per_phase"] -= second["base_load_kw_per_phase"]
    second["gpu_capacity"] = sum(m["replicas"] * m["gpus_per_replica"] for m in second["models"])
    first["gpu_capacity"] -= second["gpu_capacity"]
    data["datacenters"].append(second)


def _fault_and_return(data: dict[str, Any], duration_s: float) -> None:
    site = data["datacenters"][0]
    site["load_model"] = "opendss"
    blocks = [
        {
            "name": f"hall{i}",
            "fraction": 0.25,
            "action": "ups",
            "ups": {"energy_kwh": 260},
            "under_voltage": HALL_WINDOWS,
        }
        for i in range(1, 5)
    ]
    site["ride_through"] = {"blocks": blocks, "return_to_service": {"delay_s": 60, "ramp_s": 10, "mode": "commanded"}}
    start = fault_start(duration_s)
    fault = {"kind": "fault", "name": "f675", "bus": "675", "type": "3ph", "r_ohm": 0.1, "start_s": start}
    fault.update(clearing_s=0.1, persists_s=5, reclosing={"line": "671692", "dead_times_s": [2, 10]})
    data["disturbances"] = {"events": [fault]}
    coordinator = {"kind": "return_coordinator", "params": {"max_ramp_mw_per_min": 2, "settle_s": 30}}
    data["controllers"] = [*(data.get("controllers") or []), coordinator]


def fault_start(duration_s: float) -> float:
    """When the fault variant's fault begins (s): 1500 s into the hour, else the run's middle."""
    return 1500.0 if duration_s >= 3000 else duration_s / 2


SETTLED_S = 15.0
"""From the fault's start to the end of its reclosing sequence (the last reclose at +12 s): the
fault and the open lateral's 0 pu nodes are beyond any controller, so the fault variant also
reports the violation from then on."""


VARIANTS: dict[str, Callable[[dict[str, Any], float], None]] = {
    "as is": _as_is,
    "delay 2 s": _delay,
    "noise 0.005 pu": _noise,
    "second site": _second_site,
    "fault + return": _fault_and_return,
}


def variant_file(controller: str, variant: str, duration_s: float, folder: Path) -> Path:
    """The scenario file of ``ieee13_fixedtap_<controller>`` (``none`` for no control) in ``variant``,
    written to ``folder`` with its profile paths made absolute."""
    source = ROOT / "scenarios" / f"ieee13_fixedtap_{controller}.yaml"
    data = yaml.safe_load(source.read_text())
    data["duration_s"] = duration_s
    data.setdefault("outputs", {}).update(plots=False, voltages="envelope")
    for element in (*data["grid"].get("pv", []), *data["grid"].get("extra_loads", [])):
        if "profile" in element:
            element["profile"] = str((source.parent / element["profile"]).resolve())
    VARIANTS[variant](data, duration_s)
    path = folder / f"{controller}-{variant.replace(' ', '_').replace('+', 'and')}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(path: Path, out: Path, after_s: float) -> dict[str, Any]:
    """One CLI run; its summary, the worst model's token-weighted ITL misses (%) and the violation
    integral from ``after_s`` on (pu.s)."""
    cmd = [sys.executable, "-m", "openg2g", "run", str(path), "--no-progress", "--out", str(out)]
    done = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        return {"failed": (done.stderr.strip().splitlines() or ["?"])[-1]}
    summary = json.loads((out / "summary.json").read_text())
    models = pd.read_parquet(out / "models", columns=["site", "model", "throughput_tok_s", "deadline_miss_fraction"])
    keys = [models["site"], models["model"]]
    missed = (models["throughput_tok_s"] * models["deadline_miss_fraction"]).groupby(keys, observed=True).sum()
    served = models["throughput_tok_s"].groupby(keys, observed=True).sum()
    summary["worst_model_miss_pct"] = float(100 * (missed / served).max())
    grid = pd.read_parquet(out / "grid", columns=["t_s", "violation_pu"])
    dt = float(grid["t_s"].diff().median())
    summary["violation_after_pu_s"] = float(grid.loc[grid["t_s"] > after_s, "violation_pu"].sum() * dt)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=3600.0, help="run length (s)")
    parser.add_argument("--workers", type=int, default=2, help="runs at once")
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    parser.add_argument("--only", nargs="+", choices=CONTROLLERS, default=list(CONTROLLERS), help="controllers to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        jobs = [(c, v) for c in ("none", *args.only) for v in VARIANTS]
        paths = {job: variant_file(*job, args.duration_s, folder) for job in jobs}
        with ThreadPoolExecutor(args.workers) as pool:
            after = fault_start(args.duration_s) + SETTLED_S
            futures = {job: pool.submit(run, paths[job], folder / "runs" / paths[job].stem, after) for job in jobs}
            results = {job: future.result() for job, future in futures.items()}
    rows = [_row(c, v, results[(c, v)], results[("none", v)]) for c in args.only for v in VARIANTS]
    print(f"| controller | {' | '.join(VARIANTS)} |")
    print(f"|---|{'---|' * len(VARIANTS)}")
    print(f"| none | {' | '.join(_violation(results[('none', v)], v) for v in VARIANTS)} |")
    for controller in args.only:
        cells = [_cell(results[(controller, v)], row, v) for v, row in zip(VARIANTS, rows_of(rows, controller))]
        print(f"| {controller} | {' | '.join(cells)} |")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))


def rows_of(rows: list[dict[str, Any]], controller: str) -> list[dict[str, Any]]:
    """``controller``'s rows, in the variants' order."""
    return [r for r in rows if r["controller"] == controller]


def _row(controller: str, variant: str, got: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The figures of one controller in one variant, against the variant's run without control."""
    row: dict[str, Any] = {"controller": controller, "variant": variant}
    if "failed" in got or "failed" in base:
        row["failed"] = got.get("failed") or f"baseline: {base['failed']}"
        return row
    row.update(
        violation_pu_s=got["violation_integral_pu_s"],
        baseline_pu_s=base["violation_integral_pu_s"],
        violation_after_fault_pu_s=got["violation_after_pu_s"],
        baseline_after_fault_pu_s=base["violation_after_pu_s"],
        throughput_change_pct=100 * (got["mean_throughput_tok_s"] / base["mean_throughput_tok_s"] - 1),
        worst_model_miss_pct=got["worst_model_miss_pct"],
        max_batch_changes_per_min=got["max_batch_changes_per_min"],
    )
    return row


def _violation(result: dict[str, Any], variant: str) -> str:
    """A run's violation integral, and for the fault variant the part after the reclosing."""
    if "failed" in result:
        return f"failed: {result['failed']}"
    text = f"{result['violation_integral_pu_s']:.3f} pu.s"
    if variant == "fault + return":
        text += f" ({result['violation_after_pu_s']:.3f} after)"
    return text


def _cell(result: dict[str, Any], row: dict[str, Any], variant: str) -> str:
    if "failed" in row:
        return f"failed: {row['failed']}"
    return (
        f"{_violation(result, variant)}, {row['throughput_change_pct']:+.1f}%, "
        f"{row['worst_model_miss_pct']:.1f}%, {row['max_batch_changes_per_min']}/min"
    )


if __name__ == "__main__":
    main()

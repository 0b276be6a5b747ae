"""The app's time to first paint, what-if round trip and memory, in a real browser.

Figures (wall seconds; Playwright driving Debian's Chromium, headless, against ``openg2g app``
started as its own process on a free port of 127.0.0.1):

1. ``page``: navigation start to the runs table filled (the page, plotly.js and the first runs
   list from the server);
2. ``series``: ticking a run to its time panels drawn (``#series-graph .main-svg`` holding
   traces), the callbacks that read and thin the run's tables included;
3. ``map``: ticking a run to its feeder map drawn (``#map-graph`` points);
4. ``first paint``: ``page`` + the later of ``series`` and ``map``;
5. ``server CPU``: the CPU seconds the server process used over 1-3 (a machine shared with other
   work stretches the wall times, much less this);

each for a ``cold`` server (a new process: nothing read yet; the run's overview and
branch-loading figures computed unless the run folder already keeps them: ``--cold-cache``
removes them first), ``warm`` (the page loaded again in the same server) and ``restarted`` (a
new server: the overview read from beside the run). Then the what-if round trip: a 60 s ``ieee13_none`` what-if submitted
from the form to its feeder map drawn, and the server's peak resident memory (``VmHWM``). Last,
the slider: for each ``--slider-cases`` run, the seconds from a click on ``next ▶`` to the feeder
map and the voltage profile titled with the next grid step's time (median and worst of
``--moves`` moves, after the first map of the run is drawn).

The runs (``--prepare`` makes them under ``--runs``, default ``runs/bench_app``):

- ``ieee13_fixedtap_ofo``: ``openg2g run ieee13_fixedtap_ofo`` (one hour at 0.1 s), PNGs off,
  ``outputs.branches=all``;
- ``ieee123_<N>s``: ``openg2g run ieee123_ref_none`` for ``--ieee123-s`` seconds (253 bus-phases,
  0.1 s), PNGs off, ``outputs.branches=all``;
- ``ieee8500_60s``: ``openg2g run ieee8500_none`` for 60 s with every bus-phase recorded
  (``outputs.voltages=all``, the primary's 12.47 kV buses, the scenario's monitoring), PNGs off;
- ``SIZE-FIXTURE-ieee123-day-tiled``: NOT a simulation result. The tables of the ieee123 run
  repeated in time (copy ``k`` shifted by ``k`` times its duration) up to 86,400 s, so the viewer
  meets a day's table sizes (864,000 grid steps; 218 million ``grid_voltages`` rows). A day of
  ieee123 does not run in the time this machine has; its ``README.txt`` and its ``summary.json``
  (``size_fixture``) say what it is, and this script prints it.

Run: ``python bench/bench_app.py --prepare`` once (3 h of ieee123 took 4.7 minutes and the tiling
20 minutes, 6.9 GB, on a busy 2-core machine; ``--tile-from RUN`` tiles a run you have), then
``python bench/bench_app.py``. Asserts nothing; prints one row per figure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parent.parent
DAY_S = 86400.0
FIXTURE = "SIZE-FIXTURE-ieee123-day-tiled"
EIGHT_5 = "ieee8500_60s"
MAP_DRAWN = "#map-graph .gtitle"
"""The feeder map's title, drawn with the map (its buses are SVG points or, on a large feeder, WebGL)."""
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TIME_COLUMNS = ("t_s", "t_effective_s")
"""The time columns shifted when the tables are tiled."""


def _openg2g(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "openg2g.cli.main", *args], check=True, env=env)


def prepare(runs: Path, ieee123_s: float) -> None:
    """Run the two scenarios and tile the ieee123 run to a day (see the module docstring)."""
    common = ["--set", "outputs.plots=false", "--set", "outputs.branches=all", "--no-progress", "--overwrite"]
    _openg2g("run", "ieee13_fixedtap_ofo", "--out", str(runs / "ieee13_fixedtap_ofo"), *common)
    source = runs / f"ieee123_{ieee123_s:g}s"
    _openg2g("run", "ieee123_ref_none", "--out", str(source), "--set", f"duration_s={ieee123_s:g}", *common)
    tile(source, runs / FIXTURE, DAY_S)
    _openg2g(
        "run", "ieee8500_none", "--out", str(runs / EIGHT_5), "--set", "duration_s=60", "--set", "outputs.voltages=all",
        "--set", "outputs.plots=false", "--no-progress", "--overwrite",
    )  # fmt: skip


def _tile_table(table_dir: Path, dest: Path, copies: int, span_s: float, until_s: float) -> None:
    """``table_dir``'s parts repeated ``copies`` times into ``dest``, copy ``k`` shifted by ``k``
    times ``span_s`` and cut at ``until_s``; part ``k * n + i`` is copy ``k`` of part ``i``."""
    parts = sorted(table_dir.glob("part-*.parquet"))
    dest.mkdir()
    for i, part in enumerate(parts):
        table = pq.read_table(part)
        for copy in range(copies):
            shifted = table
            for name in TIME_COLUMNS:
                if name in table.column_names:
                    column = pc.add(table.column(name), copy * span_s)
                    shifted = shifted.set_column(table.column_names.index(name), name, column)
            if "t_s" in table.column_names:
                shifted = shifted.filter(pc.less_equal(shifted.column("t_s"), until_s + 1e-9))
            if shifted.num_rows:
                pq.write_table(shifted, dest / f"part-{copy * len(parts) + i:05d}.parquet")


def tile(source: Path, dest: Path, until_s: float, jobs: int = 3) -> None:
    """Repeat ``source``'s tables in time into ``dest`` until ``until_s`` (a size fixture), a
    table per worker process."""
    summary = json.loads((source / "summary.json").read_text())
    span_s = float(summary["sim_time_s"])
    copies = math.ceil(until_s / span_s)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    tables = sorted(
        (p for p in source.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: -sum(f.stat().st_size for f in p.iterdir()),
    )
    with ProcessPoolExecutor(jobs) as pool:
        done = [pool.submit(_tile_table, t, dest / t.name, copies, span_s, until_s) for t in tables]
        for future in done:
            future.result()
    scenario = yaml.safe_load((source / "scenario.yaml").read_text())
    scenario["duration_s"] = until_s
    (dest / "scenario.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    note = (
        f"size fixture for bench/bench_app.py: the tables of {source.name} ({span_s:g} s) repeated "
        f"{copies} times in time up to {until_s:g} s; not a simulation result"
    )
    summary.update(sim_time_s=until_s, duration_s=until_s, size_fixture=note, scenario=FIXTURE)
    (dest / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (dest / "README.txt").write_text(note + "\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return math.nan


class Server:
    """``openg2g app RUNS --port N`` in its own process."""

    def __init__(self, runs: Path) -> None:
        self.port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "openg2g.cli.main", "app", str(runs), "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("openg2g app did not start") from None
                time.sleep(0.2)

    def cpu_s(self) -> float:
        """CPU seconds the server has used (user + system), which a busy machine inflates less
        than wall time."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> float:
        """Stop it; its peak resident memory (MB)."""
        peak = _peak_rss_mb(self.proc.pid)
        self.proc.terminate()
        self.proc.wait(timeout=60)
        return peak


def first_paint(browser: Any, server: Server, run_id: str) -> dict[str, float]:
    """Seconds from navigation start to the runs table, then from ticking ``run_id`` to its
    series and its map; and the server's CPU seconds over all of it."""
    page = browser.new_page(viewport={"width": 1300, "height": 1800})
    cpu = server.cpu_s()
    start = time.perf_counter()
    page.goto(server.url)
    page.wait_for_selector("#runs-table td", timeout=300_000)
    t_page = time.perf_counter() - start
    tick = time.perf_counter()
    page.locator("#runs-table tr", has_text=run_id).locator("input[type=checkbox]").check()
    page.wait_for_selector("#series-graph .main-svg .scatterlayer .trace", timeout=600_000)
    t_series = time.perf_counter() - tick
    page.locator(MAP_DRAWN, has_text="voltage at t =").wait_for(timeout=600_000)
    t_map = time.perf_counter() - tick
    page.close()
    first = t_page + max(t_series, t_map)
    return {"page": t_page, "series": t_series, "map": t_map, "first paint": first, "server CPU": server.cpu_s() - cpu}


def whatif_round_trip(browser: Any, url: str) -> dict[str, float]:
    """A 60 s ieee13_none what-if from the run button to its map drawn (s)."""
    page = browser.new_page(viewport={"width": 1300, "height": 1800})
    page.goto(url)
    page.wait_for_selector("#runs-table td", timeout=300_000)
    page.wait_for_function("document.querySelector('#wi-bus').value === '671'", timeout=60_000)
    page.fill("#wi-duration", "60")
    page.locator("#wi-duration").press("Tab")
    start = time.perf_counter()
    page.click("#wi-run")
    page.wait_for_selector("#wi-job-items .job-complete", timeout=600_000)
    t_done = time.perf_counter() - start
    row = page.locator("#runs-table tr", has_text="whatif/ieee13_none-")
    row.wait_for(timeout=60_000)
    row.locator("input[type=checkbox]").check()
    page.locator(MAP_DRAWN, has_text="voltage at t =").wait_for(timeout=300_000)
    t_shown = time.perf_counter() - start
    page.close()
    return {"run finished": t_done, "map drawn": t_shown}


def slider_moves(browser: Any, url: str, run_id: str, moves: int) -> list[float]:
    """Seconds from a click on ``next ▶`` to the map and the profile at the next grid step, for
    ``moves`` moves from the run's first step."""
    page = browser.new_page(viewport={"width": 1300, "height": 1800})
    page.goto(url)
    page.wait_for_selector("#runs-table td", timeout=300_000)
    page.locator("#runs-table tr", has_text=run_id).locator("input[type=checkbox]").check()
    page.locator(MAP_DRAWN, has_text="voltage at t =").wait_for(timeout=600_000)
    taken = []
    for _ in range(moves):
        label = page.locator("#time-label").inner_text()  # "t = 0.1 s"
        start = time.perf_counter()
        page.click("#step-next")
        page.wait_for_function(f"document.querySelector('#time-label').innerText !== {label!r}", timeout=600_000)
        t_s = page.locator("#time-label").inner_text().split()[2]
        for title in (f"{run_id}: voltage at t = {t_s} s", f"voltage profile at t = {t_s} s"):
            page.locator(".gtitle", has_text=title).wait_for(timeout=600_000)
        taken.append(time.perf_counter() - start)
    page.close()
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "bench_app")
    parser.add_argument("--prepare", action="store_true", help="run the scenarios and tile the fixture first")
    parser.add_argument("--ieee123-s", type=float, default=10800.0, help="ieee123 run length to tile (s)")
    parser.add_argument("--tile-from", type=Path, help="tile this existing ieee123 run (with --prepare)")
    parser.add_argument("--cases", nargs="*", default=["ieee13_fixedtap_ofo", FIXTURE], help="run ids to open")
    parser.add_argument("--no-whatif", action="store_true", help="skip the what-if round trip")
    parser.add_argument("--slider-cases", nargs="*", default=[EIGHT_5], help="run ids whose slider is moved")
    parser.add_argument("--moves", type=int, default=7, help="slider moves per run")
    parser.add_argument(
        "--cold-cache", action="store_true", help="remove the runs' overview and branch-loading caches first"
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from openg2g.plot.overview import OVERVIEW_CACHE
    from openg2g.plot.overview_tables import LOADING_CACHE

    runs: Path = args.runs.resolve()
    if args.prepare and args.tile_from:
        tile(args.tile_from, runs / FIXTURE, DAY_S)
    elif args.prepare:
        prepare(runs, args.ieee123_s)
    note = runs / FIXTURE / "README.txt"
    if note.is_file():
        print("NOTE:", note.read_text().strip())
    if args.cold_cache:
        for name in (LOADING_CACHE, OVERVIEW_CACHE):
            for cache in runs.glob(f"*/{name}"):
                cache.unlink()
    # the what-if writes into the runs folder: a copy keeps the benchmark's runs as they are
    whatif_root = runs / "whatif"
    shutil.rmtree(whatif_root, ignore_errors=True)
    cases = [r for r in args.cases if (runs / r).is_dir()]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for run_id in cases:
            # a new server, then the page again in it, then a new server over the same folder
            for labels in (("cold", "warm"), ("restarted",)):
                server = Server(runs)
                try:
                    for label in labels:
                        figures = first_paint(browser, server, run_id)
                        shown = "  ".join(f"{k} {v:6.2f} s" for k, v in figures.items())
                        print(f"{run_id:34s} {label:9s}  {shown}")
                finally:
                    peak_mb = server.close()
                print(f"{run_id:34s} server peak RSS {peak_mb:.0f} MB")
        if not args.no_whatif:
            server = Server(runs)
            try:
                trip = whatif_round_trip(browser, server.url)
                print("what-if 60 s ieee13_none         " + "  ".join(f"{k} {v:6.2f} s" for k, v in trip.items()))
            finally:
                print(f"what-if server peak RSS {server.close():.0f} MB")
        for run_id in (r for r in args.slider_cases if (runs / r).is_dir()):
            server = Server(runs)
            try:
                taken = sorted(slider_moves(browser, server.url, run_id, args.moves))
                print(f"{run_id:34s} slider move  median {taken[len(taken) // 2]:6.2f} s  worst {taken[-1]:6.2f} s")
            finally:
                server.close()
        browser.close()
    shutil.rmtree(whatif_root, ignore_errors=True)


if __name__ == "__main__":
    main()

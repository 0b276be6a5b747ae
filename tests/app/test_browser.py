"""The app in a real browser: headless Chromium (Debian's package, driven by Playwright) against
the app served on a free port of 127.0.0.1. Skipped, saying why, where either is missing."""

from __future__ import annotations

import io
import os
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


SHOTS = os.environ.get("OPENG2G_APP_SCREENSHOTS")
"""Folder to keep the views' screenshots in (as 256-colour PNGs, e.g. docs/img); unset: checked only."""


@contextmanager
def _serve(root: Path) -> Iterator[str]:
    from werkzeug.serving import make_server

    from openg2g.app import create_app

    app, queue = create_app(root)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    httpd = make_server("127.0.0.1", port, app.server, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    httpd.shutdown()
    queue.close()


@pytest.fixture(scope="module")
def server(runs_dir: Path) -> Iterator[str]:
    with _serve(runs_dir) as url:
        yield url


@pytest.fixture(scope="module")
def studies_server(studies_dir: Path) -> Iterator[str]:
    with _serve(studies_dir) as url:
        yield url


@pytest.fixture(scope="module")
def siting_server(siting_dir: Path) -> Iterator[str]:
    with _serve(siting_dir) as url:
        yield url


@pytest.fixture(scope="module")
def commands_server(commands_dir: Path) -> Iterator[str]:
    with _serve(commands_dir) as url:
        yield url


COLLAPSE = "PowerFlowError: the power flow did not converge at t = 0.1 s (voltage collapse)"


@pytest.fixture(scope="module")
def failed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app over a folder of one failed run: its summary as a run that collapsed at 0.1 s
    writes it (every figure over the 0.1 s it ran, the reason in ``error``)."""
    import json

    root = tmp_path_factory.mktemp("failed")
    (root / "collapsed").mkdir()
    summary = {
        "status": "failed",
        "scenario": "ieee13_none",
        "sim_time_s": 20.0,
        "duration_s": 20.0,
        "violation_integral_pu_s": 0.0,
        "v_min_pu": 0.98,
        "error": COLLAPSE,
    }
    (root / "collapsed" / "summary.json").write_text(json.dumps(summary))
    with _serve(root) as url:
        yield url


@pytest.fixture(scope="module")
def empty_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _serve(tmp_path_factory.mktemp("empty")) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install -e '.[test]')"
    )
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@contextmanager
def _open(browser: Any, url: str) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1300, "height": 1800})
    hosts: set[str] = set()
    page.on("request", lambda r: hosts.add(r.url.split("/")[2]))
    page.goto(url)
    page.wait_for_selector("#runs-table td", timeout=60_000)
    yield page
    assert hosts <= {url.split("/")[2]}, f"requests left the app: {hosts}"  # no CDN, no version check
    page.close()


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    with _open(browser, server) as page:
        yield page


@pytest.fixture
def studies_page(browser: Any, studies_server: str) -> Iterator[Any]:
    with _open(browser, studies_server) as page:
        yield page


def _row(page: Any, run_id: str) -> Any:
    """The runs table's row of ``run_id`` (its run cell exactly: ``ieee13_none`` is not
    ``whatif/ieee13_none-001``)."""
    cell = page.locator("td[data-dash-column=run]", has_text=re.compile(f"^{re.escape(run_id)}$"))
    return page.locator("#runs-table tbody tr", has=cell)


def _select(page: Any, run_id: str) -> None:
    _row(page, run_id).locator("input[type=checkbox]").check()


def _not_blank(png: bytes) -> bool:
    from matplotlib.image import imread

    pixels = imread(io.BytesIO(png), format="png")
    return bool(np.std(pixels[..., :3]) > 0.05)


def _shot(target: Any, name: str) -> None:
    """Screenshot a page or an element, check it is not blank, and keep it in :data:`SHOTS` as
    ``app-<name>.png`` (reduced to 256 colours, so each stays small enough for the README)."""
    png = target.screenshot()
    assert _not_blank(png), f"the {name} view is blank"
    if SHOTS:
        from PIL import Image

        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256)
        image.save(Path(SHOTS) / f"app-{name}.png", optimize=True)


def _cursor(graph: str) -> str:
    """The time (s) the page's cursor line shows over ``graph`` (NaN while it is hidden)."""
    return f"parseFloat(document.querySelector('#{graph} .time-cursor')?.dataset.t)"


CURSOR_X = _cursor("series-graph")
SERIES_GD = "document.querySelector('#series-graph .js-plotly-plot')"
CURSOR_PLACED = f"""() => {{ const gd = {SERIES_GD};
    const line = gd.querySelector('.time-cursor'), xa = gd._fullLayout.xaxis, size = gd._fullLayout._size;
    return [parseFloat(line.style.left) - (xa._offset + xa.l2p(Number(line.dataset.t)) - 1),
            parseFloat(line.style.top) - size.t, parseFloat(line.style.height) - size.h]; }}"""
"""How far (px) the cursor line is from where the panels' own axis puts its time, top and height."""


def test_open_a_run_and_move_the_slider(page: Any, tmp_path: Path) -> None:
    _select(page, "ieee13_ofo")
    page.wait_for_selector("#map-graph .scatterlayer .point", timeout=60_000)
    page.wait_for_function(f"{CURSOR_X} === 0.1", timeout=60_000)
    page.evaluate(f"() => {{ window.panelDraws = 0; {SERIES_GD}.on('plotly_afterplot', () => window.panelDraws++); }}")
    title = page.locator("#map-graph .gtitle")
    assert title.text_content() == "ieee13_ofo: voltage at t = 0.1 s"
    before = page.locator("#map-graph .scatterlayer").inner_html()
    assert _not_blank(page.screenshot(full_page=True))
    _shot(page.locator("#runs"), "runs")
    # type a time into the slider's own input, in seconds
    box = page.locator("#time-slider input")
    box.fill("15.1")
    box.press("Tab")  # the slider takes a typed value when the box loses focus
    page.wait_for_function("document.querySelector('#time-label').innerText === 't = 15.1 s'", timeout=60_000)
    page.wait_for_function(f"{CURSOR_X} === 15.1", timeout=60_000)
    assert page.evaluate(CURSOR_PLACED) == pytest.approx([0, 0, 0], abs=0.01)
    assert page.evaluate("window.panelDraws") == 0  # the cursor is the page's line: the panels are not drawn again
    assert title.text_content() == "ieee13_ofo: voltage at t = 15.1 s"
    assert page.locator("#map-graph .scatterlayer").inner_html() != before  # colours changed with the voltages
    assert page.locator("#worst-items li").count() == 8
    assert page.locator("#profile-graph .gtitle").text_content() == "voltage profile at t = 15.1 s"
    _shot(page.locator("section", has=page.locator("#map-graph")), "map")
    page.set_viewport_size({"width": 900, "height": 1400})  # the panels drawn anew at another width
    page.wait_for_function(f"{SERIES_GD}._fullLayout.width < 1000", timeout=60_000)
    assert page.evaluate(CURSOR_PLACED) == pytest.approx([0, 0, 0], abs=0.01)  # placed again on the new axis


TIME_LABEL = "document.querySelector('#time-label').innerText"


def _at(page: Any, t_s: str) -> None:
    """Wait until the feeder view shows the grid step at ``t_s`` (its label, e.g. ``15.1``)."""
    page.wait_for_function(f"{TIME_LABEL} === 't = {t_s} s'", timeout=60_000)


def test_previous_next_and_the_worst_step(page: Any, runs_dir: Path) -> None:
    """The buttons move one grid step (held at the ends) and to the step nearest to or beyond a
    limit, found here from the run's own grid table."""
    import pandas as pd

    grid = pd.read_parquet(runs_dir / "ieee13_none" / "grid")
    margin = np.fmin(grid["v_min_pu"] - 0.95, 1.05 - grid["v_max_pu"])
    worst = float(grid["t_s"].to_numpy()[int(np.argmin(margin.to_numpy()))])
    _select(page, "ieee13_none")
    _at(page, "0.1")
    page.click("#step-next")
    _at(page, "0.2")
    page.click("#step-back")
    page.click("#step-back")  # held at the first step
    _at(page, "0.1")
    page.click("#jump-worst")
    _at(page, f"{worst:g}")
    assert page.locator("#time-slider", has_text="worst").count() == 1  # the slider marks it
    page.click("#step-next")
    _at(page, f"{worst + 0.1:g}")


MAP_DATA = "document.querySelector('#map-graph .js-plotly-plot').data"


def test_a_move_patches_the_map_and_a_new_run_draws_anew(page: Any, runs_dir: Path) -> None:
    """A move within a run sends only the step's values: the browser keeps the branches' trace
    (the same object) and the buses take the new step's voltages; another run is drawn whole."""
    import pandas as pd

    _select(page, "ieee13_ofo")
    _at(page, "0.1")
    page.evaluate(f"() => {{ window.branches = {MAP_DATA}[0]; }}")
    page.click("#step-next")
    _at(page, "0.2")
    page.locator("#map-graph .gtitle", has_text="t = 0.2 s").wait_for(timeout=60_000)
    assert page.evaluate(f"() => {MAP_DATA}[0] === window.branches")  # patched, not redrawn
    shown = page.evaluate(
        f"""() => {{ const t = {MAP_DATA}.find(t => t.uid === 'buses');
            return [t.text, t.customdata]; }}"""
    )
    rows = pd.read_parquet(runs_dir / "ieee13_ofo" / "grid_voltages")
    step = rows[np.isclose(rows["t_s"], 0.2)].set_index("bus_phase")["v_pu"]
    for bus, hover in zip(*shown):
        for part in hover.removesuffix(" pu").split(", "):
            phase, v_pu = part.split()
            assert float(v_pu) == pytest.approx(step[f"{bus}.{phase}"], abs=5e-5), (bus, part)
    _select(page, "ieee13_none")
    page.locator("#map-run").click()
    page.get_by_role("option", name="ieee13_none").click()
    page.locator("#map-graph .gtitle", has_text="ieee13_none: voltage at").wait_for(timeout=60_000)
    assert not page.evaluate(f"() => {MAP_DATA}[0] === window.branches")


def _click_bus(page: Any, bus: str) -> None:
    """A real mouse click on ``bus``'s marker on the feeder map (its position from the plot's axes)."""
    page.locator("#map-graph").scroll_into_view_if_needed()
    x, y = page.evaluate(
        f"""() => {{ const gd = document.querySelector('#map-graph .js-plotly-plot');
            const t = gd._fullData.find(t => t.uid === 'buses');
            const j = Array.from(t.text).indexOf({bus!r});
            const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, r = gd.getBoundingClientRect();
            return [r.x + xa._offset + xa.l2p(t.x[j]), r.y + ya._offset + ya.l2p(t.y[j])]; }}"""
    )
    page.mouse.click(x, y)


def test_a_bus_clicked_on_the_map_shows_its_voltage_over_the_run(page: Any, runs_dir: Path) -> None:
    import pandas as pd

    _select(page, "ieee13_ofo")
    _at(page, "0.1")
    page.wait_for_selector("#map-graph .scatterlayer .point", timeout=60_000)
    _click_bus(page, "675")
    title = page.locator("#bus-graph .gtitle")
    title.filter(has_text="bus 675").wait_for(timeout=60_000)
    from openg2g.app.data import RunStore

    run = RunStore(runs_dir).get("ieee13_ofo")
    rows = pd.read_parquet(runs_dir / "ieee13_ofo" / "grid_voltages")
    mine = rows[rows["bus_phase"].astype(str).str.startswith("675.")]
    margin = np.fmin(mine["v_pu"] - run.v_min_pu, run.v_max_pu - mine["v_pu"]).to_numpy()
    steps, beyond = mine["t_s"].nunique(), mine["t_s"][margin < 0].nunique()
    worst = mine.iloc[int(np.argmin(margin))]
    counted = f"beyond a limit at {beyond:,} of {steps:,}" if beyond else f"inside the limits at all {steps:,}"
    assert title.text_content().startswith(f"bus 675: {counted} grid steps")
    assert title.text_content().endswith(f"worst {worst['bus_phase']} {worst['v_pu']:.4f} pu at t = {worst['t_s']:g} s")
    names = page.evaluate("() => document.querySelector('#bus-graph .js-plotly-plot').data.map(t => t.name)")
    assert names == ["phase a", "phase b", "phase c"]
    bus_cursor = _cursor("bus-graph")
    page.wait_for_function(f"{bus_cursor} === 0.1", timeout=60_000)
    page.click("#step-next")
    page.wait_for_function(f"{bus_cursor} === 0.2", timeout=60_000)  # the cursor follows the slider
    _shot(page.locator("#bus-graph"), "bus")


def test_playback_at_ten_times_real_time(page: Any) -> None:
    """At 10x each frame (0.7 s) moves 7 s of the 20 s run: 0.1, 7.1, 14.1, the last step, then
    the first again; every label seen is one of those."""
    _select(page, "ieee13_ofo")
    _at(page, "0.1")
    page.evaluate(
        """() => { window.seen = new Set();
        new MutationObserver(() => window.seen.add(document.querySelector('#time-label').innerText))
            .observe(document.querySelector('#time-label'), {subtree: true, childList: true, characterData: true}); }"""
    )
    page.locator("#play-speed").click()
    page.get_by_text("10x", exact=True).click()
    page.click("#play")
    page.wait_for_function("window.seen.has('t = 14.1 s')", timeout=60_000)
    page.click("#play")  # pause
    seen = set(page.evaluate("() => Array.from(window.seen)"))
    assert {"t = 7.1 s", "t = 14.1 s"} <= seen <= {f"t = {t} s" for t in ("0.1", "7.1", "14.1", "20")}, seen


def test_a_link_opens_the_run_at_its_time_and_follows_the_view(browser: Any, server: str) -> None:
    with _open(browser, f"{server}/?run=ieee13_ofo&t=12.34") as page:
        _at(page, "12.3")  # the grid step nearest to the link's time
        page.wait_for_function(f"Math.abs({CURSOR_X} - 12.3) < 1e-9", timeout=60_000)  # and the panels' cursor
        assert _row(page, "ieee13_ofo").locator("input[type=checkbox]").is_checked()
        page.click("#step-next")
        _at(page, "12.4")
        page.wait_for_function(f"Math.abs({CURSOR_X} - 12.4) < 1e-9", timeout=60_000)
        page.wait_for_function("window.location.search === '?run=ieee13_ofo&t=12.4'", timeout=60_000)
        assert page.locator("#view-link").get_attribute("href") == "?run=ieee13_ofo&t=12.4"
    with _open(browser, f"{server}/?run=no_such_run&t=3") as page:
        message = page.locator("#link-message")
        message.filter(has_text="no run folder").wait_for(timeout=60_000)
        assert message.inner_text() == "the link's no run folder 'no_such_run' in the runs view"
    with _open(browser, f"{server}/?run=ieee13_ofo&t=soon") as page:
        page.locator("#link-message", has_text="not a number").wait_for(timeout=60_000)


@pytest.fixture(scope="module")
def tight_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The app over one 3 s ieee13 run under an upper limit of 1.02 pu, which buses near the
    substation pass, its branch loading recorded."""
    from openg2g.scenario.run import run_scenario

    root = tmp_path_factory.mktemp("tight")
    run_scenario(
        "ieee13_none",
        out_dir=root / "tight",
        overrides=["duration_s=3", "outputs.plots=false", "grid.v_max_pu=1.02", "outputs.branches=all"],
    )
    with _serve(root) as url:
        yield url, root / "tight"


def test_a_bus_beyond_a_limit_is_ringed_and_counted(browser: Any, tight_server: tuple[str, Path]) -> None:
    import pandas as pd

    url, run = tight_server
    rows = pd.read_parquet(run / "grid_voltages")
    first = rows[rows["t_s"] == rows["t_s"].min()]
    beyond = first[(first["v_pu"] > 1.02) | (first["v_pu"] < 0.95)]
    buses = sorted({bp.rsplit(".", 1)[0] for bp in beyond["bus_phase"]})
    assert len(buses) >= 2, "the case must put buses beyond the limit"
    with _open(browser, url) as page:
        _select(page, "tight")
        page.wait_for_selector("#map-graph .scatterlayer .point", timeout=60_000)
        legend = page.locator("#map-graph .legendtext", has_text="beyond a limit")
        assert legend.text_content() == f"beyond a limit ({len(buses)} buses)"
        ringed = page.evaluate(
            """() => document.querySelector('#map-graph .js-plotly-plot').data
                .find(t => (t.name || '').startsWith('beyond a limit')).text"""
        )
        assert sorted(ringed) == buses
        _shot(page.locator("section", has=page.locator("#map-graph")), "limits")


def test_the_map_draws_each_branch_in_its_loading_band(browser: Any, tight_server: tuple[str, Path]) -> None:
    """The bands' counts and the most loaded branch, from the first step's grid_branches rows
    (a branch's most loaded terminal and phase; the regulator bank's three phases are one branch)."""
    import pandas as pd

    from openg2g.app.views import LOADING_BINS

    url, run = tight_server
    rows = pd.read_parquet(run / "grid_branches")
    first = rows[rows["t_s"] == rows["t_s"].min()].assign(branch=lambda r: r["branch"].astype(str))
    assert first[first["branch"] == "line.650632"]["rating_default"].all()
    first = first.assign(branch=first["branch"].str.replace(r"^transformer\.reg1[abc]$", "regulator.reg1", regex=True))
    most = first.groupby("branch")["loading_pct"].max()
    expected = {}
    for low, high, _, _ in LOADING_BINS:
        n = int(((most >= low) & (most < high)).sum())
        if n:
            label = f"over {low:g} %" if high == float("inf") else f"{low:g}-{high:g} %"
            expected[f"loading {label} ({n})"] = n
    assert sum(expected.values()) == len(most) == 15  # every ieee13 branch on the map
    with _open(browser, url) as page:
        _select(page, "tight")
        page.wait_for_selector("#map-graph .scatterlayer .point", timeout=60_000)
        shown = page.locator("#map-graph .legendtext", has_text="loading").all_text_contents()
        assert sorted(shown) == sorted(expected)
        top = page.locator("#loaded-items li").first.inner_text()
        assert top == f"{most.idxmax()} (rg60 - 632): {most.max():.1f} % of the default rating"  # 400 A
        _shot(page.locator("section", has=page.locator("#map-graph")), "loading")


SERIES_END = """() => { const t = document.querySelector('#series-graph .js-plotly-plot')._fullData[0];
    return t && t.x && t.x.length ? Math.max(...Array.from(t.x)) : 0; }"""
SLIDER_END = "() => Number(document.querySelector('#time-slider [role=slider]').getAttribute('aria-valuemax'))"


def test_a_running_run_is_followed_once_ticked(browser: Any, tmp_path: Path) -> None:
    """A real run writing its tables (every 900 s simulated) while the page shows it: its panels
    and the slider grow with it, without ticking it again."""
    import json
    import subprocess
    import sys
    import time

    run = tmp_path / "live"
    cmd = [sys.executable, "-m", "openg2g", "run", "ieee13_ofo", "--out", str(run), "--no-progress"]
    cmd += ["--set", "duration_s=14400", "--set", "outputs.plots=false", "--set", "outputs.flush_every_s=900"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (run / "grid").is_dir() or not any((run / "grid").glob("part-*.parquet")):
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not write its first part"
            time.sleep(0.2)
        with _serve(tmp_path) as url, _open(browser, url) as page:
            _select(page, "live")
            page.wait_for_function(f"({SERIES_END})() > 0", timeout=60_000)
            first, slider = page.evaluate(SERIES_END), page.evaluate(SLIDER_END)
            page.wait_for_function(f"({SERIES_END})() > {first} + 900", timeout=120_000)
            page.wait_for_function(f"({SLIDER_END})() > {slider}", timeout=60_000)
            assert json.loads((run / "summary.json").read_text())["status"] in ("running", "complete")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_the_guided_tour_visits_each_view_in_turn(page: Any) -> None:
    from openg2g.app.tour import TOUR

    dialog = page.get_by_role("dialog", name="guided tour")
    assert not dialog.is_visible()
    page.click("#tour-start")
    for k, stop in enumerate(TOUR):
        page.locator("#tour-title", has_text=f"{k + 1} of {len(TOUR)}: {stop.title}").wait_for(timeout=60_000)
        assert dialog.is_visible()
        page.wait_for_function(f"document.getElementById('{stop.section}').classList.contains('tour-here')")
        assert page.locator(".tour-here").count() == 1  # only the view the tour is at
        if k == 2:
            _shot(page.locator("#tour"), "tour")
        page.click("#tour-next")
    dialog.wait_for(state="hidden", timeout=60_000)
    assert page.locator(".tour-here").count() == 0


def test_compare_two_runs(page: Any) -> None:
    _select(page, "ieee13_none")
    _select(page, "ieee13_ofo")
    page.wait_for_selector("#compare-rows", timeout=60_000)
    text = page.locator("#compare-rows").inner_text()
    assert "ieee13_none (baseline)" in text and "ieee13_ofo" in text
    assert page.locator("#compare-graph .scatterlayer .trace").count() >= 2
    assert _not_blank(page.locator("#compare-graph").screenshot())
    _shot(page.locator("section", has=page.locator("#compare-graph")), "compare")


def test_a_what_if_with_a_bad_bus_then_a_good_one(page: Any, runs_dir: Path) -> None:
    page.wait_for_function("document.querySelector('#wi-bus').value === '671'", timeout=60_000)
    page.fill("#wi-bus", "999")
    page.fill("#wi-duration", "2")
    page.locator("#wi-duration").press("Tab")
    page.click("#wi-run")
    page.wait_for_function(
        "document.querySelector('#wi-errors').innerText.includes('datacenters.0.bus')", timeout=60_000
    )
    assert "999" in page.locator("#wi-errors").inner_text()
    _shot(page.locator("section", has=page.locator("#wi-run")), "whatif")
    page.fill("#wi-bus", "675")
    page.locator("#wi-bus").press("Tab")
    page.click("#wi-run")
    page.wait_for_function("document.querySelector('#wi-status').innerText.startsWith('queued as')", timeout=60_000)
    assert page.locator("#wi-errors").inner_text() == ""  # news, not an error: not in the red message line
    assert page.evaluate("getComputedStyle(document.querySelector('#wi-status')).color") != "rgb(179, 0, 0)"
    page.wait_for_selector("#wi-job-items .job-complete", timeout=240_000)
    row = page.locator("#runs-table tr", has_text="whatif/ieee13_none-001")
    row.wait_for(timeout=30_000)
    assert "complete" in row.inner_text()
    summary = (runs_dir / "whatif" / "ieee13_none-001" / "summary.json").read_text()
    assert '"duration_s": 2.0' in summary
    page.locator("#wi-job-items .job-complete button", has_text="open").click()  # the finished run's link
    page.wait_for_selector("#map-graph .scatterlayer .point", timeout=60_000)
    assert "whatif/ieee13_none-001" in page.locator("#map-run").inner_text()
    assert "datacenter 675" in page.locator("#map-graph .legend").text_content()


def test_a_training_job_ending_before_it_starts_is_shown_inline(page: Any) -> None:
    page.wait_for_function("document.querySelector('#wi-training-start').value === '1000'", timeout=60_000)
    assert page.locator("#wi-training input[type=checkbox]").is_checked()  # ieee13_none has a job
    page.fill("#wi-training-start", "300")
    page.fill("#wi-training-end", "100")
    page.locator("#wi-training-end").press("Tab")
    page.click("#wi-run")
    page.wait_for_function(
        "document.querySelector('#wi-errors').innerText.includes('datacenters.0.training')", timeout=60_000
    )
    assert "end_s (100.0) must be after start_s (300.0)" in page.locator("#wi-errors").inner_text()
    assert "queued" not in page.locator("#wi-errors").inner_text()


def test_the_tap_mode_reaches_the_downloaded_scenario(page: Any) -> None:
    page.wait_for_function("document.querySelector('#wi-bus').value === '671'", timeout=60_000)
    page.click("#wi-taps")
    options = page.locator(".dash-dropdown-option")  # the open list, drawn outside the dropdown
    options.first.wait_for(timeout=30_000)
    assert options.all_inner_texts() == ["(as in the scenario)", "fixed", "scheduled", "auto"]
    # the list is drawn where the dropdown was when it opened; a page still laying out under load
    # can leave it below the viewport, where a pointer cannot reach it: the click goes to the option
    options.filter(has_text="auto").dispatch_event("click")
    with page.expect_download(timeout=60_000) as download:
        page.click("#wi-download")
    text = Path(download.value.path()).read_text()
    import yaml

    scenario = yaml.safe_load(text)
    assert scenario["grid"]["regulators"]["reg1"]["mode"] == "auto"
    assert [e["command"] for e in scenario["events"]] == ["set_inference_scale"]


def test_the_hosting_capacity_view(studies_page: Any) -> None:
    page = studies_page
    page.wait_for_selector("#hc-map .scatterlayer .point", timeout=60_000)
    assert page.locator("#hc-map .gtitle").text_content() == (
        "hosting: hosting capacity with controller none (MW peak)"
    )
    assert "infeasible" in page.locator("#hc-map .legend").text_content()
    # the feeder without the site is over-voltage already (conftest's HOSTING_ARGS): said as the CLI says it
    assert "the feeder without the site already breaks overvoltage" in page.locator("#hc-message").inner_text()
    rows = {r.split("\t")[0]: r.split("\t") for r in page.locator("#hc-table tbody tr").all_inner_texts()[1:]}
    assert rows["634"][1] == "infeasible" and rows["634"][2] == ""  # no MW where none is hosted
    assert rows["675"][1] == "hosted" and float(rows["675"][2]) > 0
    _shot(page.locator("#hosting"), "hosting")


def test_the_siting_view(browser: Any, siting_server: str, siting_dir: Path) -> None:
    import pandas as pd

    table = pd.read_parquet(siting_dir / "siting" / "siting.parquet").sort_values("rank")
    with _open(browser, siting_server) as page:
        page.wait_for_selector("#st-map .scatterlayer .point", timeout=60_000)
        assert page.locator("#st-map .gtitle").text_content() == (
            "siting: siting with controller none (violation integral, pu.s)"
        )
        first = table.iloc[0]
        best = ", ".join(b for b in (first["bus_a"], first["bus_b"]) if isinstance(b, str))
        assert "best placement" in page.locator("#st-map .legend").text_content()
        assert best in page.locator("#st-map .legend").text_content()
        rows = [r.split("\t") for r in page.locator("#st-table tbody tr").all_inner_texts()[1:]]
        assert [(r[0], r[1]) for r in rows] == [(str(k), p) for k, p in zip(table["rank"], table["placement"])]
        _shot(page.locator("#siting"), "siting")


def test_the_load_loss_view(browser: Any, load_loss_dir: Path) -> None:
    """The study's settings in the bars and the table as its load_loss.parquet holds them."""
    import pandas as pd

    table = pd.read_parquet(load_loss_dir / "ll" / "load_loss.parquet")
    with _serve(load_loss_dir) as url, _open(browser, url) as page:
        page.wait_for_selector("#ll-bars .scatterlayer, #ll-bars .barlayer .trace", timeout=60_000)
        bars = page.evaluate(
            "() => document.querySelector('#ll-bars .js-plotly-plot').data.find(t => t.name === 'lost at once').y"
        )
        assert list(bars) == table["load_lost_mw"].tolist()
        rows = [r.split("\t") for r in page.locator("#ll-table tbody tr").all_inner_texts()[1:]]
        assert [r[0] for r in rows] == ["whole", "half", "stays"]
        _shot(page.locator("#load-loss"), "load-loss")


def test_the_leaderboard_sorts_and_opens_a_run(studies_page: Any) -> None:
    page = studies_page
    page.wait_for_selector("#lb-table tbody td", timeout=60_000)
    ranks = "Array.from(document.querySelectorAll('#lb-table tbody tr td:first-child')).map(c => c.innerText)"
    page.wait_for_function(f"JSON.stringify({ranks}) === JSON.stringify(['1', '2', '=3', '=3'])", timeout=30_000)
    _shot(page.locator("#leaderboard"), "leaderboard")
    page.locator("#lb-table th .column-header--sort").first.click()  # rank, ascending: as the file
    page.locator("#lb-table th .column-header--sort").first.click()  # descending
    page.wait_for_function(f"JSON.stringify({ranks}) === JSON.stringify(['=3', '=3', '2', '1'])", timeout=30_000)
    page.locator("#lb-cases a", has_text="bench/runs/t13-v0-pid").click()
    page.wait_for_function(
        "document.querySelector('#map-run').innerText.includes('bench/runs/t13-v0-pid')", timeout=60_000
    )
    page.wait_for_selector("#series-graph .scatterlayer .trace", timeout=60_000)


SERIES_GD = "document.querySelector('#series-graph .js-plotly-plot')"

MISLABELLED_COMMANDS = f"""() => {{
    const gd = {SERIES_GD};
    const wrong = [];
    for (const trace of gd._fullData) {{
        if (trace.mode !== 'markers') continue;
        const axis = gd._fullLayout['yaxis' + trace.yaxis.slice(1)];
        for (let i = 0; i < trace.text.length; i++) {{
            const label = axis.ticktext[axis.tickvals.indexOf(trace.y[i])];
            if (label !== trace.text[i]) wrong.push(trace.name + ': ' + trace.text[i] + ' drawn as ' + label);
        }}
    }}
    return wrong;
}}"""


def _runs_drawn(page: Any, *run_ids: str) -> None:
    """Wait until the time series draw a line of each of ``run_ids`` (named ``<run>: <line>``)."""
    drawn = " && ".join(f"{SERIES_GD}._fullData.some(t => t.name.startsWith('{r}: '))" for r in run_ids)
    page.wait_for_function(f"{SERIES_GD} && {SERIES_GD}._fullData && {drawn}", timeout=60_000)


def test_two_runs_name_each_command_by_its_own_actuator(browser: Any, commands_server: str) -> None:
    with _open(browser, commands_server) as page:
        _select(page, "ieee13_taps")  # its tap change first: the commands axis once took only its names
        _select(page, "ieee13_ofo")
        _runs_drawn(page, "ieee13_taps", "ieee13_ofo")
        markers = page.evaluate(f"{SERIES_GD}._fullData.filter(t => t.mode === 'markers').map(t => t.name)")
        assert {"ieee13_taps: event", "ieee13_ofo: ofo"} <= set(markers)
        assert page.evaluate(MISLABELLED_COMMANDS) == []


MODEL_COLORS = f"""() => {{
    const gd = {SERIES_GD};
    const panel = {{}};
    gd._fullLayout._subplots.yaxis.forEach((id, k) => {{ panel[id] = gd._fullLayout['yaxis' + (k ? k + 1 : '')].title.text; }});
    const lines = gd._fullData.filter(t => t.name.startsWith('dc1/')).map(t => [panel[t.yaxis], t.name, t.line.color]);
    const deadlines = gd._fullLayout.shapes.filter(s => (s.name || '').startsWith('deadline '))
        .map(s => [s.name.slice(9), s.line.color, s.line.dash]);
    return {{lines, deadlines}};
}}"""


def test_every_line_is_named_and_each_model_keeps_its_colour(page: Any) -> None:
    _select(page, "ieee13_ofo")
    page.wait_for_selector("#series-graph .legend .traces", timeout=60_000)
    drawn = page.evaluate(MODEL_COLORS)
    colors: dict[str, set[str]] = {}
    for _panel, model, color in drawn["lines"]:
        colors.setdefault(model, set()).add(color)
    assert len(colors) == 5 and len({p for p, _, _ in drawn["lines"]}) == 3  # five models in three panels
    assert all(len(c) == 1 for c in colors.values()), colors  # one colour per model across the panels
    assert len({next(iter(c)) for c in colors.values()}) == 5  # and no two models alike
    assert sorted(m for m, _, _ in drawn["deadlines"]) == sorted(colors)
    for model, color, dash in drawn["deadlines"]:
        assert dash == "dash" and {color} == colors[model]  # each deadline dashed in its model's colour
    legends = page.locator("#series-graph .infolayer > g[class^=legend]")  # legend, legend2...
    assert legends.count() == page.evaluate(f"{SERIES_GD}._fullLayout._subplots.yaxis.length")  # one per panel
    text = " ".join(legends.all_text_contents())
    assert all(model in text for model in colors) and "lowest bus-phase" in text
    # the margins are fixed (drawn once): every legend entry and row name fits inside the figure
    assert page.evaluate(LABELS_OUTSIDE) == []
    _shot(page.locator("section", has=page.locator("#series-graph")), "series")


LABELS_OUTSIDE = f"""() => {{
    const figure = {SERIES_GD}.querySelector('.main-svg').getBoundingClientRect();
    return [...{SERIES_GD}.querySelectorAll('.legendtext, .ytick text')]
        .filter(t => {{ const b = t.getBoundingClientRect(); return b.left < figure.left || b.right > figure.right; }})
        .map(t => t.textContent);
}}"""
"""The legend entries and tick labels of the time panels that reach past the figure's edges."""

COUNT_DRAWS = f"() => {{ window.draws = 0; {SERIES_GD}.on('plotly_afterplot', () => window.draws++); }}"


def test_a_redraw_at_the_drawn_size_is_skipped_and_a_new_width_drawn(page: Any) -> None:
    _select(page, "ieee13_ofo")
    page.wait_for_selector("#series-graph .legend .traces", timeout=60_000)
    page.evaluate(COUNT_DRAWS)
    width = page.evaluate(f"{SERIES_GD}._fullLayout.width")
    # what Dash's graph asks whenever its box changes size (a new figure of another height does)
    page.evaluate(f"Plotly.Plots.resize({SERIES_GD})")
    page.wait_for_timeout(500)  # plotly's own resize waits 100 ms before it draws
    assert page.evaluate("window.draws") == 0
    page.set_viewport_size({"width": 900, "height": 1000})
    page.wait_for_function(f"{SERIES_GD}._fullLayout.width < {width}", timeout=60_000)
    assert page.evaluate("window.draws") >= 1
    assert page.evaluate(LABELS_OUTSIDE) == []


def test_compare_keeps_each_run_in_one_colour(page: Any) -> None:
    _select(page, "ieee13_none")
    _select(page, "ieee13_ofo")
    page.wait_for_selector("#compare-rows", timeout=60_000)
    page.wait_for_function(
        "document.querySelector('#compare-graph .js-plotly-plot')._fullData.length >= 4", timeout=60_000
    )
    traces = page.evaluate(
        "document.querySelector('#compare-graph .js-plotly-plot')._fullData.map(t => [t.legendgroup, t.line.color])"
    )
    colors: dict[str, set[str]] = {}
    for run_id, color in traces:
        colors.setdefault(run_id, set()).add(color)
    assert set(colors) == {"ieee13_none", "ieee13_ofo"}
    assert all(len(c) == 1 for c in colors.values()), colors


def test_a_failed_run_shows_its_status_and_reason(browser: Any, failed_server: str) -> None:
    with _open(browser, failed_server) as page:
        headers = page.locator("#runs-table th.dash-header").all_inner_texts()
        cells = _row(page, "collapsed").locator("td").all_inner_texts()
        row = dict(zip(reversed(headers), reversed(cells)))  # from the right: the first cell is the tick box
        assert row["status"] == "failed" and row["progress"] == "failed"  # not 100 %
        assert row["voltage violation integral (pu·s)"] == ""  # not 0 over the 0.1 s it ran
        assert row["why it ended early"] == COLLAPSE


def test_an_empty_folder_says_how_to_make_a_run(browser: Any, empty_server: str) -> None:
    page = browser.new_page()
    page.goto(empty_server)
    hint = "document.querySelector('#runs-hint')"
    page.wait_for_function(f"{hint} && {hint}.innerText.includes('openg2g run')", timeout=60_000)
    assert "openg2g run ieee13_ofo --out" in page.locator("#runs-hint").inner_text()
    page.close()


def test_the_filter_keeps_the_runs_that_match(page: Any) -> None:
    assert _row(page, "ieee13_none").count() == 1
    box = page.locator("#runs-table th.dash-filter[data-dash-column=run] input[type=text]")
    box.fill("OFO")
    box.press("Enter")
    page.wait_for_function(
        "!Array.from(document.querySelectorAll('#runs-table tbody tr')).some(r => r.innerText.includes('ieee13_none'))",
        timeout=30_000,
    )
    assert _row(page, "ieee13_ofo").count() == 1


UNNAMED = """() => Array.from(document.querySelectorAll("input[type=checkbox], [role=slider], #time-slider input"))
    .filter(el => !(el.getAttribute("aria-label") || el.getAttribute("aria-labelledby") || el.closest("label")
        || (el.id && document.querySelector(`label[for="${el.id}"]`))))
    .map(el => el.outerHTML.slice(0, 120))"""


def test_the_page_names_its_language_and_every_box_and_slider(page: Any) -> None:
    assert page.evaluate("document.documentElement.lang") == "en"
    _select(page, "ieee13_ofo")
    page.wait_for_selector("#map-graph .scatterlayer .point", timeout=60_000)
    page.wait_for_function(f"({UNNAMED})().length === 0", timeout=10_000)
    box = _row(page, "ieee13_ofo").locator("input[type=checkbox]")
    assert box.get_attribute("aria-label") == "select run ieee13_ofo"


def test_the_page_fits_a_phone(browser: Any, server: str) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(server)
    page.wait_for_selector("#runs-table td", timeout=60_000)
    _select(page, "ieee13_ofo")
    page.wait_for_selector("#map-graph .scatterlayer .point", timeout=60_000)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px screen"
    page.close()


def test_comparing_runs_of_other_lengths_warns(browser: Any, commands_server: str) -> None:
    with _open(browser, commands_server) as page:
        _select(page, "ieee13_ofo")  # 20 s, the baseline: the first ticked
        _select(page, "ieee13_taps")  # 5 s
        page.wait_for_selector("#compare-rows", timeout=60_000)
        warning = page.locator("#compare-message")
        warning.filter(has_text="another length").wait_for(timeout=30_000)
        assert "ieee13_none 5 s" in warning.inner_text()  # the tap run, labelled by its scenario
        row = page.locator("#compare-rows tr", has_text="ieee13_none").inner_text()
        assert "%" not in row  # no change read from the length

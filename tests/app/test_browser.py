"""The app in a real browser: headless Chromium (Debian's package, driven by Playwright) against
the app served on a free port of 127.0.0.1. Skipped, saying why, where either is missing."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def server(runs_dir: Path) -> Iterator[str]:
    from werkzeug.serving import make_server

    from openg2g.app import create_app

    app, queue = create_app(runs_dir)
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


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1300, "height": 1800})
    hosts: set[str] = set()
    page.on("request", lambda r: hosts.add(r.url.split("/")[2]))
    page.goto(server)
    page.wait_for_selector("#runs-table td", timeout=60_000)
    yield page
    assert hosts <= {server.split("/")[2]}, f"requests left the app: {hosts}"  # no CDN, no version check
    page.close()


def _select(page: Any, run_id: str) -> None:
    row = page.locator("#runs-table tr", has_text=run_id)
    row.locator("input[type=checkbox]").check()


def _not_blank(png: bytes) -> bool:
    import io

    from matplotlib.image import imread

    pixels = imread(io.BytesIO(png), format="png")
    return bool(np.std(pixels[..., :3]) > 0.05)


CURSOR_X = "document.querySelector('#series-graph .js-plotly-plot').layout.shapes[0].x0"


def test_open_a_run_and_move_the_slider(page: Any, tmp_path: Path) -> None:
    _select(page, "ieee13_ofo")
    page.wait_for_selector("#map-graph .scatterlayer .point", timeout=60_000)
    page.wait_for_function(f"{CURSOR_X} === 0.1", timeout=60_000)
    title = page.locator("#map-graph .gtitle")
    assert title.text_content() == "ieee13_ofo: voltage at t = 0.1 s"
    before = page.locator("#map-graph .scatterlayer").inner_html()
    assert _not_blank(page.screenshot(full_page=True))
    # type a step index into the slider's own input: step 150 is t = 15.1 s
    box = page.locator("#time-slider input")
    box.fill("150")
    box.press("Tab")  # the slider takes a typed value when the box loses focus
    page.wait_for_function("document.querySelector('#time-label').innerText === 't = 15.1 s'", timeout=60_000)
    page.wait_for_function(f"{CURSOR_X} === 15.1", timeout=60_000)
    assert title.text_content() == "ieee13_ofo: voltage at t = 15.1 s"
    assert page.locator("#map-graph .scatterlayer").inner_html() != before  # colours changed with the voltages
    assert page.locator("#worst-items li").count() == 8
    assert page.locator("#profile-graph .gtitle").text_content() == "voltage profile at t = 15.1 s"


def test_compare_two_runs(page: Any) -> None:
    _select(page, "ieee13_none")
    _select(page, "ieee13_ofo")
    page.wait_for_selector("#compare-rows", timeout=60_000)
    text = page.locator("#compare-rows").inner_text()
    assert "ieee13_none (baseline)" in text and "ieee13_ofo" in text
    assert page.locator("#compare-graph .scatterlayer .trace").count() >= 2
    assert _not_blank(page.locator("#compare-graph").screenshot())


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
    page.fill("#wi-bus", "675")
    page.locator("#wi-bus").press("Tab")
    page.click("#wi-run")
    page.wait_for_function("document.querySelector('#wi-errors').innerText.startsWith('queued as')", timeout=60_000)
    page.wait_for_selector("#wi-job-items .job-complete", timeout=240_000)
    row = page.locator("#runs-table tr", has_text="whatif/ieee13_none-001")
    row.wait_for(timeout=30_000)
    assert "complete" in row.inner_text()
    summary = (runs_dir / "whatif" / "ieee13_none-001" / "summary.json").read_text()
    assert '"duration_s": 2.0' in summary
    _select(page, "whatif/ieee13_none-001")
    page.wait_for_selector("#map-graph .scatterlayer .point", timeout=60_000)
    assert "datacenter 675" in page.locator("#map-graph .legend").text_content()

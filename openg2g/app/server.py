"""The app's server: a Dash app over one runs folder, bound to this machine by default.

Dash (on Flask) serves the page, plotly.js and its own scripts from the installed packages
(``serve_locally``), so nothing is fetched from the internet, and runs with its debug mode off, so
an error never shows Python's traceback in the page. Besides Dash's own routes, ``/files/<path>``
serves a file of the runs folder (a run's ``scenario.yaml``, its PNGs); a path that leaves the
folder or names a hidden file (the output lock, the app's logs) is answered 404.
"""

from __future__ import annotations

from pathlib import Path

import dash
from flask import abort, send_from_directory
from flask.typing import ResponseReturnValue

from openg2g.app import callbacks, views
from openg2g.app.data import AppError, RunStore
from openg2g.app.whatif import RunQueue, bundled_scenarios, controller_choices

__all__ = ["create_app"]


def create_app(runs_dir: Path, allow_code: bool = False, max_running: int = 1) -> tuple[dash.Dash, RunQueue]:
    """The app over ``runs_dir`` and its what-if queue (close the queue when done with the app).

    :param runs_dir: the runs folder; the only folder the app reads from and writes into.
    :param allow_code: let what-if runs name controller files and trusted pickles.
    :param max_running: what-if runs at the same time at most.
    :raises AppError: ``runs_dir`` is not a folder.
    """
    root = Path(runs_dir).resolve()
    if not root.is_dir():
        raise AppError(f"runs folder {runs_dir} is not a folder")
    app = dash.Dash(
        __name__,
        title="openg2g",
        serve_locally=True,
        suppress_callback_exceptions=True,  # the what-if's model inputs are made by a callback
    )
    app.layout = views.page(bundled_scenarios(), controller_choices(allow_code), allow_code, str(root))
    store = RunStore(root)
    queue = RunQueue(root, max_running=max_running)
    callbacks.register(app, store, queue, allow_code)

    @app.server.route("/files/<path:rel>")
    def run_file(rel: str) -> ResponseReturnValue:
        if any(part.startswith(".") for part in Path(rel).parts):
            abort(404)
        return send_from_directory(root, rel)  # refuses a path outside root (404)

    return app, queue

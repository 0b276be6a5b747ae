"""The app's server: a Dash app over one runs folder, bound to this machine by default.

Dash (on Flask) serves the page, plotly.js and its own scripts from the installed packages
(``serve_locally``), so nothing is fetched from the internet, and runs with its debug mode off, so
an error never shows Python's traceback in the page. Besides Dash's own routes, ``/files/<path>``
serves a regular file of the runs folder (a run's ``scenario.yaml``, its PNGs), found after
resolving symbolic links: a path that leaves the folder, through ``..`` or a link pointing out, a
hidden file (the output lock, the app's logs) or anything but a regular file is answered 404
(403 for a link out) with a line saying why (not repeating the path asked for).
"""

from __future__ import annotations

from pathlib import Path

import dash
from flask import Response, send_file
from flask.typing import ResponseReturnValue

from openg2g.app import callbacks, views
from openg2g.app.data import AppError, RunStore
from openg2g.app.whatif import RunQueue, bundled_scenarios, controller_choices

__all__ = ["create_app"]


def _refused_file(root: Path, rel: str) -> tuple[int, str] | None:
    """The status and message ``/files/<rel>`` is answered with when it is not served, None for
    a regular file of ``root`` (resolved).

    Flask's ``send_from_directory`` refuses ``..`` but follows a symbolic link anywhere, so the
    path is resolved here and must stay inside ``root``; a link to a hidden file is refused too.
    """
    if "\x00" in rel or Path(rel).is_absolute() or ".." in Path(rel).parts:
        return 404, "not a file of the runs folder (a path leaving it)"
    path = (root / rel).resolve()
    if not path.is_relative_to(root):
        return 403, "a symbolic link out of the runs folder: not served"
    if any(part.startswith(".") for part in (*Path(rel).parts, *path.relative_to(root).parts)):
        return 404, "a hidden file: not served"
    if not path.is_file():
        return 404, "no such file in the runs folder"
    return None


def create_app(
    runs_dir: Path, allow_code: bool = False, max_running: int = 1, max_queued: int = 8
) -> tuple[dash.Dash, RunQueue]:
    """The app over ``runs_dir`` and its what-if queue (close the queue when done with the app).

    :param runs_dir: the runs folder; the only folder the app reads from and writes into.
    :param allow_code: let what-if runs name controller files and trusted pickles, and read the
        pickle nets runs name (a run folder's own ``grid.trust_pickle`` is never taken).
    :param max_running: what-if runs at the same time at most.
    :param max_queued: what-if runs waiting to start at most; one more is refused as the queue full.
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
    app.index_string = views.INDEX
    app.layout = views.page(bundled_scenarios(), controller_choices(allow_code), allow_code, str(root))
    store = RunStore(root, trust_pickle=allow_code)
    queue = RunQueue(root, max_running=max_running, max_queued=max_queued)
    callbacks.register(app, store, queue, allow_code)

    @app.server.route("/files/<path:rel>")
    def run_file(rel: str) -> ResponseReturnValue:
        refused = _refused_file(root, rel)
        if refused is not None:
            status, text = refused
            return Response(text + "\n", status=status, mimetype="text/plain")
        return send_file((root / rel).resolve())

    return app, queue

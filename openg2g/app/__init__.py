"""``openg2g app``: a local web app over a folder of runs (Dash; ``pip install openg2g-cosim[app]``).

- :mod:`~openg2g.app.data`: the runs under the folder and what each view shows, read from the run
  tables by :mod:`openg2g.plot`'s functions and thinned for the browser;
- :mod:`~openg2g.app.views`: the page and its plotly figures;
- :mod:`~openg2g.app.callbacks`: what the page does when the user acts;
- :mod:`~openg2g.app.whatif`: what-if runs: the form, its validation and the run queue;
- :mod:`~openg2g.app.server`: the Dash app over one runs folder.
"""

from openg2g.app.server import create_app

__all__ = ["create_app"]

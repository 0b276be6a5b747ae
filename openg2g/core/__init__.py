"""Core types shared by every component, one concept per module.

- :mod:`openg2g.core.commands`: the typed commands controllers and events send;
- :mod:`openg2g.core.state`: what components report and controllers observe;
- :mod:`openg2g.core.interfaces`: the datacenter, grid and controller interfaces;
- :mod:`openg2g.core.errors`: the error hierarchy;
- :mod:`openg2g.core.atomic`: whole-file writes through a temporary file and a rename;
- :mod:`openg2g.core.folder_lock`: an output folder's lock file and whether a live process holds it;
- :mod:`openg2g.core.paths`: where bundled data lives;
- :mod:`openg2g.core.progress`: progress bars, on a terminal only.
"""

__all__: list[str] = []

"""Suite-wide collection rule: the tests of a module that share a module-scoped fixture run on one
pytest-xdist worker.

``--dist loadgroup`` (pyproject's ``addopts``) hands out tests one by one, except those of one
``xdist_group``, which go to one worker together. A module-scoped fixture is built once per
worker that runs a test using it, so without a group a fixture that runs a benchmark, a batch of
simulations or a training is built twice under ``-n 2``. The group is added here, from the
fixtures each test uses, so a new module-scoped fixture needs no marker of its own; a module that
names its group itself keeps it.
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        # pytest keeps a test's resolved fixture definitions here; no public accessor gives scopes
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if item.get_closest_marker("xdist_group") is not None:
            continue  # a module's own group (tests/studies: the Ray clusters, one at a time) stands
        if any(defs[-1].scope == "module" for defs in info.name2fixturedefs.values()):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))

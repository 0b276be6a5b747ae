"""The API reference (``docs/api/``, built by ``mkdocs build``) documents every public module.

Each page ``docs/api/NAME.md`` holds one ``::: module`` directive per public module of
``openg2g.NAME`` (none of its dotted parts starts with ``_``), the package first, so that a module
added to a package is added to its page. The build itself (``--strict``, in ``.ci/run``) checks that
each directive names a module and that every page is in ``mkdocs.yml``'s nav.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs" / "api").glob("*.md"))
PACKAGES = ("core", "engine", "record", "datacenter", "grid", "control", "scenario", "envs", "sweep", "studies", "plot")
DIRECTIVE = re.compile(r"^::: (\S+)$", re.MULTILINE)


def public_modules(package: str) -> list[str]:
    top = ROOT.joinpath(*package.split("."))
    found = []
    for path in top.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            found.append(".".join(parts))
    return sorted(found)


def test_the_reference_has_the_public_packages():
    assert {page.stem for page in PAGES} >= set(PACKAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.stem)
def test_a_page_documents_each_public_module_of_its_package(page):
    package = f"openg2g.{page.stem}"
    named = DIRECTIVE.findall(page.read_text())
    assert named[0] == package, f"{page.relative_to(ROOT)} starts with {named[0]}, not the package"
    missing = sorted(set(public_modules(package)) - set(named))
    extra = sorted(set(named) - set(public_modules(package)))
    assert not missing and not extra and len(named) == len(set(named)), (
        f"{page.relative_to(ROOT)}: missing {missing}, not public modules of {package}: {extra}"
    )

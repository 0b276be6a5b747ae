"""MkDocs hook: a link from a page out of ``docs/`` (to the README, a notebook) names a file of the
repository, which the site does not hold. On GitHub and in a clone the link works, so the pages keep
it; the site shows the text with the file's path instead, and a link to a file that is missing is a
warning (an error under ``--strict``), as a broken link between pages is."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.plugins import get_plugin_logger

log = get_plugin_logger(__name__)
LINK = re.compile(r"\[(?P<text>[^\]]+)\]\((?P<target>\.\./[^)#\s]+)(?P<anchor>#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = Path(config["docs_dir"]).resolve()
    here = (docs / page.file.src_uri).parent

    def shown(match: re.Match[str]) -> str:
        target = (here / match["target"]).resolve()
        if target.is_relative_to(docs):
            return match[0]  # a page of the site: MkDocs checks the link itself
        if not target.exists():
            log.warning(f"{page.file.src_uri}: the link to {match['target']} names no file of the repository")
        return f"{match['text']} (`{target.relative_to(docs.parent)}`)"

    return LINK.sub(shown, markdown)

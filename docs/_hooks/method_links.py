"""MkDocs hook: the code cites the method page as `docs/method.md#<section>` (plain text, readable
in an editor); on the site's API pages those citations become links to the section."""

from __future__ import annotations

import re
from typing import Any

CITATION = re.compile(r"docs/method\.md#([a-z0-9-]+)")


def on_page_content(html: str, page: Any, **_: Any) -> str:
    """Link each citation on an API reference page (`tests/test_docs.py` checks the anchors)."""
    if not page.file.src_uri.startswith("api/"):
        return html
    return CITATION.sub(r'<a href="../../method/#\1">docs/method.md#\1</a>', html)

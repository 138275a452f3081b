"""A page's content for its record, when the crawl asks for it (the `content` setting): the
main content as text and as markdown (trafilatura, the best-rated main-content extractor in
the published evaluations; Apache-2.0), the decoded page, and the metadata a page states
(language, description, author, published date). Nothing runs when the setting is empty."""

from __future__ import annotations

import json

import trafilatura
from parsel import Selector

_METADATA = {"language": None, "description": None, "author": None, "published": None}
# Our names of the metadata, and trafilatura's keys of them in its JSON output.
_METADATA_KEYS = {
    "language": "language",
    "description": "excerpt",
    "author": "author",
    "published": "date",
}


def page_content(html: str, sel: Selector, url: str, kinds: list[str]) -> dict[str, str | None]:
    """The asked `kinds` of content of the HTML page `html` fetched from `url`, and its
    metadata (None where the page does not say); `sel`: the page as parsed for its links,
    whose `<html lang>` is the language (trafilatura reports one only with a detector).
    One extraction gives the text and the metadata; markdown costs a second one."""
    found: dict[str, str | None] = dict(_METADATA)
    found["language"] = sel.xpath("/html/@lang").get()
    if "html" in kinds:
        found["html"] = html
    if "text" in kinds or "markdown" in kinds:
        extracted = trafilatura.extract(
            html, url=url, output_format="json", with_metadata=True, include_comments=False
        )
        doc = json.loads(extracted) if extracted else {}
        for name, key in _METADATA_KEYS.items():
            found[name] = found[name] or doc.get(key) or None
        if "text" in kinds:
            found["text"] = doc.get("text") or None
    if "markdown" in kinds:
        found["markdown"] = trafilatura.extract(
            html, url=url, output_format="markdown", include_comments=False, include_links=True
        )
    return found

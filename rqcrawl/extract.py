"""What a crawler needs from an HTML page: its title and its links, in canonical form."""

from __future__ import annotations

from dataclasses import dataclass, field

from parsel import Selector
from w3lib.encoding import html_to_unicode

from .urls import InvalidURL, canonicalize


@dataclass
class Page:
    title: str | None
    links: list[str] = field(default_factory=list)  # canonical, unique, in page order
    bad_links: int = 0  # hrefs that are not crawlable URLs (mailto:, javascript:, malformed...)


def decode(body: bytes, content_type: str | None) -> str:
    """Body to text: HTTP charset, then BOM and <meta> charset, then a lenient fallback."""
    _, text = html_to_unicode(content_type, body)
    return text


def parse(text: str, url: str) -> Page:
    """Title and links of an HTML page fetched from `url`, honouring `<base href>`."""
    sel = Selector(text=text)
    base = url
    base_href = sel.css("base::attr(href)").get()
    if base_href:
        try:
            base = canonicalize(base_href, url)
        except InvalidURL:
            pass
    title = sel.css("title::text").get()
    page = Page(title=" ".join(title.split()) if title else None)
    seen = set()
    for href in sel.css("a::attr(href), area::attr(href)").getall():
        try:
            link = canonicalize(href, base)
        except InvalidURL:
            page.bad_links += 1
            continue
        if link not in seen:
            seen.add(link)
            page.links.append(link)
    return page

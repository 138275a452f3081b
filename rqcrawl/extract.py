"""What a crawler needs from an HTML page: its title and its links, in canonical form."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urljoin

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


# Canonical form of absolute URLs already met by this process. Pages of one site repeat most
# of their links (navigation, and in the benchmark site each URL is linked ~36 times), and
# w3lib's canonicalization is most of the cost of parsing a page (about 30 us a link).
_canonical = lru_cache(maxsize=16384)(canonicalize)


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
            link = _canonical(urljoin(base, href.strip()))
        except InvalidURL:
            page.bad_links += 1
            continue
        if link not in seen:
            seen.add(link)
            page.links.append(link)
    return page

"""What a crawler needs from an HTML page: its title, its links in canonical form (without
those marked rel="nofollow", when asked), its canonical URL, and the fields the user asked
for by CSS or XPath selector."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from cssselect import SelectorError
from parsel import Selector, SelectorList
from w3lib.encoding import html_to_unicode

from rqcrawl.parse.urls import InvalidURL, ParamFilter, canonicalize


@dataclass
class Page:
    title: str | None
    links: list[str] = field(default_factory=list)  # canonical, unique, in page order
    bad_links: int = 0  # hrefs that are not crawlable URLs (mailto:, javascript:, malformed...)
    nofollow_links: int = 0  # links only marked rel="nofollow" (when those are left out)
    canonical: str | None = None  # <link rel="canonical" href>, canonical
    selector: Selector | None = field(default=None, compare=False, repr=False)  # for fields, hook
    # What the page's relative links resolve against: its URL or its <base href> (content).
    base: str = field(default="", compare=False)


def decode(body: bytes, content_type: str | None) -> str:
    """Body to text: HTTP charset, then BOM and <meta> charset, then a lenient fallback. A
    charset that is no text encoding (`idna`, `rot13`, `unicode_escape`: a server chooses
    it) falls back to UTF-8 with replacement characters, and lone surrogates (which lxml
    refuses) are replaced: a page always decodes."""
    try:
        _, text = html_to_unicode(content_type, body)
    except (LookupError, UnicodeError, ValueError):
        text = body.decode("utf-8", errors="replace")
    return text if _surrogate_free(text) else _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_free(text: str) -> bool:
    """Whether `text` holds no surrogate: strict UTF-8 encoding refuses exactly those, and it
    runs at C speed (~10 us a 30 KB page; the regex's scan takes ~200 us)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Canonical links already met by this process, keyed by (context, href): the part of the base
# URL that resolving `href` depends on (see _contexts), and `href`. Pages of one site repeat
# most of their links (navigation, and in the benchmark site each URL is linked ~36 times),
# and joining plus w3lib's canonicalization is most of the cost of parsing a page (about
# 40 us a link); a cache hit costs under 1 us.
# An href that is no crawlable URL (mailto:, javascript:, a bad port) is cached as None: a
# site repeats those on every page too, and a refusal costs as much as a canonicalization.
@lru_cache(maxsize=16384)
def _canonical(context: str, href: str, strip: ParamFilter | None = None) -> str | None:
    try:
        return canonicalize(href, context, strip)
    except InvalidURL:
        return None


def _contexts(base: str) -> tuple[str, str, str, str]:
    """What resolving an href against `base` depends on, from least to most: the scheme (a
    network-path or absolute href), the origin (an absolute path), the directory (a relative
    path) or the whole base (an empty href, a query or a fragment)."""
    parts = urlsplit(base)
    origin = f"{parts.scheme}://{parts.netloc}"
    directory = origin + parts.path[: parts.path.rfind("/") + 1]
    return f"{parts.scheme}:", origin + "/", directory, base


def _context(href: str, contexts: tuple[str, str, str, str]) -> str:
    if href.startswith(("http://", "https://", "//")):
        return contexts[0]
    if href.startswith("/"):
        return contexts[1]
    if not href or href[0] in "?#":
        return contexts[3]
    return contexts[2]


def selector(text: str) -> Selector:
    """The page as the HTML parser reads it: parsel takes a text that starts with an XML
    declaration for XML, and in XML mode the XHTML namespace hides every element from CSS
    selectors (a site of XHTML served as text/html would yield no title and no links)."""
    return Selector(text=text, type="html")


# The links a browser follows or loads by itself: `<a>` and `<area>` hrefs, the pages of
# `<frame>` and `<iframe>`, and the `<link rel="next|prev">` pagination of documentation
# toolchains, by element name and the attribute that holds the URL.
_LINK_ATTRIBUTES = {"a": "href", "area": "href", "frame": "src", "iframe": "src", "link": "href"}
_PAGINATION = ("next", "prev", "previous")


def parse(
    text: str, url: str, strip: ParamFilter | None = None, skip_nofollow: bool = False
) -> Page:
    """Title, links and canonical URL of an HTML page fetched from `url`, honouring
    `<base href>`; URLs without the parameters `strip` names. With `skip_nofollow`, links
    of `<a rel="nofollow">` (and `<area>`) are left out, unless another link of the page
    has the same URL.

    The elements are read through lxml (parsel's `root`), in document order: a parsel
    Selector per link would cost about 2 us, three times the rest of a link's work once
    _canonical's cache hits."""
    sel = selector(text)
    base = url
    base_href = sel.css("base::attr(href)").get()
    if base_href:
        try:
            base = canonicalize(base_href, url)
        except InvalidURL:
            pass
    title = sel.css("title::text").get()
    page = Page(title=" ".join(title.split()) if title else None, selector=sel, base=base)
    contexts = _contexts(base)
    followed: dict[str, None] = {}  # an ordered set
    nofollow = set()
    for element in sel.root.iter(*_LINK_ATTRIBUTES):
        href = element.get(_LINK_ATTRIBUTES[element.tag])
        if href is None:
            continue
        rel = element.get("rel")
        if element.tag == "link":
            if page.canonical is None and has_word(rel, "canonical"):
                page.canonical = _link(href, contexts, strip) or None
            if not any(has_word(rel, word) for word in _PAGINATION):
                continue
        link = _link(href, contexts, strip)
        if link is None:
            page.bad_links += 1
        elif skip_nofollow and element.tag in ("a", "area") and has_word(rel, "nofollow"):
            nofollow.add(link)
        else:
            followed[link] = None
    page.links = list(followed)
    page.nofollow_links = len(nofollow.difference(followed))
    return page


def has_word(value: str | None, word: str) -> bool:
    """Whether an attribute that is a list of words (rel) has `word` (any case)."""
    return value is not None and word in value.lower().split()


def _link(href: str, contexts: tuple[str, str, str, str], strip: ParamFilter | None) -> str | None:
    """The canonical URL of `href` on a page of `contexts` (see _contexts), or None when it
    is not a crawlable URL."""
    href = href.strip()
    return _canonical(_context(href, contexts), href, strip)


def extract_fields(sel: Selector, specs: dict[str, dict]) -> dict[str, Any]:
    """Each field's first match (None when nothing matches), or all its matches (a list)
    when the spec says `all = true`; values are the strings parsel selects."""
    return {
        name: _select(sel, spec).getall() if spec.get("all") else _select(sel, spec).get()
        for name, spec in specs.items()
    }


def _select(sel: Selector, spec: dict) -> SelectorList:
    return sel.css(spec["css"]) if "css" in spec else sel.xpath(spec["xpath"])


_EMPTY = selector("<html></html>")


def field_problem(spec: Any) -> str | None:
    """Why `spec` is not a field spec `{css = "..."}` or `{xpath = "..."}` (with an optional
    `all = true`), or None. Selectors are tried on an empty page, so that a typo is reported
    when the crawl is seeded rather than on every page."""
    if not isinstance(spec, dict):
        return 'must be a table such as {css = "h1::text"}'
    unknown = sorted(set(spec) - {"css", "xpath", "all"})
    if unknown:
        return f"unknown key {unknown[0]!r} (use css or xpath, and all)"
    kinds = [k for k in ("css", "xpath") if k in spec]
    if len(kinds) != 1:
        return "needs exactly one of css or xpath"
    kind = kinds[0]
    if not isinstance(spec[kind], str):
        return f"{kind} must be a string"
    if not isinstance(spec.get("all", False), bool):
        return "all must be true or false"
    try:
        _select(_EMPTY, spec)
    except (SelectorError, ValueError) as exc:
        return f"invalid {kind} selector {spec[kind]!r}: {exc}"
    return None

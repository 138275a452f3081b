"""What a page tells crawlers about itself: robots directives (`<meta name="robots">`, the
`X-Robots-Tag` header, both also in forms for one user agent) and its canonical URL
(`<link rel="canonical">`, the `Link` header).

The directives are Google's and Bing's (StormCrawler and Nutch read the same): `noindex`
(do not index the page), `nofollow` (do not follow its links) and `none` (both); others
(noarchive, max-snippet...) do not concern a crawler that indexes nothing itself. A form for
a user agent names it by its product token: `<meta name="rqcrawl" ...>`,
`X-Robots-Tag: rqcrawl: nofollow`; forms for other agents are ignored. Where several sources
speak, the most restrictive wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from parsel import Selector
from requests.utils import parse_header_links

from rqcrawl.parse.urls import InvalidURL, ParamFilter, canonicalize

# Directives written `name: value`, which are not a user agent followed by directives.
_VALUED = {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
# `agent: directives` at the start of a header item (RFC 9309 product tokens).
_AGENT = re.compile(r"\s*([A-Za-z0-9_-]+)\s*:(.*)", re.DOTALL)
_PRODUCT = re.compile(r"\s*([A-Za-z0-9_-]+)")


@dataclass(frozen=True)
class Directives:
    noindex: bool = False
    nofollow: bool = False

    def __or__(self, other: Directives) -> Directives:
        return Directives(self.noindex or other.noindex, self.nofollow or other.nofollow)


def product_token(user_agent: str) -> str:
    """The name a site addresses us by: the user agent's first product, lowercased
    (`rqcrawl/0.1 (+https://...)` -> `rqcrawl`)."""
    match = _PRODUCT.match(user_agent)
    return match[1].lower() if match else ""


def from_words(words: Iterable[str]) -> Directives:
    """The directives among `words` (case-insensitive); unknown words are ignored."""
    found = {w.strip().lower() for w in words}
    none = "none" in found
    return Directives(none or "noindex" in found, none or "nofollow" in found)


def from_header_lines(lines: Iterable[str], token: str) -> Directives:
    """The directives of `X-Robots-Tag` header lines that concern the agent `token`.

    A line is items separated by commas; an item `agent: directive` makes that line's
    following items apply to `agent` only, until the next such item (Google's reading:
    `X-Robots-Tag: otherbot: noindex, nofollow` is all for otherbot). Items without an
    agent apply to every agent."""
    words = []
    for line in lines:
        agent = None
        for item in line.split(","):
            match = _AGENT.match(item)
            if match and match[1].lower() not in _VALUED:
                agent, item = match[1].lower(), match[2]
            if agent is None or agent == token:
                words.append(item)
    return from_words(words)


def header_lines(headers: Mapping[str, str], name: str) -> list[str]:
    """Every line of header `name`, apart: urllib3's headers keep them (`getlist`); a plain
    mapping (headers joined with commas) gives its one value."""
    getlist = getattr(headers, "getlist", None)
    if getlist is not None:
        return list(getlist(name))
    value = headers.get(name)
    return [value] if value else []


def from_headers(headers: Mapping[str, str], token: str) -> Directives:
    return from_header_lines(header_lines(headers, "x-robots-tag"), token)


def from_meta(sel: Selector, token: str) -> Directives:
    """The directives of `<meta name="robots">` and `<meta name="TOKEN">` (names compared
    without case; content words separated by commas or spaces)."""
    names = {"robots", token} - {""}
    words = []
    for element in sel.root.iter("meta"):  # lxml's: a parsel query would cost 10x
        name, content = element.get("name"), element.get("content")
        if name is not None and content is not None and name.strip().lower() in names:
            words += re.split(r"[,\s]+", content)
    return from_words(words)


def canonical_from_headers(
    headers: Mapping[str, str], url: str, strip: ParamFilter | None = None
) -> str | None:
    """The first `Link: <...>; rel="canonical"` of the response of `url` (canonical form),
    or None."""
    for line in header_lines(headers, "link"):
        for link in parse_header_links(line):
            rels = link.get("rel", "").lower().split()
            if "canonical" in rels and link.get("url"):
                try:
                    return canonicalize(link["url"], url, strip)
                except InvalidURL:
                    continue
    return None

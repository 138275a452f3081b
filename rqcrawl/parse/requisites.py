"""What a page needs to look as it did (its requisites), found in its HTML and in its CSS:
stylesheets, scripts, images (`src` and `srcset`), icons, media posters, fonts and images
that CSS loads by `url(...)`, stylesheets it loads by `@import`. What `wget
--page-requisites` takes, and what Heritrix follows as embeds rather than links.

Only http(s) URLs (no `data:`), canonical, once each, in document order; which of them are
fetched (their hosts, the cap per page) is rqcrawl.frontier.requisites' to say.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from parsel import Selector

from rqcrawl.parse.urls import InvalidURL, canonicalize

# element -> the attributes of it that load a requisite
_LOADS = {
    "img": ("src", "srcset"),
    "source": ("src", "srcset"),
    "script": ("src",),
    "input": ("src",),  # <input type=image>
    "video": ("poster",),
    "audio": ("src",),
    "track": ("src",),
    "embed": ("src",),
}
# <link rel> words whose href a page loads to show itself
_LINK_RELS = {"stylesheet", "icon", "preload", "modulepreload", "apple-touch-icon"}
# CSS: url(...) (quoted or not) and @import "..." (the url() form is matched by the first)
_CSS_URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)""", re.IGNORECASE)
_CSS_IMPORT = re.compile(r"""@import\s+(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)


def of_html(sel: Selector, base: str) -> list[str]:
    """The requisites of an HTML page parsed as `sel`, resolved against `base` (the page's
    URL or its `<base href>`): its elements' and its `<style>` blocks' and attributes'."""
    found: list[str] = []
    for element in sel.root.iter("link", "style", *_LOADS):
        if element.tag == "link":
            rel = set((element.get("rel") or "").lower().split())
            if rel & _LINK_RELS and element.get("href"):
                found.append(element.get("href"))
        elif element.tag == "style":
            found += _css_refs(element.text or "")
        else:
            for attribute in _LOADS[element.tag]:
                value = element.get(attribute)
                if value:
                    found += _srcset(value) if attribute == "srcset" else [value]
    for styled in sel.root.xpath("//*[@style]"):
        found += _css_refs(styled.get("style"))
    return resolved(found, base)


def of_css(text: str, base: str) -> list[str]:
    """The requisites of a stylesheet fetched from `base`: its url()s and @imports."""
    return resolved(_css_refs(text), base)


def _css_refs(text: str) -> list[str]:
    text = _CSS_COMMENT.sub("", text)
    refs = [next(g for g in m.groups() if g is not None) for m in _CSS_URL.finditer(text)]
    refs += [m.group(1) or m.group(2) for m in _CSS_IMPORT.finditer(text)]
    return refs


def _srcset(value: str) -> list[str]:
    """The URLs of a `srcset` ("a.png 1x, b.png 2x")."""
    return [part.split()[0] for part in value.split(",") if part.split()]


def resolved(refs: Iterable[str], base: str) -> list[str]:
    """`refs` resolved against `base`, canonical, once each (those that are no http(s) URL
    left out)."""
    return list(dict.fromkeys(_canonical(refs, base)))


def _canonical(refs: Iterable[str], base: str) -> Iterator[str]:
    for ref in refs:
        ref = ref.strip()
        if not ref or ref.startswith(("data:", "#")):
            continue
        try:
            yield canonicalize(ref, base)
        except InvalidURL:
            continue

"""Which pages go to the browser: the crawl's `render` patterns, and the `auto` rule.

This module is light on purpose: the plain `rq worker crawl` fleet imports it to decide, and
never imports the browser side (rqcrawl.render.browser, Playwright). It takes the `render`
setting's patterns, not the settings, so that it stays below them.

The `auto` rule looks at a page fetched with HTTP and says whether a reader would see an
empty shell without JavaScript. Measured on rqcrawl/bench/jssite.py (see docs/howto/rendering.md):
every script-built page of the JS site and none of the plain test sites' pages is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from urllib.parse import urlsplit

from parsel import Selector

from rqcrawl.parse.changes import visible_text
from rqcrawl.parse.urls import host_of

AUTO = "auto"  # the `render` value that lets each page's HTTP fetch decide

# A page with less visible text than this (characters, scripts and styles left out) and at
# least one script is a shell a script fills.
SHELL_TEXT = 200
# Where single-page application frameworks mount: React (root), Vue (app), Next.js (__next),
# Nuxt (__nuxt), Gatsby (___gatsby), Angular (app-root), Svelte/Ember (svelte, ember).
_EMPTY_ROOT = (
    "//*[(@id='root' or @id='app' or @id='__next' or @id='__nuxt' or @id='___gatsby'"
    " or @id='svelte' or @id='main-app' or self::app-root) and not(*) and not(normalize-space())]"
)
_NOSCRIPT_HINT = ("javascript", "enable js", "browser that supports")


@dataclass(frozen=True)
class Rendered:
    """A page as the browser left it."""

    html: str  # the DOM, serialised
    ms: int  # milliseconds from the start of the navigation to the DOM read
    timed_out: bool = False  # the page did not go quiet within render_timeout
    # The URLs the browser loaded through the crawl's fetch, archived with the page (WARC)
    loaded: frozenset[str] = frozenset()


def matches(url: str, render: list[str]) -> bool:
    """Whether one of the crawl's `render` patterns names `url`: a glob with `/` is matched
    against the whole URL, one without against its host (with or without its port)."""
    patterns = _patterns(tuple(render))
    if not patterns:
        return False
    hosts = (host_of(url), urlsplit(url).hostname or "")
    return any(
        fnmatchcase(url, p) if "/" in p else any(fnmatchcase(h, p) for h in hosts) for p in patterns
    )


@lru_cache(maxsize=64)
def _patterns(render: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(p.lower() if "/" not in p else p for p in render if p != AUTO)


def auto(render: list[str]) -> bool:
    return AUTO in render


def needs_rendering(selector: Selector, links: int) -> str | None:
    """Why a page fetched with HTTP needs the browser (a short reason for its record), or None:
    it has script and one of: an empty mount element, a <noscript> notice asking for
    JavaScript, less than SHELL_TEXT characters of visible text, or no links at all."""
    if not selector.xpath("//script[@src or normalize-space()]"):
        return None
    if selector.xpath(_EMPTY_ROOT):
        return "empty_root"
    notice = " ".join(selector.xpath("//noscript//text()").getall()).lower()
    if any(hint in notice for hint in _NOSCRIPT_HINT):
        return "noscript"
    if len(visible_text(selector).strip()) < SHELL_TEXT:
        return "little_text"
    if links == 0:
        return "no_links"
    return None

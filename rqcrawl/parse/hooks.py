"""The user's Python hook: a function, named in the settings, called on every fetched HTML
page, that may add fields to the page's record and links to crawl.

    # myhooks.py, run as `hook = "myhooks:on_page"`
    def on_page(page):                  # page: rqcrawl.parse.hooks.HookPage
        price = page.selector.css(".price::text").get()
        return {"fields": {"price": price}, "links": ["/api/more?page=2"]}

The hook is imported once per worker process (`rq worker` puts its working directory on the
import path, and `rqcrawl seed` imports the hook the same way to reject a bad path early).
A hook that raises, or returns something else than None or such a dict, does not stop the
crawl: the page is recorded with the error in `hook_error` and counted in `hook_errors`.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from parsel import Selector

from rqcrawl.loading import on_worker_path
from rqcrawl.parse.urls import InvalidURL, canonicalize

log = logging.getLogger(__name__)


class HookError(Exception):
    """The hook cannot be imported, or it failed on a page."""


@dataclass(frozen=True)
class HookPage:
    """What the hook receives: the response of one fetched HTML page."""

    url: str  # the URL that was crawled
    final_url: str  # after redirects; relative links are resolved against it
    status: int
    headers: Mapping[str, str]  # response headers, case-insensitive
    text: str  # the decoded body
    selector: Selector  # the parsed body (parsel)
    depth: int
    content: dict | None = None  # a copy of the record's content (`content` setting), when asked


@dataclass
class HookResult:
    fields: dict[str, Any] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)  # canonical
    bad_links: int = 0
    error: str | None = None


_loaded: dict[str, Callable[[HookPage], Any]] = {}


def load(path: str) -> Callable[[HookPage], Any]:
    """The function named by `path` ("package.module:function" or "package.module.function"),
    imported once per process."""
    if path not in _loaded:
        module_name, _, attr = path.rpartition(":") if ":" in path else path.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # a hook module can fail to import in any way
            raise HookError(f"cannot import hook module {module_name!r}: {_short(exc)}") from None
        func = getattr(module, attr, None)
        if not callable(func):
            raise HookError(f"hook {path!r}: module {module_name!r} has no function {attr!r}")
        _loaded[path] = func
    return _loaded[path]


def check(path: str) -> None:
    """Import the hook as `rq worker` will (the working directory on the import path)."""
    if path:
        on_worker_path()
        load(path)


def run(path: str, page: HookPage) -> HookResult:
    """Call the hook on `page`; whatever it does, return a result (with `error` if it failed)."""
    try:
        return _checked(load(path)(page), page.final_url)
    except HookError as exc:
        return HookResult(error=str(exc))
    except Exception as exc:  # the user's code may raise anything; the crawl goes on
        log.warning("hook %s failed on %s", path, page.url, exc_info=True)
        return HookResult(error=f"hook raised {_short(exc)}")


def _checked(value: Any, base: str) -> HookResult:
    """The hook's return value as a result; relative links are resolved against `base`."""
    if value is None:
        return HookResult()
    if not isinstance(value, dict) or not set(value) <= {"fields", "links"}:
        raise HookError("hook must return None or a dict with 'fields' and/or 'links'")
    fields, links = value.get("fields") or {}, value.get("links") or []
    if not isinstance(fields, dict) or not all(isinstance(k, str) for k in fields):
        raise HookError("hook 'fields' must be a dict with string keys")
    try:
        json.dumps(fields)
    except (TypeError, ValueError) as exc:
        raise HookError(f"hook 'fields' must be JSON values: {exc}") from None
    if not isinstance(links, list | tuple) or not all(isinstance(u, str) for u in links):
        raise HookError("hook 'links' must be a list of strings")
    result = HookResult(fields=fields)
    for link in links:
        try:
            result.links.append(canonicalize(link, base))
        except InvalidURL:
            result.bad_links += 1
    return result


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 200 else text[:197] + "..."

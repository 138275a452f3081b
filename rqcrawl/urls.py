"""URL canonicalization and scope: one spelling per page, and which pages belong to the crawl."""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

_SCHEMES = {"http", "https"}
_DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidURL(ValueError):
    """A URL that cannot be crawled (no http(s) scheme, no host, bad port...)."""


def canonicalize(url: str, base: str | None = None) -> str:
    """The canonical absolute form of `url`, resolved against `base`.

    w3lib sorts query arguments, normalizes percent-encoding and drops the fragment; on top we
    drop default ports and give an empty path its `/`. Raises InvalidURL for anything that is
    not an http(s) URL with a host.
    """
    url = url.strip()
    absolute = urljoin(base, url) if base else url
    try:
        parts = urlsplit(absolute)
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"invalid URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise InvalidURL(f"invalid URL {url!r}: scheme must be http or https")
    if not parts.hostname:
        raise InvalidURL(f"invalid URL {url!r}: no host")
    host = parts.hostname.rstrip(".")
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    rebuilt = urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
    return canonicalize_url(rebuilt)


def host_of(url: str) -> str:
    """Host and non-default port: what scope and politeness treat as one site."""
    return urlsplit(url).netloc


def in_scope(url: str, hosts: list[str]) -> bool:
    return host_of(url) in hosts

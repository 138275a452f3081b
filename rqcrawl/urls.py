"""URL canonicalization and scope: one spelling per page, and which pages belong to the crawl."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

_SCHEMES = {"http", "https"}
_DEFAULT_PORTS = {"http": 80, "https": 443}
# A host name after IDNA encoding: labels of 1-63 letters, digits, hyphens and underscores
# (not in the DNS standard, but found in real host names). Whitespace, controls, delimiters
# (<>"^|%...) and empty labels cannot name a host: urllib passes them through, so they are
# refused here rather than by a DNS error on every fetch of a broken link.
_HOST_NAME = re.compile(r"(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}")


class InvalidURL(ValueError):
    """A URL that cannot be crawled (no http(s) scheme, no host, bad port...)."""


def canonicalize(url: str, base: str | None = None) -> str:
    """The canonical absolute form of `url`, resolved against `base`.

    w3lib sorts query arguments, normalizes percent-encoding and drops the fragment; on top we
    drop default ports and give an empty path its `/`. Raises InvalidURL for anything that is
    not an http(s) URL with a valid host, whatever is wrong with `url` or `base`: every
    ValueError of parsing (a malformed IPv6 literal, a bad port, IDNA) becomes one here.
    """
    try:
        return _canonical(url.strip(), base)
    except ValueError as exc:  # urllib's, IDNA's (UnicodeError) and our own InvalidURL
        raise InvalidURL(f"invalid URL {url!r}: {exc}") from None


def _canonical(url: str, base: str | None) -> str:
    parts = urlsplit(urljoin(base, url) if base else url)
    port = parts.port
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise InvalidURL("scheme must be http or https")
    if not parts.hostname:
        raise InvalidURL("no host")
    host = parts.hostname.rstrip(".")
    if ":" in host:  # an IPv6 literal, which urlsplit has checked
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    canonical = canonicalize_url(urlunsplit((scheme, netloc, parts.path or "/", parts.query, "")))
    name = urlsplit(canonical).hostname or ""  # empty: w3lib read a backslash as "/"
    if ":" not in name and not _HOST_NAME.fullmatch(name):
        raise InvalidURL(f"bad host {name!r}")
    return canonical


def host_of(url: str) -> str:
    """Host and non-default port: what scope and politeness treat as one site."""
    return urlsplit(url).netloc


def in_scope(url: str, hosts: list[str]) -> bool:
    return host_of(url) in hosts

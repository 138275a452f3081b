"""URL canonicalization and scope: one spelling per page, and which pages belong to the crawl."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote_plus, urljoin, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

from rqcrawl.untrusted import inert

_SCHEMES = {"http", "https"}
_DEFAULT_PORTS = {"http": 80, "https": 443}
# A host name after IDNA encoding: labels of 1-63 letters, digits, hyphens and underscores
# (not in the DNS standard, but found in real host names). Whitespace, controls, delimiters
# (<>"^|%...) and empty labels cannot name a host: urllib passes them through, so they are
# refused here rather than by a DNS error on every fetch of a broken link.
_HOST_NAME = re.compile(r"(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}")


class InvalidURL(ValueError):
    """A URL that cannot be crawled (no http(s) scheme, no host, bad port...): `why`, and
    the `url` refused when canonicalize says which."""

    def __init__(self, why: str, url: str | None = None):
        self.why, self.url = why, url
        super().__init__(why if url is None else f"invalid URL {url!r}: {why}")

    def inert(self) -> str:
        """The message with the URL and the reason inert (rqcrawl.untrusted.inert), for a
        record or a job field that a server's text reaches (a redirect's `Location`)."""
        if self.url is None:
            return inert(self.why)
        return f"invalid URL '{inert(self.url)}': {inert(self.why)}"


def canonicalize(url: str, base: str | None = None, strip: ParamFilter | None = None) -> str:
    """The canonical absolute form of `url`, resolved against `base`, without the parameters
    `strip` names (session IDs, tracking: see ParamFilter).

    w3lib sorts query arguments, normalizes percent-encoding and drops the fragment; on top we
    drop default ports and give an empty path its `/`. Raises InvalidURL for anything that is
    not an http(s) URL with a valid host, whatever is wrong with `url` or `base`: every
    ValueError of parsing (a malformed IPv6 literal, a bad port, IDNA) becomes one here.
    """
    try:
        canonical = _canonical(url.strip(), base)
    except ValueError as exc:  # urllib's, IDNA's (UnicodeError) and our own InvalidURL
        raise InvalidURL(str(exc), url) from None
    return strip(canonical) if strip else canonical


# A URL in the form w3lib's canonicalization leaves as it is, but for its fragment, its
# query's order and an empty path: lower-case http(s), a plain ASCII host name or IPv4
# address, a port, a path of unreserved characters without dot segments, a query of
# name=value pairs of unreserved characters. Most links of most sites are; such a URL is
# canonicalized here in about 3 us instead of w3lib's 40 (tests/test_urls.py checks both
# agree on generated URLs of every shape this admits and of the shapes next to them).
_LABEL = r"(?!xn--)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_SIMPLE = re.compile(
    rf"(https?)://((?:{_LABEL}\.)*{_LABEL})(?::([0-9]{{1,5}}))?"
    r"((?:/(?!\.\.?(?:[/?#]|$))[A-Za-z0-9._~-]*)*)"
    r"(?:\?((?:[A-Za-z0-9._~-]+=[A-Za-z0-9._~-]*)(?:&[A-Za-z0-9._~-]+=[A-Za-z0-9._~-]*)*)?)?"
    r"(?:#.*)?",
    re.DOTALL,
)
# A relative reference that joins its base by concatenation: a path of unreserved
# characters without dot segments (and without a scheme, which needs a colon).
_SIMPLE_RELATIVE = re.compile(
    r"(?!\.\.?(?:/|$|[?#]))[A-Za-z0-9._~-][A-Za-z0-9._~/-]*"
    r"(?:\?[A-Za-z0-9._~=&-]*)?(?:#.*)?",
    re.DOTALL,
)


def _simple(url: str, base: str | None) -> str | None:
    """The canonical form of `url` against `base` when both are simple (see _SIMPLE), else
    None (the general way then decides)."""
    if base is not None and not url.startswith(("http://", "https://")):
        joined = _joined(url, base)
        if joined is None:
            return None
        url = joined
    m = _SIMPLE.fullmatch(url)
    if m is None:
        return None
    scheme, host, port, path, query = m.groups()
    if port is not None:
        number = int(port)
        if number > 65535:
            return None
        if number != _DEFAULT_PORTS[scheme]:
            host = f"{host}:{number}"
    canonical = f"{scheme}://{host}{path or '/'}"
    if query:
        canonical += "?" + "&".join(sorted(query.split("&"), key=lambda p: p.split("=", 1)))
    return canonical


def _joined(url: str, base: str) -> str | None:
    """`url` resolved against a simple `base` when that is plain concatenation: a
    network-path (`//host/...`), an absolute path or a simple relative path, which may
    start with `../` segments (each drops a directory of the base's, none above the root);
    else None."""
    if url.startswith("//"):  # only the base's scheme counts (extract's cache passes "http:")
        scheme = base[: base.find(":")]
        return f"{scheme}:{url}" if scheme in _SCHEMES else None
    m = _SIMPLE.fullmatch(base)
    if m is None:
        return None
    origin = base[: m.end(3) if m[3] is not None else m.end(2)]
    up = 0
    while url.startswith("../", 3 * up):
        up += 1
    rest = url[3 * up :]
    if "//" in rest or "/./" in rest or "/../" in rest:  # urljoin's business: it drops these
        return None
    if rest.startswith("/") and not up:
        return origin + rest
    if _SIMPLE_RELATIVE.fullmatch(rest) is None:
        return None
    path = m[4] or "/"
    if up and "//" in path:  # urljoin drops the empty segments it climbs through
        return None
    directory = path[: path.rfind("/") + 1]
    for _ in range(up):
        directory = directory[: directory.rfind("/", 0, len(directory) - 1) + 1] or "/"
    return origin + directory + rest


def _canonical(url: str, base: str | None) -> str:
    simple = _simple(url, base)
    return simple if simple is not None else _general(url, base)


def _general(url: str, base: str | None) -> str:
    parts = urlsplit(urljoin(base, url) if base else url)
    port = parts.port
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise InvalidURL("scheme must be http or https")
    if not parts.hostname:
        raise InvalidURL("no host")
    host = parts.hostname.rstrip(".")
    if ":" in host:  # a bracketed literal: an IPv6 address, nothing else
        host = f"[{_ipv6(host)}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    canonical = canonicalize_url(urlunsplit((scheme, netloc, parts.path or "/", parts.query, "")))
    name = urlsplit(canonical).hostname or ""  # empty: w3lib read a backslash as "/"
    if ":" not in name and not _HOST_NAME.fullmatch(name):
        raise InvalidURL(f"bad host {name!r}")
    return canonical


def _ipv6(literal: str) -> str:
    """An IPv6 literal as given, or InvalidURL: urlsplit lets RFC 3986's IPvFuture form
    through (`[v1.anything]`, spaces, quotes and control characters included), which no
    crawl can connect to and a terminal could be made to act on."""
    try:
        ipaddress.IPv6Address(literal.partition("%")[0])
    except ValueError:
        raise InvalidURL("bad host: not an IPv6 address in brackets") from None
    return literal


def host_of(url: str) -> str:
    """Host and non-default port: what scope and politeness treat as one site."""
    return urlsplit(url).netloc


def in_scope(url: str, hosts: list[str]) -> bool:
    return host_of(url) in hosts


# A path parameter `;name=value` (or `;name`) of one path segment: Java servlets put the
# session in `;jsessionid=...`.
_PATH_PARAM = re.compile(r";([^/;=]*)(=[^/;]*)?")


# Two or more slashes in a row: one in a path (Heritrix's strip-extra-slashes, Nutch's
# normalizer). A site that answers `//a.html` as `/a.html` (most servers do) would otherwise
# have every page of a tree crawled twice once one link (`href="\"`) leads under `//`.
_SLASHES = re.compile(r"//+")


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: see param_filter
class ParamFilter:
    """Parameters that name a session or a campaign rather than a page (`utm_source`,
    `jsessionid`...): one page reached with different ones would be crawled once per
    spelling. Names compare without case; a pattern ending in `*` is a prefix (`utm_*`).
    With `collapse_slashes`, repeated slashes of the path become one (`/a//b` -> `/a/b`).

    w3lib's url_query_cleaner takes exact names only and leaves path parameters alone, so
    this is done here, on URLs that are already canonical (the query sorted, names decoded).
    """

    names: frozenset[str]
    prefixes: tuple[str, ...]
    collapse_slashes: bool = False

    def matches(self, name: str) -> bool:
        name = unquote_plus(name).lower()
        return name in self.names or name.startswith(self.prefixes)

    def __call__(self, url: str) -> str:
        """`url` (canonical) without the parameters this filter names, in its query and in
        its path (`;jsessionid=...`), and with its path's repeated slashes collapsed."""
        slashes = self.collapse_slashes and "//" in url.partition("?")[0][8:]
        params = (self.names or self.prefixes) and ("?" in url or ";" in url)
        if not (slashes or params):
            return url
        parts = urlsplit(url)
        path, query = parts.path, parts.query
        if slashes:
            path = _SLASHES.sub("/", path)
        if params:
            path = _PATH_PARAM.sub(lambda m: "" if self.matches(m[1]) else m[0], path)
            pairs = query.split("&")
            query = "&".join(p for p in pairs if p and not self.matches(p.split("=")[0]))
        if path == parts.path and query == parts.query:
            return url
        return urlunsplit((parts.scheme, parts.netloc, path or "/", query, ""))


@lru_cache(maxsize=256)
def _param_filter(patterns: tuple[str, ...], collapse_slashes: bool) -> ParamFilter:
    lowered = [p.lower() for p in patterns]
    return ParamFilter(
        frozenset(p for p in lowered if not p.endswith("*")),
        tuple(p[:-1] for p in lowered if p.endswith("*")),
        collapse_slashes,
    )


def param_filter(patterns: Iterable[str], collapse_slashes: bool = False) -> ParamFilter:
    """The filter of `patterns` (a crawl's `strip_params`), collapsing repeated slashes if
    asked (`collapse_slashes`). One object per setting in a process, so that caches keyed by
    it (extract's) hit."""
    return _param_filter(tuple(patterns), collapse_slashes)


def param_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be a `strip_params` entry, or None."""
    if not pattern or pattern == "*":
        return "must name a parameter (a name, or a prefix ending in *)"
    if "*" in pattern[:-1]:
        return "may have * only at its end (a prefix such as utm_*)"
    bad = next((c for c in pattern if c in "&=;#?/" or c.isspace()), None)
    return f"must not contain {bad!r}" if bad else None

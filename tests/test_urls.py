"""URL canonicalization and scope: one spelling per page, and which pages belong to the crawl."""

from __future__ import annotations

import random

import pytest

from rqcrawl.parse import urls
from rqcrawl.parse.urls import InvalidURL, canonicalize, host_of, in_scope

BASE = "http://example.com/a/b/page.html"


# --- canonical form of absolute URLs -------------------------------------------------------


def test_scheme_and_host_are_lowercased_path_is_not():
    assert canonicalize("HTTP://WWW.Example.COM/Some/Path") == "http://www.example.com/Some/Path"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com:80/x", "http://example.com/x"),
        ("https://example.com:443/x", "https://example.com/x"),
        ("HTTPS://EXAMPLE.com:443", "https://example.com/"),
    ],
)
def test_default_port_is_dropped(url, expected):
    assert canonicalize(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com:8080/x", "http://example.com:8080/x"),
        ("https://example.com:8443/x", "https://example.com:8443/x"),
        # 443 is only the default for https, 80 only for http.
        ("http://example.com:443/x", "http://example.com:443/x"),
        ("https://example.com:80/x", "https://example.com:80/x"),
    ],
)
def test_non_default_port_is_kept(url, expected):
    assert canonicalize(url) == expected


def test_fragment_is_dropped():
    assert canonicalize("http://example.com/doc.html#section-2") == "http://example.com/doc.html"
    assert canonicalize("http://example.com/doc.html?a=1#x") == "http://example.com/doc.html?a=1"


def test_query_parameters_are_sorted():
    assert canonicalize("http://example.com/s?q=x&b=2&a=1") == "http://example.com/s?a=1&b=2&q=x"


def test_same_page_with_params_in_any_order_gives_one_url():
    spellings = [
        "http://example.com/list?page=2&sort=name&dir=asc",
        "http://example.com/list?sort=name&dir=asc&page=2",
        "HTTP://Example.com:80/list?dir=asc&page=2&sort=name#top",
        "http://example.com/list?dir=asc&sort=name&page=2",
    ]
    canonical = {canonicalize(u) for u in spellings}
    assert canonical == {"http://example.com/list?dir=asc&page=2&sort=name"}


def test_different_query_values_stay_different():
    assert canonicalize("http://example.com/p?id=1") != canonicalize("http://example.com/p?id=2")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com", "http://example.com/"),
        ("https://example.com:8443", "https://example.com:8443/"),
        ("http://example.com?x=1", "http://example.com/?x=1"),
        ("http://example.com#frag", "http://example.com/"),
    ],
)
def test_empty_path_gets_a_slash(url, expected):
    assert canonicalize(url) == expected


def test_percent_encoding_is_normalized():
    assert canonicalize("http://example.com/%7Efoo") == canonicalize("http://example.com/~foo")
    assert canonicalize("http://example.com/a%2fb") == "http://example.com/a%2Fb"
    assert canonicalize("http://example.com/a b") == "http://example.com/a%20b"


def test_dot_segments_are_resolved():
    assert canonicalize("http://example.com/a/./b/../c") == "http://example.com/a/c"


def test_trailing_dot_of_host_is_dropped():
    assert canonicalize("http://Example.com.:8080") == "http://example.com:8080/"


def test_canonicalize_is_idempotent():
    for url in [
        "HTTP://Example.COM:80/a/b?b=2&a=1#frag",
        "https://example.com:8443",
        "http://[2001:DB8::1]:8080/x?z=1&y=2",
        "http://example.com/a b",
    ]:
        once = canonicalize(url)
        assert canonicalize(once) == once


def test_surrounding_whitespace_is_ignored():
    assert canonicalize("  \n http://example.com/x \t") == "http://example.com/x"


# --- IPv6 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://[::1]/x", "http://[::1]/x"),
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        ("http://[::1]:80/x", "http://[::1]/x"),
        ("https://[2001:DB8::1]:443", "https://[2001:db8::1]/"),
    ],
)
def test_ipv6_host_keeps_its_brackets(url, expected):
    assert canonicalize(url) == expected


def test_ipv6_host_of():
    assert host_of(canonicalize("http://[::1]:8080/x")) == "[::1]:8080"


# --- resolution against a base --------------------------------------------------------------


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("other.html", "http://example.com/a/b/other.html"),
        ("./other.html", "http://example.com/a/b/other.html"),
        ("sub/x.html", "http://example.com/a/b/sub/x.html"),
        ("/root.html", "http://example.com/root.html"),
        ("../up.html", "http://example.com/a/up.html"),
        ("../../top.html", "http://example.com/top.html"),
        ("../../../../beyond.html", "http://example.com/beyond.html"),
        ("?q=1", "http://example.com/a/b/page.html?q=1"),
        ("#top", "http://example.com/a/b/page.html"),
        ("//cdn.example.org/lib.js", "http://cdn.example.org/lib.js"),
        ("https://Other.example:443/Z", "https://other.example/Z"),
    ],
)
def test_resolution_against_base(href, expected):
    assert canonicalize(href, BASE) == expected


def test_protocol_relative_takes_the_scheme_of_the_base():
    assert (
        canonicalize("//cdn.example.org/x", "https://example.com/") == "https://cdn.example.org/x"
    )
    assert canonicalize("//cdn.example.org/x", "http://example.com/") == "http://cdn.example.org/x"


def test_relative_url_without_base_is_invalid():
    with pytest.raises(InvalidURL):
        canonicalize("other.html")
    with pytest.raises(InvalidURL):
        canonicalize("/root.html")


# --- invalid URLs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "mailto:someone@example.com",
        "javascript:void(0)",
        "ftp://example.com/file.txt",
        "tel:+15555550100",
        "data:text/html,hello",
        "example.com/no-scheme",
    ],
)
def test_non_http_schemes_are_invalid(url):
    with pytest.raises(InvalidURL) as info:
        canonicalize(url)
    message = str(info.value)
    assert url in message
    assert "scheme" in message


@pytest.mark.parametrize("url", ["mailto:someone@example.com", "javascript:alert(1)"])
def test_non_http_schemes_are_invalid_even_with_a_base(url):
    with pytest.raises(InvalidURL, match="scheme"):
        canonicalize(url, BASE)


@pytest.mark.parametrize("url", ["http://", "http:///path", "https://:443/x"])
def test_url_without_host_is_invalid(url):
    with pytest.raises(InvalidURL) as info:
        canonicalize(url)
    message = str(info.value)
    assert url in message
    assert "no host" in message


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://example.com:99999/", "out of range"),
        ("http://example.com:65536/", "out of range"),
        ("http://example.com:abc/", "abc"),
    ],
)
def test_bad_port_is_invalid(url, reason):
    with pytest.raises(InvalidURL) as info:
        canonicalize(url)
    message = str(info.value)
    assert url in message
    assert "port" in message.lower()
    assert reason in message


def test_malformed_ipv6_is_invalid():
    with pytest.raises(InvalidURL, match="IPv6"):
        canonicalize("http://[::1/x")


def test_invalid_url_is_a_value_error():
    assert issubclass(InvalidURL, ValueError)


# --- host_of / in_scope ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://example.com/x", "example.com"),
        ("http://example.com:8080/x", "example.com:8080"),
        ("https://sub.example.com/", "sub.example.com"),
    ],
)
def test_host_of(url, host):
    assert host_of(url) == host


def test_host_of_canonical_url_drops_default_port():
    assert host_of(canonicalize("http://Example.com:80/x")) == "example.com"


def test_in_scope():
    hosts = ["example.com", "127.0.0.1:8000"]
    assert in_scope("http://example.com/a", hosts)
    assert in_scope("https://example.com/b?c=d", hosts)
    assert in_scope("http://127.0.0.1:8000/p", hosts)
    # Subdomains, other ports and other hosts are out.
    assert not in_scope("http://sub.example.com/a", hosts)
    assert not in_scope("http://example.com:8080/a", hosts)
    assert not in_scope("http://127.0.0.1/p", hosts)
    assert not in_scope("http://127.0.0.1:8001/p", hosts)
    assert not in_scope("http://example.org/a", hosts)
    assert not in_scope("http://notexample.com/a", hosts)


def test_in_scope_with_no_hosts_is_false():
    assert not in_scope("http://example.com/", [])


# --- malformed input: always InvalidURL, never another exception ----------------------------


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://[bad/", "http://example.com/"),  # the href itself is malformed
        ("http://[::1", "http://example.com/"),
        ("//[bad/x", "http://example.com/"),
        ("/x", "http://[bad/"),  # a malformed base (an unchecked <base href>, a Location)
        ("x", "http://[::1/a/"),
    ],
)
def test_malformed_url_or_base_is_invalid_not_a_crash(url, base):
    with pytest.raises(InvalidURL, match="invalid URL"):
        canonicalize(url, base)


@pytest.mark.parametrize(
    "url",
    [
        "http://ex ample.com/",
        "http://example.com\u3000/",
        "http://a<b>.com/",
        'http://a"b.com/',
        "http://a^b.com/",
        "http://a|b.com/",
        "http://a%20b.com/",
        "http://a\x00b.com/",
        "http://a\x7fb.com/",
        "http://a..b.com/",  # an empty label: IDNA refuses it
        "http://" + "a" * 64 + ".com/",  # a label over 63 characters
    ],
)
def test_host_with_characters_no_host_can_have_is_invalid(url):
    with pytest.raises(InvalidURL, match="host"):
        canonicalize(url)


@pytest.mark.parametrize("url", ["http://a_b.example.com/", "http://xn--bcher-kva.example/"])
def test_hosts_seen_in_the_wild_stay_valid(url):
    assert canonicalize(url) == url


# Characters that break naive parsers: whitespace, controls, delimiters, brackets, percent
# signs, non-ASCII letters, a surrogate-free emoji.
HOSTILE = " \t\n\r\x00\x0b\x7f%[]@:/?#\\<>\"'{}|^`~.;=&+ é中😀\u3000\u200bA-z9"


def test_fuzzed_links_either_canonicalize_or_are_invalid():
    """Property: for any href against good or bad bases, canonicalize returns a URL free of
    whitespace and control characters (a canonical URL is one token), idempotently, or
    raises InvalidURL; never any other exception."""
    rng = random.Random(16)
    bases = [
        "http://example.com/a/",
        "https://[::1]:8443/x?y=1",
        "http://[bad/",
        "http://ex ample/",
    ]
    prefixes = ["", "/", "//", "http://", "https://", "http://[", "http://a.com:"]
    valid = 0
    for _ in range(5000):
        href = rng.choice(prefixes) + "".join(rng.choice(HOSTILE) for _ in range(rng.randrange(12)))
        base = rng.choice(bases + [None])
        try:
            url = canonicalize(href, base)
        except InvalidURL:
            continue
        valid += 1
        assert not any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url), (href, url)
        assert canonicalize(url) == url, (href, base)
    assert valid > 500  # the generator does reach valid URLs


# --- the fast path agrees with the general one -----------------------------------------------

_HOSTS = [
    "example.com",
    "a-b.c0",
    "-a.com",
    "a-.com",
    "xn--bcher-kva.de",
    "EX.com",
    "127.0.0.1",
    "a_b.com",
    "a" * 63 + ".com",
    "a" * 64 + ".com",
    "a..b",
    "dot.",
    "[::1]",
    "é.fr",
]
_PORTS = ["", ":80", ":0080", ":443", ":8080", ":65535", ":65536", ":99999", ":", ":8a"]
_SEGMENTS = [".", "..", "a", "A~b.html", "%41", "a b", "", "é", ";x", "p-1_2", ".x", "x."]
_QUERIES = [
    "",
    "?",
    "?a=1",
    "?b=2&a=1",
    "?a",
    "?a=1&",
    "?a=1&&b=2",
    "?a=%41",
    "?a=b=c",
    "?=1",
    "?b=&a=2&a=1",
    "?A=1&a=0",
    "?a+b=1",
]
_FRAGMENTS = ["", "#x", "#", "#a/../b?c"]


def _random_url(rnd: random.Random) -> str:
    scheme = rnd.choice(["http", "https", "HTTP", "ftp"])
    path = "".join("/" + rnd.choice(_SEGMENTS) for _ in range(rnd.randint(0, 3)))
    parts = (rnd.choice(_HOSTS), rnd.choice(_PORTS), path, rnd.choice(_QUERIES))
    return f"{scheme}://" + "".join(parts) + rnd.choice(_FRAGMENTS)


def _random_href(rnd: random.Random) -> str:
    kind = rnd.randrange(5)
    if kind == 0:
        return _random_url(rnd)
    path = "/".join(rnd.choice(_SEGMENTS) for _ in range(rnd.randint(1, 3)))
    up = "../" * rnd.randint(1, 3)
    lead = ["//" + rnd.choice(_HOSTS) + rnd.choice(_PORTS) + "/", "/", "", up][kind - 1]
    return lead + path + rnd.choice(_QUERIES) + rnd.choice(_FRAGMENTS)


def _general_or_error(url: str, base: str | None) -> str:
    try:
        return urls._general(url, base)
    except ValueError as exc:
        return f"error: {type(exc).__name__}"


def test_fast_path_agrees_with_w3lib_on_urls_of_every_nearby_shape():
    """Every URL the fast path canonicalizes (URLs built of the pieces its patterns admit and
    of those next to them: dot segments, escapes, odd hosts and ports) comes out as w3lib's
    way makes it, alone and joined to a base; and the fast path takes most plain links."""
    rnd = random.Random(7)
    taken = 0
    for _ in range(20_000):
        bases = [None, _random_url(rnd), BASE, "http:", "HTTPS:", "ftp:"]  # (extract's contexts)
        url, base = _random_href(rnd), rnd.choice(bases)
        if base is None and not url.startswith(("http", "HTTP", "ftp")):
            continue
        fast = urls._simple(url, base)
        if fast is not None:
            taken += 1
            assert fast == _general_or_error(url, base), (url, base)
    assert taken > 300
    for href in ("p2.html", "/d/p3.html", "//example.com/x", "item?id=3&v=1#top", "../up.html"):
        assert urls._simple(href, BASE) is not None
    assert urls._simple("//example.com/x", "http:") == "http://example.com/x"
    # `../` climbs as urljoin does, which drops the empty segments of the base it passes
    assert canonicalize("../x.html", "http://example.com/a//b/c") == "http://example.com/a/x.html"

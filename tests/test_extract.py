"""Title and links of HTML pages, and decoding of their bytes."""

from __future__ import annotations

from urllib.parse import urljoin

import pytest

from rqcrawl.parse.extract import (
    Page,
    _canonical,
    _context,
    _contexts,
    decode,
    extract_fields,
    field_problem,
    parse,
)
from rqcrawl.parse.urls import InvalidURL, canonicalize

URL = "http://example.com/dir/page.html"


def html(body: str, head: str = "") -> str:
    return f"<!DOCTYPE html><html><head>{head}</head><body>{body}</body></html>"


# --- links ----------------------------------------------------------------------------------


def test_a_and_area_hrefs_are_collected_in_page_order():
    page = parse(
        html(
            '<a href="/first">1</a>'
            '<map name="m"><area href="area.html" alt="a" shape="rect" coords="0,0,1,1"></map>'
            '<a href="https://other.example/third">3</a>'
        ),
        URL,
    )
    assert page.links == [
        "http://example.com/first",
        "http://example.com/dir/area.html",
        "https://other.example/third",
    ]
    assert page.bad_links == 0


def test_other_elements_and_anchors_without_href_are_ignored():
    page = parse(
        html(
            '<a name="anchor">no href</a>'
            '<link rel="stylesheet" href="/style.css">'
            '<img src="/img.png"><script src="/app.js"></script>'
            '<a href="/only">x</a>'
        ),
        URL,
    )
    assert page.links == ["http://example.com/only"]
    assert page.bad_links == 0


def test_links_are_canonical():
    page = parse(html('<a href="HTTP://Example.COM:80/p?b=2&a=1">x</a>'), URL)
    assert page.links == ["http://example.com/p?a=1&b=2"]


def test_fragments_are_dropped():
    page = parse(html('<a href="other.html#part-2">x</a><a href="/x?y=1#z">y</a>'), URL)
    assert page.links == ["http://example.com/dir/other.html", "http://example.com/x?y=1"]


def test_fragment_only_link_is_the_page_itself():
    page = parse(html('<a href="#top">top</a>'), URL)
    assert page.links == [URL]


def test_duplicates_are_removed_keeping_first_occurrence_order():
    page = parse(
        html(
            '<a href="/b">b</a>'
            '<a href="/a">a</a>'
            '<a href="/b#again">b again</a>'
            '<a href="http://EXAMPLE.com/a">a again</a>'
            '<a href="/c?y=2&x=1">c</a>'
            '<area href="/c?x=1&y=2#f">c again</area>'
            '<a href="/b">b third</a>'
        ),
        URL,
    )
    assert page.links == [
        "http://example.com/b",
        "http://example.com/a",
        "http://example.com/c?x=1&y=2",
    ]


@pytest.mark.parametrize(
    "href",
    [
        "mailto:someone@example.com",
        "javascript:void(0)",
        "tel:+15555550100",
        "data:text/html,hello",
    ],
)
def test_uncrawlable_scheme_is_skipped_and_counted(href):
    page = parse(html(f'<a href="/ok">ok</a><a href="{href}">bad</a>'), URL)
    assert page.links == ["http://example.com/ok"]
    assert page.bad_links == 1


def test_every_bad_link_is_counted_including_repeats_and_areas():
    page = parse(
        html(
            '<a href="mailto:a@example.com">1</a>'
            '<a href="mailto:a@example.com">2</a>'
            '<a href="javascript:alert(1)">3</a>'
            '<a href="tel:123">4</a>'
            '<area href="data:text/plain,x">'
            '<a href="http://example.com:99999/">5</a>'
            '<a href="/fine">fine</a>'
        ),
        URL,
    )
    assert page.links == ["http://example.com/fine"]
    assert page.bad_links == 6


# --- <base href> ----------------------------------------------------------------------------


def test_absolute_base_href_is_honoured():
    page = parse(
        html(
            '<a href="x.html">x</a><a href="/root">r</a>',
            head='<base href="https://cdn.example.org/base/">',
        ),
        URL,
    )
    assert page.links == ["https://cdn.example.org/base/x.html", "https://cdn.example.org/root"]


def test_root_relative_base_href_is_resolved_against_the_page():
    page = parse(html('<a href="x.html">x</a>', head='<base href="/other/">'), URL)
    assert page.links == ["http://example.com/other/x.html"]


def test_relative_base_href_is_resolved_against_the_page():
    page = parse(html('<a href="x.html">x</a>', head='<base href="sub/">'), URL)
    assert page.links == ["http://example.com/dir/sub/x.html"]


def test_base_href_also_applies_to_area():
    page = parse(html('<area href="a.html">', head='<base href="/elsewhere/">'), URL)
    assert page.links == ["http://example.com/elsewhere/a.html"]


def test_invalid_base_href_falls_back_to_the_page_url():
    page = parse(html('<a href="x.html">x</a>', head='<base href="javascript:void(0)">'), URL)
    assert page.links == ["http://example.com/dir/x.html"]
    assert page.bad_links == 0


def test_base_without_href_is_ignored():
    page = parse(html('<a href="x.html">x</a>', head='<base target="_blank">'), URL)
    assert page.links == ["http://example.com/dir/x.html"]


# --- title ----------------------------------------------------------------------------------


def test_title_whitespace_is_collapsed():
    page = parse(html("", head="<title>\n   Hello \t\n  World  </title>"), URL)
    assert page.title == "Hello World"


def test_title_entities_are_decoded():
    page = parse(html("", head="<title>Fish &amp; Chips</title>"), URL)
    assert page.title == "Fish & Chips"


def test_missing_title_is_none():
    assert parse(html('<a href="/x">x</a>'), URL).title is None


def test_empty_title_is_none():
    assert parse(html("", head="<title></title>"), URL).title is None


def test_page_without_links():
    page = parse(html("<p>nothing here</p>", head="<title>t</title>"), URL)
    assert page == Page(title="t", links=[], bad_links=0)


# --- decode ---------------------------------------------------------------------------------

TITLE_DOC = "<html><head>{meta}<title>{title}</title></head><body></body></html>"


def test_decode_uses_the_http_charset():
    body = TITLE_DOC.format(meta="", title="café").encode("iso-8859-1")
    text = decode(body, "text/html; charset=iso-8859-1")
    assert parse(text, URL).title == "café"


def test_decode_http_charset_beats_a_wrong_guess():
    # The same bytes read as cp1251 are Cyrillic: the header decides.
    body = TITLE_DOC.format(meta="", title="Привет").encode("cp1251")
    assert parse(decode(body, "text/html; charset=windows-1251"), URL).title == "Привет"


def test_decode_uses_meta_charset():
    body = TITLE_DOC.format(meta='<meta charset="windows-1251">', title="Привет").encode("cp1251")
    assert parse(decode(body, "text/html"), URL).title == "Привет"
    assert parse(decode(body, None), URL).title == "Привет"


def test_decode_uses_meta_http_equiv_charset():
    meta = '<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">'
    body = TITLE_DOC.format(meta=meta, title="Привет").encode("koi8-r")
    assert parse(decode(body, None), URL).title == "Привет"


def test_decode_utf8_without_any_declaration():
    body = TITLE_DOC.format(meta="", title="naïve – ok").encode("utf-8")
    assert parse(decode(body, None), URL).title == "naïve – ok"


@pytest.mark.parametrize("content_type", [None, "text/html", "text/html; charset=utf-8"])
def test_decode_broken_bytes_does_not_raise(content_type):
    body = b"<html><head><title>ok \xff\xfe\xc3( end</title></head></html>"
    text = decode(body, content_type)
    assert isinstance(text, str)
    title = parse(text, URL).title
    assert title.startswith("ok ")
    assert title.endswith(" end")


@pytest.mark.parametrize("title", ["ok", "été"])
def test_decode_replaces_lone_surrogates(title):
    # unicode_escape (a server's choice) decodes "\\ud800" to a lone surrogate, which lxml
    # refuses: it becomes U+FFFD, the rest of the page as it was.
    body = TITLE_DOC.format(meta="", title=title + " \\ud800").encode("ascii", "backslashreplace")
    text = decode(body, "text/html; charset=unicode_escape")
    assert parse(text, URL).title == title + " \ufffd"


def test_decode_unknown_charset_does_not_raise():
    body = TITLE_DOC.format(meta="", title="été").encode("utf-8")
    text = decode(body, "text/html; charset=no-such-charset")
    assert parse(text, URL).title == "été"


def test_decode_empty_body():
    assert decode(b"", None) == ""


# --- fields ---------------------------------------------------------------------------------

FIELDS_PAGE = html(
    '<h1> Big <b>title</b></h1><span class="price">1</span><span class="price">2</span>'
    '<img src="/a.png"><img src="b.png">'
)


def test_fields_first_match_or_all_matches():
    page = parse(FIELDS_PAGE, URL)
    fields = extract_fields(
        page.selector,
        {
            "heading": {"css": "h1::text"},
            "price": {"css": ".price::text"},
            "prices": {"css": ".price::text", "all": True},
            "images": {"xpath": "//img/@src", "all": True},
            "first_image": {"xpath": "//img/@src", "all": False},
            "bold": {"xpath": "string(//h1)"},
        },
    )
    assert fields == {
        "heading": " Big ",
        "price": "1",
        "prices": ["1", "2"],
        "images": ["/a.png", "b.png"],
        "first_image": "/a.png",
        "bold": " Big title",
    }


def test_fields_without_a_match():
    page = parse(FIELDS_PAGE, URL)
    fields = extract_fields(
        page.selector, {"one": {"css": "h2::text"}, "many": {"xpath": "//h2", "all": True}}
    )
    assert fields == {"one": None, "many": []}


def test_no_fields_configured():
    assert extract_fields(parse(FIELDS_PAGE, URL).selector, {}) == {}


@pytest.mark.parametrize(
    "spec", [{"css": "h1::text"}, {"xpath": "//h1/text()", "all": True}, {"css": "a", "all": False}]
)
def test_good_field_specs(spec):
    assert field_problem(spec) is None


# --- the join cache resolves exactly like urljoin against the whole base --------------------

BASES = [
    "http://example.com/dir/page.html",
    "http://example.com/dir/sub/?q=1&r=2",
    "https://example.com:8443/",
    "http://example.com/page",
    "http://[::1]:8080/a/b/c.html?x=y",
]
HREFS = [
    "x.html", "../up.html", "./same/", "sub/../y", ";params", "http:rel", "?only=query",
    "#frag", "", "/root?a=b", "//other.org/p", "http://abs.org/a/../b", "HTTPS://Up.Org/P",
    "https://example.com/dir/", "..", ".", "mailto:a@b.c", "a b.html", "%7Euser/",
]  # fmt: skip


@pytest.mark.parametrize("base", BASES)
def test_cached_join_equals_urljoin_against_the_whole_base(base):
    def expected(href):
        try:
            return canonicalize(urljoin(base, href))
        except InvalidURL:
            return None

    for href in HREFS:  # an href that is no crawlable URL: None (cached as such)
        assert _canonical(_context(href, _contexts(base)), href) == expected(href), href


# --- malformed links never stop a page --------------------------------------------------


def test_malformed_links_are_counted_and_the_others_kept():
    page = parse(
        html(
            '<a href="http://[bad/">1</a><a href="/ok">ok</a><a href="//[::1/x">2</a>'
            '<a href="http://ex ample.com/">3</a><a href="/a b">spaced path</a>'
        ),
        URL,
    )
    assert page.links == ["http://example.com/ok", "http://example.com/a%20b"]
    assert page.bad_links == 3


@pytest.mark.parametrize("base", ["http://[bad/", "http://ex ample.com/", "http://[::1/"])
def test_malformed_base_href_falls_back_to_the_page_url(base):
    page = parse(html('<a href="x.html">x</a>', head=f'<base href="{base}">'), URL)
    assert page.links == ["http://example.com/dir/x.html"]

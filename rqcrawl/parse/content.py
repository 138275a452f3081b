"""A page's content for its record, when the crawl asks for it (the `content` setting): the
main content as text and as markdown (trafilatura, the best-rated main-content extractor in
the published evaluations; Apache-2.0), the decoded page, and the metadata a page states
(language, description, author, published date). Nothing runs when the setting is empty.

When the page shows its main block (_main_block), trafilatura gets that block alone, with
its headings and links kept (_shape_main_block); otherwise the page as it is.

Content may be skipped, never the page: a page above `content_max_bytes`, one that the HTML
parser cannot read whole, or an extraction past `content_timeout` keeps its record, title
and links, with `content_skipped` saying why. The markdown is for pipelines that render it:
its links are absolute (resolved against the page, `#fragment` links kept on the page), and
nothing from the page renders as markup or a script URL."""

from __future__ import annotations

import copy
import json
import re
import secrets
import threading
from collections.abc import Callable
from types import ModuleType
from urllib.parse import quote, urljoin, urlsplit

import lxml.html
from lxml import etree

from rqcrawl.parse.extract import Page

_METADATA = {"language": None, "description": None, "author": None, "published": None}
# Our names of the metadata, and trafilatura's keys of them in its JSON output.
_METADATA_KEYS = {
    "language": "language",
    "description": "excerpt",
    "author": "author",
    "published": "date",
}
# Link schemes the markdown keeps; any other (javascript:, data:, vbscript:...) leaves its
# text without the link.
_SAFE_SCHEMES = {"http", "https", "mailto"}
# Characters of a URL percent-encoded in a markdown link destination: those that end it or
# open raw HTML, in CommonMark and Python-Markdown alike.
_URL_SAFE = "!#$%&*+,-./:;=?@[]^_`{|}~"


def page_content(
    html: str, page: Page, url: str, kinds: list[str], max_bytes: int, timeout: float
) -> tuple[dict[str, str | None], str | None]:
    """The asked `kinds` of content of the HTML page `html` fetched from `url` and parsed as
    `page` (its `<html lang>` is the language: trafilatura reports one only with a detector),
    its metadata (None where the page does not say), and why text and markdown were skipped
    (None when they were not): "too_large" above `max_bytes` of UTF-8, "too_deep" or
    "parser_limit" when the HTML parser stops short of the page's end, "timeout" past
    `timeout` seconds, "error" when trafilatura fails on the page."""
    found: dict[str, str | None] = dict(_METADATA)
    found["language"] = page.selector.xpath("/html/@lang").get()
    if "html" in kinds:
        found["html"] = html
    extracted = [kind for kind in ("text", "markdown") if kind in kinds]
    if not extracted:
        return found, None
    found |= dict.fromkeys(extracted)
    if len(html.encode("utf-8", "replace")) > max_bytes:
        return found, "too_large"
    _trafilatura()  # loaded before the extraction's time starts
    outcome = _abandoned_after(timeout, lambda: _extract(html, page.base, url, extracted))
    if isinstance(outcome, str):
        return found, outcome
    for name, value in outcome.items():
        found[name] = found.get(name) or value
    return found, None


def _trafilatura() -> ModuleType:
    """trafilatura, imported at the first page whose text or markdown is asked for: a crawl
    without --content never needs it, and a stock `rq worker` imports the crawler again in
    each job's fork (about a quarter of those imports)."""
    import trafilatura

    return trafilatura


def _abandoned_after(timeout: float, work: Callable[[], dict]) -> dict | str:
    """What `work` returns, or why it gave nothing: "timeout" when it has not ended within
    `timeout` seconds (its wait for a turn included), the reason of a _Skip, or "error".

    trafilatura is CPU-bound Python with no way to stop it part-way, and neither SIGALRM
    (RQ's job timeout owns it, and only the main thread gets it) nor a process per page (a
    stock `rq worker` already forks one per job) fits a worker's threads; so `work` runs in
    a daemon thread that the page stops waiting for at the deadline. The abandoned thread
    runs to its end in the background, bounded by content_max_bytes (about 2 s of CPU per
    MB, docs/howto/export.md), then its result is dropped. At most _TURNS extractions of a
    process run at once, an abandoned one until its end: sixteen slots' extractions sharing
    one interpreter would each take sixteen times as long, and pages abandoned to their
    deadline would go on slowing the next ones (a page's content lost to others' load)."""
    result: dict[str, dict | str] = {}
    abandoned = threading.Event()

    def run() -> None:
        with _TURNS:
            if abandoned.is_set():  # its page stopped waiting before its turn came
                return
            try:
                result["done"] = work()
            except _Skip as skip:
                result["done"] = skip.reason
            except Exception:  # a page trafilatura cannot handle costs its content only
                result["done"] = "error"

    thread = threading.Thread(target=run, name="rqcrawl-content", daemon=True)
    thread.start()
    thread.join(timeout)
    abandoned.set()
    return result.get("done", "timeout")


# Extractions of one process running at once: two, so that one slow page does not hold the
# others' turn for its whole budget, and no more, as they share one interpreter's lock.
_TURNS = threading.BoundedSemaphore(2)


class _Skip(Exception):
    """The page's content cannot be extracted whole, for `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _extract(html: str, base: str, url: str, kinds: list[str]) -> dict[str, str | None]:
    """The metadata and the `kinds` ("text", "markdown") of the page `html` from `url`,
    whose relative links resolve against `base`. One extraction gives the text and the
    metadata; markdown costs a second one."""
    tree = _tree(html)
    marks = _Marks(base, url)
    _shape_main_block(tree, marks)
    found: dict[str, str | None] = {}
    doc = json.loads(
        _trafilatura().extract(
            copy.deepcopy(tree), url=url, output_format="json", with_metadata=True,
            include_comments=False,
        ) or "{}"
    )  # fmt: skip
    for name, key in _METADATA_KEYS.items():
        found[name] = doc.get(key) or None
    if "text" in kinds:
        found["text"] = marks.plain(doc.get("text")) or None
    if "markdown" in kinds:
        found["markdown"] = _markdown(tree, marks)
    return found


class _Marks:
    """The stand-ins of one page's extraction: a nonce token for what trafilatura would
    drop or mangle (a `<`, an `&`, a link URL, a heading's level, a link it would delete
    with its list), put back in its output. The nonce is random, so no page can forge one."""

    def __init__(self, base: str, url: str) -> None:
        self.nonce = "q" + secrets.token_hex(8)
        self.base, self.url = base, url
        self.urls: list[str] = []
        self.tokens = re.compile(rf"{self.nonce}(?:(l)|(a)|(o)|u(\d+)z|c(\d+)z|h(\d)z ?)")

    def url_index(self, href: str | None) -> int | None:
        """The number of the link `href`'s safe absolute URL (_safe_url); None for none."""
        target = _safe_url(href, self.base, self.url)
        if target is None:
            return None
        self.urls.append(target)
        return len(self.urls) - 1

    def markdown(self, text: str) -> str:
        """trafilatura's markdown with the stand-ins put back as markdown."""
        return self.tokens.sub(self._markdown_of, text)

    def plain(self, text: str | None) -> str | None:
        """trafilatura's text with the stand-ins taken out (text has no links or levels)."""
        return None if text is None else self.tokens.sub(self._plain_of, text)

    def _markdown_of(self, m: re.Match) -> str:
        if m[1] or m[2]:
            return "&lt;" if m[1] else "&amp;"
        if m[3]:
            return "["
        if m[4] or m[5]:
            return self.urls[int(m[4])] if m[4] else f"]({self.urls[int(m[5])]})"
        return "#" * int(m[6]) + " "

    def _plain_of(self, m: re.Match) -> str:
        return "<" if m[1] else "&" if m[2] else ""


# The main block of a page: its <main> (or role=main), else the block under <body> that holds
# its first heading; taken as the main block only when it holds this share of the page's text.
_MAIN_XPATH = etree.XPath("//main|//*[@role='main']")
_HEADING_XPATH = etree.XPath("(.//h1|.//h2|.//h3)[1]")
_MAIN_SHARE = 0.5
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}


def _main_block(tree: lxml.html.HtmlElement) -> lxml.html.HtmlElement | None:
    """The page's main block, or None when the page does not show one clearly: its one
    <main> (or role=main) with a heading of its own, whatever its share of the page (a
    short page's sidebar may hold more text than it: Python's faq/index.html), else the
    block under <body> that holds the page's first heading, when it holds _MAIN_SHARE of the
    page's text."""
    body = tree.find("body")
    mains = _MAIN_XPATH(tree)
    if len(mains) == 1 and body is not None and _HEADING_XPATH(mains[0]):
        return mains[0]
    block = mains[0] if len(mains) == 1 else _around_first_heading(tree, body)
    if block is None or body is None or block.tag in ("body", "html"):
        return None
    text = len(body.text_content())
    return block if text and len(block.text_content()) >= _MAIN_SHARE * text else None


def _around_first_heading(
    tree: lxml.html.HtmlElement, body: lxml.html.HtmlElement | None
) -> lxml.html.HtmlElement | None:
    """The child of <body> that holds the page's first heading (None without one)."""
    headings = _HEADING_XPATH(tree)
    if not headings:
        return None
    return next((a for a in headings[0].iterancestors() if a.getparent() is body), headings[0])


def _shape_main_block(tree: lxml.html.HtmlElement, marks: _Marks) -> None:
    """Give trafilatura the page's main block alone, as an <article> whose headings and
    links it keeps. Left to itself, trafilatura drops the headings of a page whose main
    block it does not recognize (PostgreSQL's reference pages: every h2 and h3), the
    link lists of a listing page (Python's library/internet.html: its module list), and
    the text after a `<code><a>` (the Apache manual: "The Alias and ScriptAlias
    directives are..." comes out "The Alias ScriptAlias"). A page without a clear main
    block (_main_block) goes to trafilatura as it is."""
    block = _main_block(tree)
    if block is None:
        return
    for node in [block, *block.iterancestors()]:
        parent = node.getparent()
        if parent is None or node.tag == "body":
            break
        parent.text = None
        for sibling in list(parent):
            if sibling is not node:
                parent.remove(sibling)
    block.tag = "article"
    for code in block.xpath(".//code[count(*) = 1][a][not(normalize-space(text()))]"):
        link = code[0]  # <code><a>x</a></code> as <a><code>x</code></a>
        code.tag, link.tag = "a", "code"
        code.set("href", link.attrib.pop("href", ""))
    for heading in block.iter(*_HEADINGS):
        heading.text = f"{marks.nonce}h{heading.tag[1]}z " + (heading.text or "")
        heading.tag = "p"
    for link in block.xpath(".//a[not(ancestor::pre or ancestor::code)]"):
        _mark_link(link, marks)


def _mark_link(link: lxml.html.HtmlElement, marks: _Marks) -> None:
    """The link as text between stand-ins of `[` and `](url)`, which trafilatura keeps
    where it would delete a list or paragraph of links; its text alone for an unsafe or
    empty one."""
    index = marks.url_index(link.get("href"))
    if index is not None and link.text_content().strip():
        link.text = f"{marks.nonce}o" + (link.text or "")
        link.tail = f"{marks.nonce}c{index}z" + (link.tail or "")
    link.drop_tag()


def _tree(html: str) -> lxml.html.HtmlElement:
    """The page parsed as trafilatura parses it; _Skip when libxml2 stops at one of its
    limits (elements nested 256 deep, a text node of 10 MB), where the rest of the page is
    lost without an error and the extraction would silently be empty or partial."""
    parser = lxml.html.HTMLParser(
        encoding="utf-8", remove_comments=True, remove_pis=True, collect_ids=False
    )
    try:
        tree = lxml.html.document_fromstring(html.encode("utf-8", "replace"), parser=parser)
    except etree.ParserError as exc:  # an empty document
        raise _Skip("empty") from exc
    for error in parser.error_log:
        if error.type == etree.ErrorTypes.ERR_RESOURCE_LIMIT:
            raise _Skip("too_deep" if "depth" in error.message else "parser_limit")
    return tree


def _markdown(tree: lxml.html.HtmlElement, marks: _Marks) -> str | None:
    """The main content of the parsed page `tree` as markdown that renders inert: links
    absolute (against the page's base, `#fragment` links against its URL), those of other
    schemes than _SAFE_SCHEMES reduced to their text, and `<` and `&` of the page's text
    written `&lt;` and `&amp;` (text in both CommonMark and Python-Markdown) outside code,
    which renderers print as it is.

    trafilatura resolves links against the site's root and unescapes its whole output, so
    the page goes in with stand-ins (_Marks) for each `<`, `&` and link URL, replaced in
    its markdown."""
    nonce = marks.nonce
    for link in tree.iter("a"):
        index = marks.url_index(link.get("href"))
        if index is None:
            link.drop_tag()  # its text stays, without the link
        else:
            link.set("href", f"{nonce}u{index}z")
    for element in tree.iter():
        if not isinstance(element.tag, str) or _in_code(element):
            continue
        if element.text and element.tag != "code":
            element.text = _stand_ins(element.text, nonce)
        if element.tail:
            element.tail = _stand_ins(element.tail, nonce)
    markdown = _trafilatura().extract(
        tree, output_format="markdown", include_comments=False, include_links=True
    )
    return None if markdown is None else marks.markdown(markdown)


def _in_code(element: lxml.html.HtmlElement) -> bool:
    """Whether `element` is inside a `<code>`, which trafilatura writes as code (printed as
    it is: a `&lt;` there would show as such)."""
    return any(ancestor.tag == "code" for ancestor in element.iterancestors())


def _stand_ins(text: str, nonce: str) -> str:
    return text.replace("&", f"{nonce}a").replace("<", f"{nonce}l")


def _safe_url(href: str | None, base: str, url: str) -> str | None:
    """The absolute URL of the link `href` on the page `url` whose links resolve against
    `base`, percent-encoded for a markdown link destination; None for a link of a scheme
    outside _SAFE_SCHEMES or no URL at all. urllib reads the scheme as a browser does
    (WHATWG URL): leading C0 controls and spaces, and tabs and newlines anywhere, ignored,
    so ` java\tscript:` is javascript:."""
    if href is None:
        return None
    try:
        target = urljoin(url.split("#", 1)[0] if href.startswith("#") else base or url, href)
        scheme = urlsplit(target).scheme.lower()
    except ValueError:
        return None
    return quote(target, safe=_URL_SAFE) if scheme in _SAFE_SCHEMES else None

"""Page content in the records (`--content`): a documentation tree built here (navigation,
sidebar, footer and a body per page, plus a JSON document), crawled by `rqcrawl crawl` with real
workers over a real Redis: each page's main text holds its body and none of the
navigation; markdown keeps the body's heading; the page's metadata is recorded; the JSON document
says it was skipped; a crawl without `--content` records no content at all."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler

import lxml.html
import pytest
from helpers import BIN, env_with, read_jsonl
from servers import HTTPSite, reply
from test_api import finished
from test_render import CHROMIUM, needs_chromium

from rqcrawl import api
from rqcrawl.config import ConfigError, CrawlConfig
from rqcrawl.parse.content import page_content
from rqcrawl.parse.extract import parse
from rqcrawl.workers.runner import LocalWorkers

CHAPTERS = ["install", "configure", "deploy"]
NAV = "".join(f'<li><a href="/docs/{c}.html">Navigate {c} menu</a></li>' for c in CHAPTERS)


def body_of(chapter: str) -> str:
    """The chapter's own sentences: what the main text must hold."""
    return (
        f"The {chapter} chapter explains how an operator proceeds with rqcrawl step by step. "
        f"Every {chapter} task starts from a clean checkout and ends with a verified result, "
        "and the paragraphs here are long enough to read as the article of the page."
    )


def page(chapter: str) -> bytes:
    paragraphs = "".join(f"<p>{body_of(chapter)} Part {n}.</p>" for n in range(4))
    return (
        "<!DOCTYPE html><html lang='en'><head>"
        f"<title>{chapter.title()} - Docs</title>"
        f"<meta name='description' content='How to {chapter}'>"
        "<meta name='author' content='Ada Writer'>"
        "<meta property='article:published_time' content='2024-05-06'>"
        "</head><body>"
        f"<header><nav class='topnav'><ul>{NAV}</ul></nav></header>"
        f"<aside class='sidebar'><ul>{NAV}<li>Sidebar search box</li></ul></aside>"
        f"<main><article><h1>{chapter.title()} guide</h1>{paragraphs}</article></main>"
        "<footer>Footer copyright notice and privacy policy links</footer>"
        "<a href='/docs/data'>Data</a></body></html>"
    ).encode()


def docs_site(req: BaseHTTPRequestHandler) -> None:
    if req.path == "/docs/data":
        return reply(req, 200, b'{"not": "a page"}', ctype="application/json")
    chapter = req.path.removeprefix("/docs/").removesuffix(".html")
    if req.path == "/":
        chapter = "install"
    if chapter not in CHAPTERS:
        return reply(req, 404, b"missing")
    reply(req, 200, page(chapter), ctype="text/html; charset=utf-8")


def crawl(redis_url: str, base: str, out, *extra: str) -> list[dict]:
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "crawl", base + "/", "-o", str(out), "--allow-private",
         "--delay", "0", "--max-depth", "2", "--workers", "1", *extra],
        env=env_with(redis_url), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return read_jsonl(out)


def test_main_text_holds_the_body_and_none_of_the_navigation(redis_url, tmp_path):
    with HTTPSite(docs_site, host="127.0.0.31") as http:
        records = crawl(redis_url, http.base, tmp_path / "out.jsonl", "--content", "text,markdown")
    pages = {r["url"].rsplit("/", 1)[-1]: r for r in records}
    for chapter in CHAPTERS:
        content = pages[f"{chapter}.html"]["content"]
        assert body_of(chapter) in content["text"]
        for boilerplate in ("Navigate", "Sidebar search", "Footer copyright"):
            assert boilerplate not in content["text"], (chapter, boilerplate)
        assert f"# {chapter.title()} guide" in content["markdown"]
        assert "Navigate" not in content["markdown"]
        assert (content["language"], content["description"], content["author"]) == (
            "en", f"How to {chapter}", "Ada Writer"
        )  # fmt: skip
        assert content["published"] == "2024-05-06"
        assert "html" not in content
    data = pages["data"]
    assert (data["outcome"], data["content_skipped"]) == ("not_html", "not html")
    assert "content" not in data


def test_html_content_is_the_decoded_page_and_nothing_is_extracted_when_off(redis_url, tmp_path):
    with HTTPSite(docs_site, host="127.0.0.32") as http:
        asked = crawl(redis_url, http.base, tmp_path / "a.jsonl", "--content", "html")
        plain = crawl(redis_url, http.base, tmp_path / "b.jsonl", "--crawl", "plain")
    page_of = {r["url"]: r for r in asked}
    install = page_of[http.base + "/docs/install.html"]["content"]
    assert install["html"] == page("install").decode()
    assert "text" not in install and "markdown" not in install
    assert all("content" not in r and "content_skipped" not in r for r in plain)


def test_an_unknown_content_kind_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="unknown 'pdf'"):
        CrawlConfig.from_dict({"content": ["text", "pdf"]})


CONTENT_HOOK = """
def on_page(page):
    seen = dict(page.content)
    page.content["text"] = "rewritten by the hook"
    return {"fields": {"seen": seen}}
"""


def test_the_hook_sees_the_records_content_and_cannot_change_it(redis_url, tmp_path, monkeypatch):
    (tmp_path / "contenthook.py").write_text(CONTENT_HOOK)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # for `rqcrawl crawl` and its workers
    settings = tmp_path / "crawl.toml"
    settings.write_text('[crawl]\nhook = "contenthook:on_page"\n')
    with HTTPSite(docs_site, host="127.0.0.33") as http:
        records = crawl(
            redis_url, http.base, tmp_path / "out.jsonl", "--content", "text,markdown",
            "--config", str(settings),
        )  # fmt: skip
    pages = [r for r in records if r["outcome"] == "fetched"]
    assert len(pages) == len(CHAPTERS) + 1
    for record in pages:
        assert record["hook_error"] is None
        assert record["fields"]["seen"] == record["content"]
        assert set(record["content"]) == {
            "text",
            "markdown",
            "language",
            "description",
            "author",
            "published",
        }
        assert "rewritten" not in record["content"]["text"]


def test_the_api_gives_the_records_content(redis_url, conn, tmp_path):
    with HTTPSite(docs_site, host="127.0.0.34") as http:
        api.start(
            conn, [http.base + "/"], "apicontent", max_depth=2, allow_private=True, delay=0,
            sitemaps=False, content=["text", "markdown"],
        )  # fmt: skip
        with LocalWorkers(redis_url, 1, log_dir=tmp_path / "workers"):
            finished(conn, "apicontent")
    rows = {r["url"].removeprefix(http.base): r for r in api.records(conn, "apicontent")}
    out = tmp_path / "out.jsonl"
    api.export(conn, "apicontent", out)
    exported = {r["url"].removeprefix(http.base): r for r in read_jsonl(out)}
    assert rows == exported
    install = rows["/docs/install.html"]["content"]
    assert body_of("install") in install["text"] and "Navigate" not in install["text"]
    assert "# Install guide" in install["markdown"] and install["author"] == "Ada Writer"
    assert rows["/docs/data"]["content_skipped"] == "not html"


ARTICLE = " ".join(f"Sentence {n} of the module's documentation, read as one." for n in range(30))
# A documentation tree below the site's root: relative, parent, root-relative and fragment
# links, and a page whose links resolve against its <base href>.
LIBRARY = {
    "/": "<a href='/library/imaplib.html'>imaplib</a> <a href='/guide/based.html'>based</a>",
    "/library/imaplib.html": (
        "<h1 id='module-imaplib'>imaplib</h1>"
        f"<p>{ARTICLE} See <a href='intro.html#x'>the intro</a>, "
        "<a href='#module-imaplib'>this module</a>, <a href='../index.html'>the index</a> "
        "and <a href='/guide/based.html'>the guide</a>.</p>"
    ),
    "/library/intro.html": f"<h1 id='x'>Intro</h1><p>{ARTICLE} <a href='imaplib.html'>b</a></p>",
    "/index.html": f"<h1>Index</h1><p>{ARTICLE} <a href='library/imaplib.html'>imaplib</a></p>",
    "/guide/based.html": (
        "<base href='/library/'>"
        f"<h1 id='top'>Guide</h1><p>{ARTICLE} Read <a href='intro.html'>the intro</a> "
        "and <a href='#top'>the top</a>.</p>"
    ),
}


def library_site(req: BaseHTTPRequestHandler) -> None:
    if req.path not in LIBRARY:
        return reply(req, 404, b"missing")
    body = f"<html><head><title>{req.path}</title></head><body><main><article>"
    reply(req, 200, (body + LIBRARY[req.path] + "</article></main></body></html>").encode())


def markdown_links(markdown: str) -> list[str]:
    """The link targets of `markdown` as a CommonMark renderer reads them (markdown-it-py)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt().parse(markdown)
    inline = [child for token in tokens for child in token.children or ()]
    return [t.attrs["href"] for t in inline if t.type == "link_open"]


def test_markdown_links_resolve_against_the_page_and_anchors_stay_on_it(redis_url, tmp_path):
    with HTTPSite(library_site, host="127.0.0.35") as http:
        records = crawl(redis_url, http.base, tmp_path / "out.jsonl", "--content", "markdown")
    fetched = {r["url"]: r for r in records if r["status"] == 200}
    base = http.base
    imaplib = fetched[base + "/library/imaplib.html"]["content"]["markdown"]
    assert markdown_links(imaplib) == [
        base + "/library/intro.html#x",
        base + "/library/imaplib.html#module-imaplib",
        base + "/index.html",
        base + "/guide/based.html",
    ]
    based = fetched[base + "/guide/based.html"]["content"]["markdown"]
    assert markdown_links(based) == [base + "/library/intro.html", base + "/guide/based.html#top"]
    for url, record in fetched.items():
        if url == base + "/":
            continue  # too short to be an article
        links = markdown_links(record["content"]["markdown"])
        assert links, url
        for link in links:
            page, _, fragment = link.partition("#")
            assert page in fetched, (url, link)
            if fragment:
                assert f"id='{fragment}'" in LIBRARY[page.removeprefix(base)], (url, link)


# Pages whose visible text or links a markdown renderer would run, were they passed through.
HOSTILE = [
    "&lt;script&gt;alert(1)//&lt;/script&gt;",
    "&lt;img src=x onerror=alert(1)&gt;",
    "&amp;lt;script&amp;gt;alert(1)&amp;lt;/script&amp;gt;",
    "&lt;javascript:alert(1)&gt; and &lt;a href='javascript:alert(1)'&gt;x&lt;/a&gt;",
    "<a href='javascript:alert(1)'>a</a> <a href='JaVaScRiPt:alert(1)'>b</a>",
    "<a href=' javascript:alert(1)'>c</a> <a href='java\tscript:alert(1)'>d</a>",
    "<a href='java&#10;script:alert(1)'>e</a> <a href='&#x6A;avascript:alert(1)'>f</a>",
    "<a href='\x01javascript:alert(1)'>g</a> <a href='vbscript:msgbox(1)'>h</a>",
    "<a href='data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;'>i</a>",
    "<img src='data:image/svg+xml,&lt;svg onload=alert(1)&gt;'> <img src='javascript:alert(1)'>",
    "[x]: javascript:alert(1) and [x] and [y](javascript:alert(1)) and ![z](data:x)",
    "<code>&lt;script&gt;alert(1)&lt;/script&gt;</code> <pre>&lt;script&gt;x&lt;/script&gt;</pre>",
]
UNSAFE_URL = re.compile(r"^\W*(?:javascript|data|vbscript):", re.IGNORECASE)


def live_parts(rendered: str) -> list[str]:
    """What a browser would run in the HTML `rendered`: script elements, on* attributes,
    URLs of script and data schemes (the page's text may say those words: it stays text)."""
    live = []
    for element in lxml.html.fragment_fromstring(rendered, create_parent="div").iter():
        if element.tag in ("script", "iframe", "object", "embed"):
            live.append(element.tag)
        for name, value in element.attrib.items():
            if name.lower().startswith("on") or UNSAFE_URL.match(re.sub(r"\s", "", value)):
                live.append(f"{name}={value}")
    return live


@pytest.mark.parametrize("hostile", HOSTILE)
def test_markdown_renders_inert_in_python_markdown_and_markdown_it(hostile):
    import markdown
    from markdown_it import MarkdownIt

    html = f"<html><body><article><p>{ARTICLE} {hostile} {ARTICLE}</p></article></body></html>"
    url = "http://127.0.0.1/notes/page.html"
    found, skipped = page_content(html, parse(html, url), url, ["markdown"], 1_000_000, 60)
    assert skipped is None and ARTICLE in found["markdown"]
    for rendered in (markdown.markdown(found["markdown"]), MarkdownIt().render(found["markdown"])):
        assert not live_parts(rendered), rendered


# What a live page would do: an image that fails (no request leaves the browser) runs onerror.
CONTROL = "<img src=x onerror=\"alert('control')\">"


@needs_chromium
def test_hostile_markdown_rendered_in_headless_chromium_opens_no_dialog():
    """Every hostile page's markdown rendered by Python-Markdown and markdown-it-py, loaded in
    headless Chromium with scripts on (every request refused: images fail, onerror runs): no
    dialog. An alert shows before the page's load event (alert() blocks until dismissed), so
    each page is done with when set_content returns; the last page is the control that
    shows a dialog is seen. (Script links are the static test's, above: a click is needed.)"""
    import markdown
    from markdown_it import MarkdownIt
    from playwright.sync_api import sync_playwright

    url = "http://127.0.0.1/notes/page.html"
    bodies = []
    for hostile in HOSTILE:
        html = f"<html><body><article><p>{ARTICLE} {hostile} {ARTICLE}</p></article></body></html>"
        found, _ = page_content(html, parse(html, url), url, ["markdown"], 1_000_000, 60)
        bodies += [markdown.markdown(found["markdown"]), MarkdownIt().render(found["markdown"])]
    dialogs: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_page()
            page.route("**/*", lambda route: route.abort())  # nothing leaves the browser
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            for body in [*bodies, CONTROL]:
                page.set_content(f"<!doctype html><body>{body}</body>", wait_until="load")
        finally:
            browser.close()
    assert dialogs == ["control"]


def test_markdown_keeps_the_pages_text_and_code_as_they_read():
    html = (
        f"<html><body><article><p>{ARTICLE} Compare a &lt; b &amp; c with <code>x &lt; y</code> "
        "and <a href='javascript:void(0)'>a button</a>.</p></article></body></html>"
    )
    url = "http://127.0.0.1/page.html"
    found, _ = page_content(html, parse(html, url), url, ["markdown"], 1_000_000, 60)
    assert "Compare a &lt; b &amp; c with `x < y` and a button." in found["markdown"]


def article(words: int) -> str:
    """A valid article of about 8 bytes a word, linking to the site's small page."""
    paragraph = "<p>" + " ".join(f"word{n % 997}" for n in range(100)) + "</p>"
    return paragraph * (words // 100) + "<p><a href='/small.html'>the small page</a></p>"


# Pages that cost the extraction more than its budget, or that the HTML parser cannot read
# whole, each linking to /small.html (whose record shows the link was followed).
COSTLY = {
    "/large.html": article(160_000),  # about 1.3 MB, above the default 1 MB
    "/slow.html": article(30_000),  # about 240 kB: more than the test's content_timeout
    "/deep.html": "<div>" * 300 + "deep" + "</div>" * 300 + "<a href='/small.html'>s</a>",
    "/small.html": f"<p>{ARTICLE}</p>",
}


def costly_site(req: BaseHTTPRequestHandler) -> None:
    if req.path == "/":
        links = "".join(f"<a href='{path}'>{path}</a>" for path in COSTLY)
        return reply(req, 200, f"<html><body>{links}</body></html>".encode())
    if req.path not in COSTLY:
        return reply(req, 404, b"missing")
    head = f"<html><head><title>Title of {req.path}</title></head><body>"
    reply(req, 200, (head + COSTLY[req.path] + "</body></html>").encode())


def test_content_past_its_budget_is_skipped_and_the_page_keeps_its_record(redis_url, tmp_path):
    settings = tmp_path / "crawl.toml"
    settings.write_text("[crawl]\ncontent_timeout = 0.05\n")
    with HTTPSite(costly_site, host="127.0.0.36") as http:
        records = crawl(
            redis_url, http.base, tmp_path / "out.jsonl", "--content", "text,markdown",
            "--config", str(settings),
        )  # fmt: skip
    pages = {r["url"].removeprefix(http.base): r for r in records}
    assert pages["/small.html"]["outcome"] == "fetched"
    skipped = {"/large.html": "too_large", "/slow.html": "timeout", "/deep.html": "too_deep"}
    for path, reason in skipped.items():
        record = pages[path]
        assert (record["outcome"], record["title"], record["outlinks"], record["attempts"]) == (
            "fetched", f"Title of {path}", 1, 1
        ), path  # fmt: skip
        assert record["content_skipped"] == reason, path
        assert record["content"]["text"] is None and record["content"]["markdown"] is None


def test_a_text_node_the_parser_cuts_is_said_not_extracted_as_empty():
    html = "<html><body><p>" + "word " * 2_100_000 + "</p></body></html>"  # 10.5 MB of text
    url = "http://127.0.0.1/big.html"
    found, skipped = page_content(html, parse(html, url), url, ["text"], 20_000_000, 60)
    assert (skipped, found["text"]) == ("parser_limit", None)


# Pages abridged from Debian's documentation packages, their markup as it is: PostgreSQL's
# reference page (postgresql-doc-15, sql-select.html), Python's listing page (python3.11-doc,
# library/internet.html) and the Apache manual's module page (apache2-doc, mod_alias.html).
INTRO = (
    "The modules described in this chapter implement internet protocols and support "
    "for related technology. They are all implemented in Python. Here is an overview:"
)
DEBIAN_DOCS = {
    "postgresql/sql-select.html": (
        '<div class="navheader"><table width="100%" summary="Navigation header"><tr><th '
        'colspan="5" align="center">SELECT</th></tr><tr><td width="10%" align="left"><a '
        'accesskey="p" href="sql-security-label.html" title="SECURITY LABEL">Prev</a> </td>'
        '<td width="10%" align="left"><a accesskey="u" href="sql-commands.html" title="SQL '
        'Commands">Up</a></td><th width="60%" align="center">SQL Commands</th><td width="10%" '
        'align="right"><a accesskey="h" href="index.html">Home</a></td><td width="10%" '
        'align="right"> <a accesskey="n" href="sql-selectinto.html">Next</a></td></tr></table>'
        '<hr /></div><div class="refentry" id="SQL-SELECT"><div class="titlepage"></div><div '
        'class="refnamediv"><h2><span class="refentrytitle">SELECT</span></h2><p>SELECT, '
        "TABLE, WITH — retrieve rows from a table or view</p></div><div "
        'class="refsynopsisdiv"><h2>Synopsis</h2><pre class="synopsis">SELECT [ ALL | '
        'DISTINCT ] [ * | <em class="replaceable"><code>expression</code></em> ]</pre></div>'
        '<div class="refsect1" id="id-1.9.3.172.6"><h2>Description</h2><p><code '
        'class="command">SELECT</code> retrieves rows from zero or more tables. The general '
        'processing of <code class="command">SELECT</code> is as follows: all queries in '
        'the <code class="literal">WITH</code> list are computed.</p><div class="refsect2" '
        'id="SQL-WITH"><h3>WITH Clause</h3><p>The <code class="literal">WITH</code> clause '
        "allows you to specify one or more subqueries that can be referenced by name in the "
        'primary query. See <a class="xref" href="queries-with.html">Section 7.8</a>.</p>'
        '</div></div></div><div class="navfooter"><hr /><table width="100%" summary='
        '"Navigation footer"><tr><td width="40%" align="left"><a accesskey="p" '
        'href="sql-security-label.html">Prev</a> </td><td width="20%" align="center"><a '
        'accesskey="u" href="sql-commands.html">Up</a></td><td width="40%" align="right"> <a '
        'accesskey="n" href="sql-selectinto.html">Next</a></td></tr></table></div>'
    ),
    "python/library/internet.html": (
        '<div class="related" role="navigation" aria-label="related navigation"><h3>'
        'Navigation</h3><ul><li class="right"><a href="../genindex.html">index</a></li><li '
        'class="right"><a href="webbrowser.html" accesskey="N">next</a> |</li></ul></div>'
        '<div class="document"><div class="documentwrapper"><div class="bodywrapper"><div '
        'class="body" role="main"><section id="internet-protocols-and-support"><h1>Internet '
        'Protocols and Support<a class="headerlink" href="#internet-protocols-and-support">¶'
        f'</a></h1><p id="index-1">{INTRO}</p><div class="toctree-wrapper compound"><ul><li '
        'class="toctree-l1"><a class="reference internal" href="webbrowser.html"><code '
        'class="xref py py-mod docutils literal notranslate"><span class="pre">webbrowser'
        '</span></code> — Convenient web-browser controller</a><ul><li class="toctree-l2">'
        '<a class="reference internal" href="webbrowser.html#webbrowser.open"><code '
        'class="docutils literal notranslate"><span class="pre">open()</span></code></a></li>'
        '</ul></li><li class="toctree-l1"><a class="reference internal" href="wsgiref.html">'
        '<code class="xref py py-mod docutils literal notranslate"><span class="pre">wsgiref'
        "</span></code> — WSGI Utilities and Reference Implementation</a></li></ul></div>"
        '</section></div></div></div><div class="sphinxsidebar" role="navigation"><div '
        'class="sphinxsidebarwrapper"><div><h4>Previous topic</h4><p class="topless"><a '
        'href="pyexpat.html">xml.parsers.expat</a></p></div><div role="note"><h3>This Page'
        '</h3><ul class="this-page-menu"><li><a href="../bugs.html">Report a Bug</a></li>'
        '</ul></div><div id="searchbox" role="search"><h3 id="searchlabel">Quick search</h3>'
        "</div></div></div></div>"
    ),
    "apache/mod/mod_alias.html": (
        '<div id="page-header"><p class="menu"><a href="../mod/">Modules</a></p><p '
        'class="apache">Apache HTTP Server Version 2.4</p></div><div class="up"><a '
        'href="./">Modules</a></div><div id="page-content"><div id="preamble"><h1>Apache '
        "Module mod_alias</h1><h3>Summary</h3><p>The directives contained in this module "
        "allow for manipulation and control of URLs as requests arrive at the server. The "
        '<code class="directive"><a href="#alias">Alias</a></code> and <code class='
        '"directive"><a href="#scriptalias">ScriptAlias</a></code> directives are used to '
        'map between URLs and filesystem paths.</p></div><h2><a name="alias" id="alias">'
        "Alias</a> Directive</h2><p>The Alias directive allows documents to be stored in the "
        "local filesystem other than under the DocumentRoot.</p></div>"
    ),
}


def debian_markdown(path: str) -> str:
    url = "http://127.0.0.1/" + path
    html = f"<html><head><title>{path}</title></head><body>{DEBIAN_DOCS[path]}</body></html>"
    found, skipped = page_content(html, parse(html, url), url, ["markdown"], 1_000_000, 60)
    assert skipped is None
    return found["markdown"]


def test_the_main_blocks_headings_lists_and_text_are_kept_and_its_navigation_left_out():
    postgresql = debian_markdown("postgresql/sql-select.html")
    headings = [line for line in postgresql.splitlines() if line.startswith("#")]
    assert headings == ["## SELECT", "## Synopsis", "## Description", "### WITH Clause"]
    assert "[Section 7.8](http://127.0.0.1/postgresql/queries-with.html)" in postgresql
    for navigation in ("Prev", "Next", "Home", "SQL Commands"):
        assert navigation not in postgresql
    python = debian_markdown("python/library/internet.html")
    library = "http://127.0.0.1/python/library/"
    assert markdown_links(python) == [
        library + "internet.html#internet-protocols-and-support",
        library + "webbrowser.html",
        library + "webbrowser.html#webbrowser.open",
        library + "wsgiref.html",
    ]
    assert "WSGI Utilities and Reference Implementation" in python
    for navigation in ("Navigation", "Previous topic", "This Page", "Report a Bug", "Quick"):
        assert navigation not in python
    apache = debian_markdown("apache/mod/mod_alias.html")
    assert apache.startswith("# Apache Module mod\\_alias\n")
    alias = "http://127.0.0.1/apache/mod/mod_alias.html"
    assert (
        f"The [`Alias`]({alias}#alias) and [`ScriptAlias`]({alias}#scriptalias) directives"
        in apache
    )
    assert "Apache HTTP Server Version 2.4" not in apache


def test_the_content_bench_counts_what_the_markdown_lost():
    from rqcrawl.bench.content import TreeNumbers, judge_page

    origin = "http://127.0.0.1:9"
    source = (
        b"<html><body><div class='nav'><h3>Quick search</h3></div><div role='main'>"
        b"<h1>Guide</h1><h2>Use &amp; abuse</h2><h3>Gone</h3><a href='#top'>top</a>"
        b"<a href='#lost'>lost</a><a href='#moved'>moved</a></div></body></html>"
    )
    markdown = (
        "# **Guide**[¶](http://127.0.0.1:9/a.html#top)\n\n## Use &amp; abuse\n\n"
        "[b](http://127.0.0.1:9/b.html) [c](http://127.0.0.1:9/c.html#x) "
        "[out](http://example.com/) [moved](http://127.0.0.1:9/#moved) Quick search"
    )
    numbers = TreeNumbers()
    fetched = {origin + "/a.html", origin + "/b.html"}
    judge_page(origin + "/a.html", source, markdown, origin, fetched, numbers)
    assert (numbers.links.kept, numbers.links.asked) == (2, 4)  # c.html, the root's #moved
    assert (numbers.anchors.kept, numbers.anchors.asked) == (1, 3)  # #lost is not there
    assert (numbers.own_page.kept, numbers.own_page.asked) == (1, 2)  # #moved is elsewhere
    assert (numbers.headings.kept, numbers.headings.asked) == (2, 3)  # "Gone" is lost
    assert (numbers.navigation.kept, numbers.navigation.asked) == (1, 1)


def test_a_process_runs_two_extractions_at_once_and_none_its_page_stopped_waiting_for():
    """Sixteen slots' extractions share one interpreter: run all at once, each takes sixteen
    times as long and pages past their budget go on slowing the rest. Two run at a time,
    and one whose page stopped waiting before its turn never runs."""
    from rqcrawl.parse import content

    lock, running, most, ran = threading.Lock(), [0], [0], []

    def work(name: str):
        def extract() -> dict:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.3)
            with lock:
                running[0] -= 1
            ran.append(name)
            return {"name": name}

        return extract

    outcomes: dict[str, object] = {}
    pages = [
        threading.Thread(
            target=lambda n=n: outcomes.update({n: content._abandoned_after(0.5, work(n))})
        )  # fmt: skip
        for n in "abcdefgh"
    ]
    for page in pages:
        page.start()
    for page in pages:
        page.join()
    for extraction in [t for t in threading.enumerate() if t.name == "rqcrawl-content"]:
        extraction.join(10)  # the abandoned ones run, or return at their turn, to their end
    assert most[0] == 2
    assert {n for n, got in outcomes.items() if got != "timeout"} <= set(ran)
    assert len(ran) < 8  # the last pages stopped waiting before their turn


def test_a_short_pages_main_block_is_kept_alone_when_its_sidebar_says_more():
    """Python's faq/index.html: a role=main of six links beside a sidebar of more text. The
    sidebar ("Previous topic", "Report a Bug") stays out of the markdown."""
    sidebar = "".join(f"<li><a href='t{n}.html'>Previous topic {n}</a></li>" for n in range(40))
    html = (
        "<html><body><div role='main'><h1>FAQ</h1><ul>"
        "<li><a href='general.html'>General</a></li><li><a href='design.html'>Design</a></li>"
        f"</ul></div><div class='sphinxsidebar'><h3>Navigation</h3><ul>{sidebar}</ul>"
        "<a href='bugs.html'>Report a Bug</a></div></body></html>"
    )
    url = "http://127.0.0.1:9/faq/index.html"
    found, skipped = page_content(html, parse(html, url), url, ["markdown"], 1_000_000, 60)
    assert skipped is None
    assert "[General](http://127.0.0.1:9/faq/general.html)" in found["markdown"]
    assert "Previous topic" not in found["markdown"]
    assert "Report a Bug" not in found["markdown"]

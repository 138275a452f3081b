"""Page content in the records (`--content`): a documentation tree built here (navigation,
sidebar, footer and a body per page, plus a JSON document), crawled by `rqcrawl crawl` with real
workers over a real Redis: each page's main text holds its body and none of the
navigation; markdown keeps the body's heading; the page's metadata is recorded; the JSON document
says it was skipped; a crawl without `--content` records no content at all."""

from __future__ import annotations

import subprocess
from http.server import BaseHTTPRequestHandler

import pytest
from helpers import BIN, env_with, read_jsonl
from servers import HTTPSite, reply
from test_api import finished

from rqcrawl import api
from rqcrawl.config import ConfigError, CrawlConfig
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

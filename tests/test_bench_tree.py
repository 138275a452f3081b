"""`rqcrawl bench --tree DIR`: a static tree on disk, served by the bench's server, crawled
by a real rqcrawl worker (and by the Scrapy spider when Scrapy is installed), with the page
set each crawl answered."""

from __future__ import annotations

import re
import subprocess

import pytest
from helpers import BIN

from rqcrawl.bench.report import table
from rqcrawl.bench.runs import run_rqcrawl
from rqcrawl.bench.tree import TreeSpec

PAGES = {
    "index.html": '<title>home</title><a href="sub/">sub</a> <a href="a.html?x=1">a?</a> '
    '<a href="a.html#top">a</a> <a href="notes.txt">notes</a> <a href="pic.png">pic</a> '
    '<a href="missing.html">gone</a> <a href="mailto:x@example.org">mail</a> '
    '<a href="http://external.invalid/">away</a>',
    "a.html": '<title>a</title><a href="sub/b.html">b</a>',
    "sub/index.html": '<title>sub</title><a href="../a.html">a</a>',
    "sub/b.html": '<title>b</title><a href="/index.html">home</a>',
    "orphan.html": "<title>linked from nowhere</title>",
    "notes.txt": "plain text, not parsed",
    "pic.png": "not followed: an image",
}
# every answered path: a query is the file without it, a directory its index.html, a missing
# page a 404, a text file an answer that is not parsed; not the image (a denied extension),
# not the orphan, not another scheme or host
ANSWERED = {
    "/index.html", "/sub/", "/a.html?x=1", "/a.html", "/notes.txt", "/missing.html",
    "/sub/b.html",
}  # fmt: skip


@pytest.fixture
def tree(tmp_path):
    for name, text in PAGES.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(f"<!doctype html>{text}" if name.endswith(".html") else text)
    return tmp_path


def test_a_tree_is_its_files_by_path_with_directories_as_their_index(tree):
    spec = TreeSpec.load(tree)
    assert spec.start == "/index.html"
    assert spec.files["/sub/"] == spec.files["/sub/index.html"]
    assert spec.files["/pic.png"] == b"not followed: an image"
    assert spec.describe() == f"tree {tree}: 7 files (5 HTML), 0 MB"
    (tree / "index.html").unlink()
    assert TreeSpec.load(tree).start == "/a.html"  # the first HTML file
    (tree / "empty").mkdir()
    with pytest.raises(ValueError, match="no .html file"):
        TreeSpec.load(tree / "empty")


def test_rqcrawl_answers_every_page_of_the_tree_and_the_table_shows_it(tree):
    result = run_rqcrawl(TreeSpec.load(tree), 0.0, workers=1, threads=1, site_procs=1)
    assert result.page_set == ANSWERED
    assert result.pages == len(ANSWERED)
    header, _, row = table([result]).splitlines()
    assert header.split()[:5] == ["crawler", "procs", "lat", "ms", "pages"]
    assert row.split()[:4] == ["rqcrawl", "1", "0", str(len(ANSWERED))]


def test_the_bench_compares_both_crawlers_on_the_same_pages_of_the_tree(tree):
    pytest.importorskip("scrapy", reason="Scrapy (rqcrawl[bench] or [test]) is not installed")
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--tree", str(tree), "--workers", "1",
         "--site-procs", "1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()[1:5]}
    assert rows["rqcrawl"][3] == rows["scrapy"][3] == str(len(ANSWERED)), proc.stdout
    assert f"page set: every crawl answered the same {len(ANSWERED)} paths" in proc.stdout
    assert re.search(r"best rqcrawl .* / best Scrapy .* pages/s = [\d.]+x", proc.stdout)
    assert f"reproduce: rqcrawl bench --tree {tree} --workers 1 " in proc.stdout

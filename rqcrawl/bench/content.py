"""`rqcrawl bench --content DIR...`: what `--content markdown` hands a pipeline, measured on
real documentation trees (the Python and PostgreSQL docs of Debian's python3.11-doc and
postgresql-doc-15) and on big pages.

Each tree is served on 127.0.0.1 (site.SiteServer) and crawled whole by `api.crawl` (the
path of `rqcrawl crawl`: an embedded Redis, local workers, the records as delivered) with
`--content markdown`. Its records are judged against the tree's files:

- links: of the markdown links to the tree's host, the share that resolve (fragment aside)
  to a URL the crawl fetched with 200;
- anchors: of the `#fragment` links of a page's main block, the share whose markdown link
  is the page itself with that fragment (kept), and of those the markdown keeps at all, the
  share that point at the page itself (on their own page: the home page or the site root
  with the fragment is the fault this guards against);
- headings: of the h1-h3 headings of a page's main block (its role=main or <main>, else
  the body's blocks but those whose class or id says nav, header or footer), the share
  that are headings of its markdown, by their text;
- navigation: the pages whose markdown holds a string of the trees' navigation (NAVIGATION);
- the workers' peak RSS (VmHWM, sampled from /proc during the crawl), and the extraction's
  time per page (rqcrawl.parse.content.page_content in this process, on every SAMPLE-th
  page of the tree).

The big pages: a valid page of 4.95 MB (sections, headings, lists) and 48 ordinary
articles of 4.5 MB, crawled with 16 slots; every one should be recorded `fetched` with its
links (each links to a small page of its own, after its body), its content skipped or
bounded by `content_max_bytes`.
"""

from __future__ import annotations

import html
import os
import re
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import click
import lxml.html

from rqcrawl import api
from rqcrawl.config import CrawlConfig
from rqcrawl.parse.content import page_content
from rqcrawl.parse.extract import decode, parse
from rqcrawl.parse.urls import canonicalize

from .runs import proc_peak_rss_kb
from .site import SiteServer
from .tree import TreeSpec

SLOTS = 16  # requests in flight in the one worker process (RQCRAWL_SLOTS)
SAMPLE = 4  # every 4th HTML page of a tree is timed in this process
BIG_ARTICLES = 48
# The navigation of the Python docs (Sphinx's sidebar, footer) and the PostgreSQL docs
# (DocBook's navheader and navfooter: their links), which no page's markdown should hold.
NAVIGATION = (
    "Quick search", "Previous topic", "Next topic", "This Page", "Show Source",
    "Report a Bug", "Found a bug", "© Copyright", "[Prev](", "[Next](", "[Up](", "[Home](",
)  # fmt: skip
MARKDOWN_LINK = re.compile(r"\]\((https?://[^)\s]+)\)")
MARKDOWN_HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
INLINE_LINK = re.compile(r"\[([^\]]*)\]\([^)\s]*\)")
NOT_NAV = (
    "not(contains(@class, 'nav') or contains(@id, 'nav') or contains(@class, 'header') "
    "or contains(@id, 'header') or contains(@class, 'footer') or contains(@id, 'footer'))"
)


def report(dirs: list[str]) -> None:
    """Crawl each tree and the big pages; print their numbers and the command."""
    for directory in dirs:
        spec = TreeSpec.load(directory)
        click.echo(f"{spec.describe()}: crawling with --content markdown...", err=True)
        crawled = crawl_site(spec, SLOTS)
        numbers = judge_tree(spec, crawled)
        times = extraction_times(spec)
        click.echo(tree_lines(spec, crawled, numbers, times))
    click.echo("big pages: crawling...", err=True)
    click.echo(big_lines(crawl_site(big_site(), SLOTS)))
    click.echo(f"{os.cpu_count()} CPUs, load average {load_average()}")
    click.echo("reproduce: rqcrawl bench " + " ".join(f"--content {d}" for d in dirs))


@dataclass
class Crawled:
    """A crawl's records, its seed's origin, its wall time and its worker's peak RSS."""

    origin: str
    records: list[dict]
    wall_s: float
    peak_rss_kb: int


def crawl_site(spec: TreeSpec, slots: int) -> Crawled:
    """`spec` served on 127.0.0.1, crawled whole by api.crawl with `--content markdown`."""
    server = SiteServer(spec, procs=2).start()
    peak = PeakRss(os.getpid())
    records = []
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-") as tmp:
            for record in api.crawl(
                [server.origin + spec.start], data_dir=tmp, workers=1, threads=slots,
                content=["markdown"], allow_private=True, delay=0.0, max_depth=1000,
                host_concurrency=slots,
            ):  # fmt: skip
                records.append(record)
                peak.sample()
            peak.sample(force=True)
    finally:
        server.stop()
    return Crawled(server.origin, records, time.monotonic() - started, peak.kb)


class PeakRss:
    """The largest peak RSS (VmHWM) of the worker processes under `pid`, sampled at most
    every 0.2 s (VmHWM only grows: a sample near a process's end sees its peak)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.kb, self.last = pid, 0, 0.0

    def sample(self, force: bool = False) -> None:
        if not force and time.monotonic() - self.last < 0.2:
            return
        self.last = time.monotonic()
        for pid in _descendants(self.pid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if b"worker" in fh.read():
                        self.kb = max(self.kb, proc_peak_rss_kb(pid))
            except OSError:  # it ended meanwhile
                continue


def _descendants(pid: int) -> Iterator[int]:
    """The processes under `pid`, from each process's parent in /proc."""
    parents: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(parent, []).append(int(entry))
    todo = list(parents.get(pid, []))
    while todo:
        child = todo.pop()
        yield child
        todo.extend(parents.get(child, []))


@dataclass
class Tally:
    """Kept of asked, for one measure."""

    kept: int = 0
    asked: int = 0

    def add(self, kept: int, asked: int) -> None:
        self.kept += kept
        self.asked += asked

    def __str__(self) -> str:
        share = 100 * self.kept / self.asked if self.asked else 100.0
        return f"{share:.2f} % ({self.kept} of {self.asked})"


@dataclass
class TreeNumbers:
    links: Tally = field(default_factory=Tally)
    anchors: Tally = field(default_factory=Tally)
    own_page: Tally = field(default_factory=Tally)  # the anchors kept, on their own page
    headings: Tally = field(default_factory=Tally)
    navigation: Tally = field(default_factory=Tally)  # pages with navigation, of all
    skipped: dict[str, int] = field(default_factory=dict)


def judge_tree(spec: TreeSpec, crawled: Crawled) -> TreeNumbers:
    """The measures of the module's docstring over the crawl's HTML records."""
    numbers = TreeNumbers()
    fetched = {canonicalize(r["url"]) for r in crawled.records if r.get("status") == 200}
    for record in crawled.records:
        if record.get("content_skipped"):
            reason = record["content_skipped"]
            numbers.skipped[reason] = numbers.skipped.get(reason, 0) + 1
        markdown = (record.get("content") or {}).get("markdown")
        path = unquote(urlsplit(record["url"]).path)
        if markdown is None or not path.endswith((".html", "/")):
            continue
        source = spec.files.get(urlsplit(record["url"]).path)
        if source is None:
            continue
        judge_page(record["url"], source, markdown, crawled.origin, fetched, numbers)
    return numbers


def judge_page(
    url: str, source: bytes, markdown: str, origin: str, fetched: set[str], numbers: TreeNumbers
) -> None:
    """One page's links, anchors, headings and navigation, into `numbers`."""
    links = [link for link in MARKDOWN_LINK.findall(markdown) if link.startswith(origin)]
    resolved = sum(canonicalize(link.split("#", 1)[0]) in fetched for link in links)
    numbers.links.add(resolved, len(links))
    block = main_block(lxml.html.document_fromstring(source))
    own = {link.partition("#")[2] for link in links if link.split("#", 1)[0] == url}
    hrefs = block.xpath(".//a[starts-with(@href, '#')]/@href")
    anchors = {unquote(href[1:]) for href in hrefs if href != "#"}
    on_own = len(anchors & {unquote(a) for a in own})
    numbers.anchors.add(on_own, len(anchors))
    kept = {unquote(link.partition("#")[2]) for link in links if "#" in link} & anchors
    numbers.own_page.add(on_own, len(kept))  # (the page's own links are among them)
    wanted = [plain(h.text_content()) for h in block.xpath(".//h1|.//h2|.//h3")]
    found = {plain(INLINE_LINK.sub(r"\1", h)) for h in MARKDOWN_HEADING.findall(markdown)}
    numbers.headings.add(sum(h in found for h in wanted if h), sum(1 for h in wanted if h))
    numbers.navigation.add(any(s in markdown for s in NAVIGATION), 1)


def main_block(tree: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    """The page's main block as the bench judges it: its role=main or <main>, else its body
    without the blocks that say they are navigation, header or footer."""
    mains = tree.xpath("//*[@role='main']|//main")
    if mains:
        return mains[0]
    body = tree.find("body")
    for block in body.xpath(f"./*[not({NOT_NAV})]"):
        body.remove(block)
    return body


def plain(text: str) -> str:
    """A heading's words as a reader sees them: without markdown's emphasis, code marks
    and escapes, `&lt;` and `&amp;` read as `<` and `&`, without the pilcrow."""
    text = re.sub(r"(?<!\\)[*`]", "", text)
    text = html.unescape(re.sub(r"\\(.)", r"\1", text)).replace("¶", "")
    return " ".join(text.split())


def extraction_times(spec: TreeSpec) -> tuple[list[float], list[float]]:
    """Seconds of page_content (markdown) on every SAMPLE-th HTML page of the tree: wall
    time, and CPU time of this process (its extraction thread), which a loaded machine
    stretches less."""
    limits = CrawlConfig()
    origin = "http://127.0.0.1:8000"
    paths = [p for p in sorted(spec.files) if p.endswith(".html")][::SAMPLE]
    wall, cpu = [], []
    for path in paths:
        text = decode(spec.files[path], "text/html")
        page = parse(text, origin + path)
        started, cpu_started = time.perf_counter(), time.process_time()
        page_content(text, page, origin + path, ["markdown"], limits.content_max_bytes, 60)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    return wall, cpu


def median_p90(times: list[float]) -> str:
    p90 = statistics.quantiles(times, n=10)[-1] if len(times) > 1 else times[0]
    return f"median {statistics.median(times) * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms"


def tree_lines(
    spec: TreeSpec, crawled: Crawled, numbers: TreeNumbers, times: tuple[list[float], list[float]]
) -> str:
    ok = sum(r.get("status") == 200 for r in crawled.records)
    wall, cpu = times
    return "\n".join([
        f"{spec.describe()}: {len(crawled.records)} records ({ok} with 200) in "
        f"{crawled.wall_s:.1f} s, {SLOTS} slots; content skipped: {numbers.skipped or 'none'}",
        f"  markdown links that resolve to a fetched page: {numbers.links}",
        f"  #fragment links kept on their own page:        {numbers.anchors}",
        f"  of those kept, on their own page:              {numbers.own_page}",
        f"  h1-h3 headings of the main block kept:         {numbers.headings}",
        f"  pages with navigation strings:                 {numbers.navigation}",
        f"  extraction per page ({len(wall)} pages): wall {median_p90(wall)}; "
        f"CPU {median_p90(cpu)}",
        f"  worker peak RSS: {crawled.peak_rss_kb / 1024:.0f} MB",
    ])  # fmt: skip


def big_site() -> TreeSpec:
    """`/` links to a valid 4.95 MB page and BIG_ARTICLES ordinary 4.5 MB articles; each
    of those links, after its body, to a small page of its own."""
    files = {"/small/valid.html": b"<title>small</title><p>leaf</p>"}
    files["/valid.html"] = big_page(4_950_000, "valid", sections=True)
    for n in range(BIG_ARTICLES):
        files[f"/small/a{n}.html"] = b"<title>small</title><p>leaf</p>"
        files[f"/a{n}.html"] = big_page(4_500_000, f"a{n}", sections=False)
    links = "".join(f"<a href='{p}'>{p}</a>" for p in files if not p.startswith("/small"))
    files["/"] = f"<html><head><title>big</title></head><body>{links}</body></html>".encode()
    return TreeSpec(Path("big pages"), files, "/")


def big_page(size: int, name: str, sections: bool) -> bytes:
    """A valid HTML page of about `size` bytes: paragraphs of words (in sections with a
    heading and a list each when `sections`), then a link to /small/`name`.html."""
    words = " ".join(f"word{n % 997}" for n in range(100))
    part = f"<p>{words}</p>" * 9
    if sections:
        part = f"<section><h2>Part</h2>{part}<ul><li>one</li><li>two</li></ul></section>"
    head = f"<!DOCTYPE html><html lang='en'><head><title>{name}</title></head><body><main>"
    tail = f"<p><a href='/small/{name}.html'>the small page</a></p></main></body></html>"
    body = part * ((size - len(head) - len(tail)) // len(part))
    return (head + body + tail).encode()


def big_lines(crawled: Crawled) -> str:
    pages = {urlsplit(r["url"]).path: r for r in crawled.records}
    big = [r for p, r in pages.items() if p != "/" and not p.startswith("/small")]
    whole = [r for r in big if r.get("outcome") == "fetched" and r.get("outlinks") == 1]
    followed = sum(p.startswith("/small") and r.get("status") == 200 for p, r in pages.items())
    skipped: dict[str, int] = {}
    for record in big:
        reason = record.get("content_skipped") or "extracted"
        skipped[reason] = skipped.get(reason, 0) + 1
    return (
        f"big pages (one of 4.95 MB, {BIG_ARTICLES} of 4.5 MB), {SLOTS} slots: {len(whole)} "
        f"of {len(big)} fetched with their link, {followed} linked pages fetched; content: "
        f"{skipped}; {crawled.wall_s:.1f} s; worker peak RSS "
        f"{crawled.peak_rss_kb / 1024:.0f} MB"
    )


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())

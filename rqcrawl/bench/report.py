"""What `rqcrawl bench` prints: one crawl's measurements (Result), their medians over repeats,
the table of per-page numbers and the notes (ratios, Redis time per command, Bloom sizing)
that a cell cannot show. The runs that measure are in command.py; this is only arithmetic and
layout."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from rqcrawl.config import CrawlConfig
from rqcrawl.workers.runner import WORKER_CLASS

# The crawler column of stock `rq worker crawl` rows (RQ's default forking Worker), and of
# the same with the crawler imported in the parent (RQ_CONFIG=rqcrawl.workers.preload).
STOCK = "rq-stock"
PRELOADED = "rq-stock+preload"
NATIVE = "rqcrawl+bf"  # the recommended worker, the crawl on the native Bloom filter (BF.*)


@dataclass
class Result:
    """One crawl's measurements; derived per-page numbers are computed by the table."""

    crawler: str
    procs: int  # rqcrawl worker processes, or Scrapy's CONCURRENT_REQUESTS
    threads: int  # rqcrawl workers per process
    latency: float
    pages: int
    wall_s: float
    cpu_s: float
    peak_rss_kb: int
    site_cpu_s: float
    redis: dict = field(default_factory=dict)  # rqcrawl only
    page_set: frozenset[str] = frozenset()  # paths answered (`pages` of them), no redirects


def median_result(results: list[Result]) -> Result:
    """Medians of every number over repeats of one configuration."""
    first = results[0]

    def med(get):
        return statistics.median(get(r) for r in results)

    redis = {}
    if first.redis:
        redis = {
            k: med(lambda r, k=k: r.redis[k]) for k in first.redis if k not in ("calls", "usec")
        }
        for part in ("calls", "usec"):
            redis[part] = {
                name: med(lambda r, name=name, part=part: r.redis[part].get(name, 0))
                for name in first.redis[part]
            }
    return Result(
        first.crawler,
        first.procs,
        first.threads,
        first.latency,
        int(med(lambda r: r.pages)),
        med(lambda r: r.wall_s),
        med(lambda r: r.cpu_s),
        int(med(lambda r: r.peak_rss_kb)),
        med(lambda r: r.site_cpu_s),
        redis,
        first.page_set,
    )


COLUMNS = [
    ("crawler", "{}"),
    ("procs", "{}"),
    ("lat ms", "{:.0f}"),
    ("pages", "{}"),
    ("pages/s", "{:.1f}"),
    ("CPU ms/pg", "{:.2f}"),
    ("+Redis", "{}"),
    ("peak RSS MB", "{:.0f}"),
    ("Redis CPU ms/pg", "{}"),
    ("Redis us/pg", "{}"),
    ("Redis cmd/pg", "{}"),
    ("Redis RSS MB", "{}"),
    ("B/pending job", "{}"),
    ("B/held URL", "{}"),
    ("B/pending URL", "{}"),
    ("Bloom B/seen", "{}"),
    ("items B/seen", "{}"),
    ("site CPU ms/pg", "{:.2f}"),
]


def row(r: Result) -> list[str]:
    """The table's cells for one result ('-' where a number does not apply)."""
    rd = r.redis
    pages = max(r.pages, 1)

    def redis_cell(fmt: str, value) -> str:
        return fmt.format(value) if rd else "-"

    values = [
        r.crawler,
        f"{r.procs}x{r.threads}" if r.threads > 1 else r.procs,
        r.latency * 1000,
        r.pages,
        r.pages / r.wall_s if r.wall_s else 0.0,
        r.cpu_s * 1000 / pages,
        redis_cell("{:.2f}", rd and (r.cpu_s + rd["cpu_s"]) * 1000 / pages),
        r.peak_rss_kb / 1024,
        redis_cell("{:.2f}", rd and rd["cpu_s"] * 1000 / pages),
        redis_cell("{:.0f}", rd and command_usec(rd) / pages),
        redis_cell("{:.1f}", rd and rd["commands"] / pages),
        redis_cell("{:.0f}", rd and rd["rss"] / 2**20),
        redis_cell("{:.0f}", rd and rd["job_bytes"]),
        redis_cell("{:.0f}", rd and rd["held_bytes"]),
        redis_cell("{:.0f}", rd and rd["frontier_bytes"]),
        redis_cell("{:.0f}", rd and rd["bloom_bytes"] / max(rd["seen"], 1)),
        redis_cell("{:.0f}", rd and rd["items_bytes"] / max(rd["seen"], 1)),
        r.site_cpu_s * 1000 / pages,
    ]
    return [fmt.format(v) for (_, fmt), v in zip(COLUMNS, values, strict=True)]


def table(results: list[Result]) -> str:
    rows = [[name for name, _ in COLUMNS]] + [row(r) for r in results]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def notes(results: list[Result]) -> list[str]:
    """What the table cannot show in a cell: whether every crawl fetched the same pages,
    ratios asked for by the targets, Bloom sizing, the commands a job costs."""
    out = page_set_notes(results)
    by = {(r.crawler, r.procs, r.threads, r.latency): r for r in results}

    def rate(r: Result) -> float:
        return r.pages / r.wall_s if r.wall_s else 0.0

    for lat in sorted({r.latency for r in results}):
        ours = [r for r in results if r.crawler == "rqcrawl" and r.latency == lat]
        theirs = [r for r in results if r.crawler == "scrapy" and r.latency == lat]
        if ours and theirs:
            a, b = max(ours, key=rate), max(theirs, key=rate)
            out.append(
                f"latency {lat * 1000:.0f} ms: best rqcrawl ({workers_label(a)}) / best Scrapy "
                f"({b.procs} concurrent) pages/s = {rate(a) / rate(b):.2f}x"
            )
            if a.redis and b.cpu_s:
                out.append(f"latency {lat * 1000:.0f} ms: {cpu_share(a, b)}")
        for r in results:
            for kind in (STOCK, PRELOADED):
                stock = by.get((kind, r.procs, 1, lat))
                if r.crawler == "rqcrawl" and r.threads == 1 and stock:
                    out.append(
                        f"latency {lat * 1000:.0f} ms, {r.procs} worker(s): recommended worker "
                        f"({WORKER_CLASS}) / {kind} pages/s = {rate(r) / rate(stock):.1f}x"
                    )
        one, two = by.get(("rqcrawl", 1, 1, lat)), by.get(("rqcrawl", 2, 1, lat))
        if one and two:
            out.append(
                f"latency {lat * 1000:.0f} ms: rqcrawl 2 workers / 1 worker pages/s = "
                f"{rate(two) / rate(one):.2f}x"
            )
    for r in results:
        if r.redis:
            out.append(command_breakdown(r))
    mem = next((r.redis for r in results if r.redis), None)
    if mem:
        out.append(
            f"Bloom filter: {mem['bloom_bytes'] / 2**20:.1f} MB allocated for bloom_capacity "
            f"{mem['bloom_capacity']:,} = {mem['bloom_bytes'] / mem['bloom_optimum_bytes']:.3f}x "
            f"the optimum for that capacity; per seen URL it is that size / {mem['seen']:,} URLs"
        )
        sized = mem["sized_bloom_bytes"]
        out.append(
            f"Bloom filter sized to the crawl (bloom_capacity {mem['frontier_urls']:,}, all of "
            f"them added): {sized / mem['frontier_urls']:.2f} B per seen URL = "
            f"{sized / mem['sized_bloom_optimum_bytes']:.3f}x the optimum"
        )
        out.append(
            f"B/pending URL: Redis bytes per URL of a frontier holding all {mem['frontier_urls']:,}"
            f" URLs of the site with the default window "
            f"({min(CrawlConfig.window, mem['frontier_urls']):,} of them RQ jobs, the rest held)"
        )
    return out


def page_set_notes(results: list[Result], shown: int = 10) -> list[str]:
    """Whether every crawl answered the same URLs (paths: each had its own server) as the
    first, else what each lacks and has more (the first `shown` of each): a rate is only
    comparable on the same pages."""
    first = results[0] if results else None
    if first is None or not first.page_set:
        return []
    out = []
    for r in results[1:]:
        missing, extra = sorted(first.page_set - r.page_set), sorted(r.page_set - first.page_set)
        for what, urls in (("lacks", missing), ("has more", extra)):
            if urls:
                more = f" (and {len(urls) - shown} more)" if len(urls) > shown else ""
                out.append(
                    f"page set: {r.crawler} {r.procs} {what} {len(urls)} path(s) against "
                    f"{first.crawler} {first.procs}: {', '.join(urls[:shown])}{more}"
                )
    if not out:
        out.append(f"page set: every crawl answered the same {len(first.page_set)} paths")
    return out


# Commands whose commandstats time includes that of the commands they ran, which commandstats
# also counts under their own names.
WRAPPERS = ("evalsha", "eval", "exec")


def command_usec(rd: dict) -> int:
    """Redis's time executing commands (commandstats usec), each command counted once: the
    wrappers' time is left out, since it holds the time of the commands they ran (and a
    script's interpretation, which only Redis CPU shows)."""
    return sum(us for name, us in rd["usec"].items() if name not in WRAPPERS)


def cpu_share(ours: Result, scrapy: Result) -> str:
    """rqcrawl's CPU a page, Redis's included, as a share of Scrapy's in the same run: a
    machine twice as slow doubles both, so the share compares runs on different machines
    where milliseconds do not."""
    theirs = scrapy.cpu_s / max(scrapy.pages, 1)
    pages = max(ours.pages, 1)
    whole, redis = (ours.cpu_s + ours.redis["cpu_s"]) / pages, ours.redis["cpu_s"] / pages
    return (
        f"rqcrawl's CPU a page with Redis's / Scrapy's = {whole / theirs:.2f} "
        f"(Redis's alone {redis / theirs:.3f})"
    )


def command_breakdown(r: Result) -> str:
    """Where a page's Redis commands go: calls and time per page of every command run at
    least once per 20 pages, most called first, those inside scripts and transactions
    included."""
    rd, pages = r.redis, max(r.pages, 1)
    calls = ", ".join(
        f"{name} {n / pages:.1f} ({rd['usec'][name] / pages:.0f} us)"
        for name, n in sorted(rd["calls"].items(), key=lambda item: -item[1])
        if n / pages >= 0.05
    )
    return (
        f"{r.crawler} {workers_label(r)}, {r.latency * 1000:.0f} ms: Redis commands per page "
        f"{rd['commands'] / pages:.1f} ({command_usec(rd) / pages:.0f} us), by command, those "
        f"inside scripts and transactions included (evalsha's and exec's time includes "
        f"theirs): {calls}"
    )


def workers_label(r: Result) -> str:
    threads = f" x {r.threads} threads" if r.threads > 1 else ""
    return f"{r.procs} worker process(es){threads}"

"""`rqcrawl bench`: rqcrawl against Scrapy on the same generated local site, in the same run.

Each crawl gets a fresh site server and (for rqcrawl) a fresh private Redis (the embedded one
of `rqcrawl crawl`: Unix socket, append-only file), runs to the end, and is measured: wall
time from the seed to the last page, CPU and peak RSS of every crawler process (from /proc for
rqcrawl's workers, from `resource` inside the Scrapy process), Redis CPU and commands (INFO
deltas) and Redis bytes per pending job, per held URL and per seen URL.
Timings on a shared machine are noisy: compare rows of one run, and use --repeat for medians.
"""

from __future__ import annotations

import os

import click
from click.core import ParameterSource

from rqcrawl.defaults import PUMP_BATCH

from .report import NATIVE, PRELOADED, STOCK, median_result, notes, table
from .runs import SCRAPY_CONCURRENCY, installed, run_rqcrawl, run_scrapy
from .site import ChainSpec, FanSpec, SiteSpec
from .tree import TreeSpec

CARD_PAGES = 100  # the card's one-host site unless --pages says otherwise


def parse_list(kind):
    """A click callback for comma-separated lists such as `--workers 1,2`."""

    def parse(ctx, param, value: str | None) -> list:
        if value is None:  # an option without a default, not given
            return []
        try:
            return [kind(v) for v in value.split(",") if v.strip()]
        except ValueError:
            raise click.BadParameter(f"expected a comma-separated list: {value!r}") from None

    return parse


def load_average() -> str:
    """The 1, 5 and 15 min load averages: the machine may be shared, and rates show it."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def peers(ctx: click.Context, asked: dict[str, bool], explicit_only: bool = False) -> list[str]:
    """The peer crawlers of a mode (of "scrapy", "crawlee"): those asked for (on the command
    line only, when `explicit_only`) that are installed. One named on the command line but not
    installed is an error; one asked for by default is left out, saying so."""
    chosen = []
    for name, wanted in asked.items():
        explicit = ctx.get_parameter_source(f"with_{name}") == ParameterSource.COMMANDLINE
        if not wanted or (explicit_only and not explicit):
            continue
        if installed(name):
            chosen.append(name)
        elif explicit:
            raise click.ClickException(f"{name} is not installed: pip install 'rqcrawl[bench]'")
        else:
            click.echo(f"{name} is not installed, left out: pip install 'rqcrawl[bench]'", err=True)
    return chosen


@click.command()
@click.option("--pages", type=click.IntRange(min=10), default=20_000, show_default=True)
@click.option("--workers", default="1,2", show_default=True, callback=parse_list(int),
              help="rqcrawl worker counts to run, comma-separated.")  # fmt: skip
@click.option("--latency", default="0", show_default=True, callback=parse_list(float),
              help="Seconds added to every response, comma-separated (e.g. 0,0.1).")  # fmt: skip
@click.option("--threads", default="1", show_default=True, callback=parse_list(int),
              help="rqcrawl workers per process (threads), comma-separated.")  # fmt: skip
@click.option("--client", "http_client", default="requests", show_default=True,
              help="The rqcrawl workers' http_client (requests, httpx).")  # fmt: skip
@click.option("--scrapy/--no-scrapy", "with_scrapy", default=True,
              help="Also crawl with Scrapy, when installed (rqcrawl[bench]).")  # fmt: skip
@click.option("--crawlee/--no-crawlee", "with_crawlee", default=True,
              help="With --one-page (and --web, when given): also crawl with Crawlee for "
                   "Python, when installed (rqcrawl[bench]).")  # fmt: skip
@click.option("--concurrency", default=str(SCRAPY_CONCURRENCY), show_default=True,
              callback=parse_list(int),
              help="Scrapy CONCURRENT_REQUESTS values, comma-separated; the largest is "
                   "rqcrawl's host_concurrency.")  # fmt: skip
@click.option("--tree", type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="Crawl this static HTML tree (e.g. a documentation tree), served on "
                   "127.0.0.1, instead of the generated site (--pages).")  # fmt: skip
@click.option("--stock/--no-stock", default=False,
              help="Also crawl with stock forking `rq worker crawl` workers (same counts), "
                   "without and with RQ_CONFIG=rqcrawl.workers.preload.")  # fmt: skip
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Runs of each configuration; the table shows medians.")  # fmt: skip
@click.option("--site-procs", type=click.IntRange(min=1), default=2, show_default=True,
              help="Processes serving the site.")  # fmt: skip
@click.option("--revisit-memory", type=click.IntRange(min=10), metavar="N",
              help="Instead: bytes per known URL of a crawl with revisits of N pages, in its "
                   "SQLite task table and in Redis.")  # fmt: skip
@click.option("--db-url", "--db", "db_url", metavar="URL",
              help="With --revisit-memory: also measure the task table in this PostgreSQL "
                   "(postgresql://...); with --task-table: the database to build in.")  # fmt: skip
@click.option("--task-table", type=click.IntRange(min=PUMP_BATCH * 5), metavar="N",
              help="Instead: time one pump batch in a task table of N rows built in --db "
                   "(0.1 % and 100 % due).")  # fmt: skip
@click.option("--skewed", is_flag=True,
              help="Instead: exact depth against --no-exact-depth on a skewed two-host site "
                   "(one host's pages at one level under a Crawl-delay, the other's a chain), "
                   "with the largest --workers and --threads values.")  # fmt: skip
@click.option("--fan-pages", type=click.IntRange(min=1), default=40, show_default=True,
              help="With --skewed: the slow host's pages (all at depth 1).")  # fmt: skip
@click.option("--crawl-delay", type=click.FloatRange(min=0, max=60), default=0.5,
              show_default=True, help="With --skewed: the slow host's Crawl-delay.")  # fmt: skip
@click.option("--chain-pages", type=click.IntRange(min=2), default=300, show_default=True,
              help="With --skewed: the other host's chain of pages.")  # fmt: skip
@click.option("--shards", "shard_counts", callback=parse_list(int), metavar="N,...",
              help="Instead: the crawl over N Redis servers (shards) for each N, with "
                   "the largest --workers in total, on the site over --hosts hosts.")  # fmt: skip
@click.option("--hosts", type=click.IntRange(min=1, max=254), default=8, show_default=True,
              help="With --shards: hosts (127.0.0.1, .2, ...) of the site; with --card: "
                   "one-host sites (1 unless given).")  # fmt: skip
@click.option("--bloom-module", type=click.Path(exists=True, dir_okay=False),
              help="RedisBloom's redisbloom.so: also crawl with the native Bloom filter "
                   f"(rows {NATIVE}), the module loaded into the bench's Redis.")  # fmt: skip
@click.option(
    "--render",
    "render",
    is_flag=True,
    help="Instead: rendering in a browser on a script-built site beside plain "
    "fetching of its server-side twin (--pages, --workers, --render-workers).",
)
@click.option("--profile", is_flag=True,
              help="Instead: where a page's CPU goes, per stage, in the recommended worker "
                   "and in Redis, for each --workers count (rqcrawl.bench.ledger).")  # fmt: skip
@click.option("--redis-instructions", is_flag=True,
              help="Instead: the instructions Redis executes a page (valgrind's callgrind, "
                   "the same count run after run where CPU time moves with the machine) "
                   "while the largest --workers crawl --pages; medians of --repeat runs "
                   "(rqcrawl.bench.instructions).")  # fmt: skip
@click.option("--script-costs", is_flag=True,
              help="Instead: Redis's CPU a frontier script call before its work, a command "
                   "inside a script and Lua's own operations, on an embedded Redis of its "
                   "own; medians of --repeat rounds (rqcrawl.bench.scriptcost).")  # fmt: skip
@click.option("--render-workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --render: render worker processes (one browser each).")  # fmt: skip
@click.option("--one-page", is_flag=True,
              help="Instead: the fixed costs of `rqcrawl crawl` of a one-page site, at "
                   "default settings and with --delay 0: each phase's time (--timings) and "
                   "the site's requests, medians of --repeat runs; Scrapy and Crawlee at "
                   "their polite settings too, when installed.")  # fmt: skip
@click.option("--web", "web_hosts", type=click.IntRange(min=2, max=254), metavar="N",
              help="Instead: `rqcrawl crawl` at default settings of a web of N hosts with "
                   "latency and misbehaviours, judged from the servers' logs (wall time "
                   "against the politeness floor, requests per connection, rule checks); "
                   "with an explicit --scrapy or --crawlee, that crawler at its polite "
                   "settings too.")  # fmt: skip
@click.option("--card", is_flag=True,
              help="Instead: the card's fleet (`rqcrawl seed` and two plain `rq worker "
                   "crawl`) on a one-host site of --pages pages (100 unless given) at the "
                   "default delay: RQ jobs and deferrals per page, gaps between "
                   "requests.")  # fmt: skip
@click.option("--delay", "card_delay", type=click.FloatRange(min=0), metavar="S",
              help="With --card: `rqcrawl seed --delay S` (the default delay unless "
                   "given).")  # fmt: skip
@click.option("--max-depth", "card_depth", type=click.IntRange(min=0), default=3,
              show_default=True, help="With --card: `rqcrawl seed --max-depth`.")  # fmt: skip
@click.option("--card-timeout", type=click.FloatRange(min=1), default=1800, show_default=True,
              help="With --card: give the crawl up after this many seconds and print its "
                   "figures so far.")  # fmt: skip
@click.option("--content", "content_dirs", multiple=True, metavar="DIR",
              type=click.Path(exists=True, file_okay=False),
              help="Instead: what --content markdown hands a pipeline, on each static "
                   "HTML tree DIR (repeat the option) and on big pages: links, anchors, "
                   "headings kept, navigation, extraction time, worker RSS.")  # fmt: skip
@click.pass_context
def bench(
    ctx, pages, workers, threads, latency, http_client, with_scrapy, with_crawlee, concurrency,
    tree, stock,
    repeat, site_procs, revisit_memory, db_url, task_table, skewed, fan_pages, crawl_delay,
    chain_pages, shard_counts, hosts, bloom_module, render, render_workers, one_page, profile,
    redis_instructions, script_costs, web_hosts, card, card_delay, card_depth, card_timeout,
    content_dirs,
) -> None:  # fmt: skip
    """Benchmark rqcrawl against Scrapy on a generated local site (or a static tree) and print
    one table."""
    if content_dirs:
        from .content import report as content_report  # each mode loads only when asked

        content_report(list(content_dirs))
        return
    if web_hosts:
        from .web import report as web_report  # each mode loads only when asked

        asked = {"scrapy": with_scrapy, "crawlee": with_crawlee}
        web_report(web_hosts, peers(ctx, asked, explicit_only=True))
        return
    if card:
        from .card import CardRun
        from .card import report as card_report  # each mode loads only when asked

        def given(name: str) -> bool:
            return ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE

        run = CardRun(pages if given("pages") else CARD_PAGES, hosts if given("hosts") else 1,
                      card_delay, card_depth, card_timeout)  # fmt: skip
        card_report(run)
        return
    if one_page:
        from .onepage import report as one_page_report  # each mode loads only when asked

        one_page_report(repeat, peers(ctx, {"scrapy": with_scrapy, "crawlee": with_crawlee}))
        return
    if profile:
        from .ledger import report as ledger_report

        ledger_report(SiteSpec(pages=pages), workers, site_procs)
        return
    if redis_instructions:
        from .instructions import report as instructions_report

        instructions_report(SiteSpec(pages=pages), max(workers), site_procs, repeat)
        return
    if script_costs:
        from .scriptcost import report as script_costs_report

        script_costs_report(repeat)
        return
    if task_table:
        from .tasktable import report as table_report  # SQLAlchemy only for this one

        if not db_url:
            raise click.BadParameter("a database URL is needed", param_hint="--db")
        table_report(task_table, db_url)
        return
    if render:
        from .rendered import report as render_report  # each mode loads only when asked

        render_report(pages, max(workers), render_workers)
        return
    if shard_counts:
        from .sharded import report as sharded_report  # each mode loads only when asked

        if min(shard_counts) < 1:
            raise click.BadParameter("shard counts must be at least 1", param_hint="--shards")
        sharded_report(SiteSpec(pages=pages), hosts, shard_counts, max(workers), repeat)
        return
    if revisit_memory:
        from .revisit import report  # each mode loads only when asked

        report(revisit_memory, db_url)
        return
    if skewed:
        from .skewed import report as skewed_report  # each mode loads only when asked

        fan, chain = FanSpec(fan_pages, crawl_delay), ChainSpec(chain_pages)
        skewed_report(fan, chain, max(workers), max(threads), repeat)
        return
    if with_scrapy and not installed("scrapy"):
        click.echo("Scrapy is not installed: rqcrawl only (pip install 'rqcrawl[bench]')", err=True)
        with_scrapy = False
    try:
        spec = TreeSpec.load(tree) if tree else SiteSpec(pages=pages)
    except ValueError as exc:  # a tree without HTML
        raise click.BadParameter(str(exc), param_hint="--tree") from None
    runs = [("rqcrawl", n, t, lat) for lat in latency for t in threads for n in workers]
    if bloom_module:
        runs += [(NATIVE, n, t, lat) for lat in latency for t in threads for n in workers]
    if stock:
        runs += [(k, n, 1, lat) for k in (STOCK, PRELOADED) for lat in latency for n in workers]
    if with_scrapy:
        runs += [("scrapy", c, 1, lat) for lat in latency for c in concurrency]
    # rounds of every configuration in turn, not every repeat of one then the next: the load
    # of a shared machine changes over minutes, and each configuration should meet all of it
    reps: dict[tuple, list] = {run: [] for run in runs}
    load_before = load_average()
    for i in range(repeat):
        for crawler, procs, per_proc, lat in runs:
            click.echo(
                f"{crawler} {procs}x{per_proc} @ {lat * 1000:.0f} ms, run {i + 1}/{repeat}...",
                err=True,
            )
            if crawler == "scrapy":
                result = run_scrapy(spec, lat, procs, per_proc, site_procs)
            else:
                cap = max(concurrency)  # Scrapy's per-domain cap
                result = run_rqcrawl(
                    spec, lat, procs, per_proc, site_procs, crawler, bloom_module, cap,
                    http_client=http_client,
                )  # fmt: skip
            reps[crawler, procs, per_proc, lat].append(result)
    results = [median_result(r) for r in reps.values()]
    command = (
        f"rqcrawl bench {f'--tree {tree}' if tree else f'--pages {pages}'} "
        f"--workers {','.join(map(str, workers))} "
        f"--threads {','.join(map(str, threads))} "
        + (f"--client {http_client} " if http_client != "requests" else "")
        + f"--latency {','.join(map(str, latency))} --{'' if with_scrapy else 'no-'}scrapy "
        f"--concurrency {','.join(map(str, concurrency))} --{'' if stock else 'no-'}stock "
        f"--repeat {repeat} "
        f"--site-procs {site_procs}" + (f" --bloom-module {bloom_module}" if bloom_module else "")
    )
    site = spec.describe() if tree else (
        f"site: {pages} pages of {spec.min_bytes // 1000}-{spec.max_bytes // 1000} KB, "
        f"{spec.links} links each"
    )  # fmt: skip
    click.echo(
        f"{site}; {os.cpu_count()} CPUs, load average {load_before} before, "
        f"{load_average()} after; medians of {repeat} run(s)"
    )
    click.echo(table(results))
    for line in notes(results):
        click.echo(line)
    click.echo(f"reproduce: {command}")

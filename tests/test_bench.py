"""`rqcrawl bench --stock`: the stock forking `rq worker crawl` (with and without the preload)
measured beside the recommended worker in one run; `rqcrawl bench --revisit-memory`: what a
crawl with revisits keeps per known URL; `rqcrawl bench --skewed`: both depth modes on a skewed
two-host site; `rqcrawl bench --one-page`: the phases of a one-page crawl; `rqcrawl bench
--redis-instructions`: Redis's instructions a page."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from helpers import BIN
from servers import redisbloom_module

from rqcrawl.bench.runs import installed


def test_bench_prints_stock_and_recommended_workers_side_by_side():
    """With --bloom-module, also the recommended worker on the native Bloom filter."""
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--pages", "10", "--workers", "1", "--no-scrapy",
         "--stock", "--bloom-module", str(redisbloom_module())],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    table = lines[1 : lines.index(next(x for x in lines if x.startswith("latency")))]
    rows = {line.split()[0]: line.split() for line in table}
    for crawler in ("rqcrawl", "rq-stock", "rq-stock+preload", "rqcrawl+bf"):
        assert rows[crawler][3] == "10", rows[crawler]  # every page crawled
    assert re.search(r"rqcrawl\+bf .*bf\.madd", proc.stdout)  # through BF.MADD
    ratios = dict(re.findall(r"/ (rq-stock\S*) pages/s = ([\d.]+)x", proc.stdout))
    assert set(ratios) == {"rq-stock", "rq-stock+preload"}
    assert float(ratios["rq-stock"]) > 1  # forking per job is never the faster one


def test_bench_measures_a_revisit_crawls_bytes_per_known_url(postgres_url):
    """SQLite and PostgreSQL rows per known URL in the hundreds of bytes; Redis beyond the
    Bloom filter (sized to the crawl) and the records stream a few keys, not bytes per URL."""
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--revisit-memory", "200", "--db-url", postgres_url],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # the bench sizes the Bloom filter to the site: at its error rate (0.001 when full) a
    # false positive now and then keeps a page out, and it is not known
    known = re.search(r"crawl with revisits, (\d+) known URLs", proc.stdout)
    assert known and 195 <= int(known[1]) <= 200, proc.stdout
    table = re.search(r"SQLite (\d+), PostgreSQL (\d+)", proc.stdout)
    assert table and all(100 < int(b) < 2000 for b in table.groups()), proc.stdout
    redis = re.search(
        r"Bloom filter ([\d.]+), records stream (\d+); other keys ([\d,]+)", proc.stdout
    )
    bloom, records, other = (float(x.replace(",", "")) for x in redis.groups())
    assert 1 < bloom < 20 and records > 100, proc.stdout
    assert other < 5000, proc.stdout  # a few keys in all (2.5 KB at 200 or 1,000 URLs)


def test_the_notes_say_where_a_pages_redis_commands_and_time_go():
    """Per page: every command's calls and time, most called first, rare ones left out;
    Redis µs counts each command once (a script's or transaction's time holds its
    commands')."""
    from rqcrawl.bench.report import COLUMNS, Result, command_breakdown, row

    calls = {"hset": 300, "evalsha": 100, "setbit": 50, "exec": 20, "info": 2}
    usec = {"hset": 600, "evalsha": 5000, "setbit": 100, "exec": 400, "info": 10}
    redis = {"calls": calls, "usec": usec, "commands": 472, "cpu_s": 0.1, "rss": 2**20}
    redis |= dict.fromkeys(("job_bytes", "held_bytes", "frontier_bytes"), 1)
    redis |= {"bloom_bytes": 1, "items_bytes": 1, "seen": 1}
    r = Result("rqcrawl", 2, 1, 0.0, 100, 1.0, 1.0, 1000, 0.1, redis)
    note = command_breakdown(r)
    assert "Redis commands per page 4.7 (7 us)" in note  # hset, setbit and info: 710 us
    assert note.endswith("hset 3.0 (6 us), evalsha 1.0 (50 us), setbit 0.5 (1 us), exec 0.2 (4 us)")
    assert row(r)[[name for name, _ in COLUMNS].index("Redis us/pg")] == "7"


def test_bench_prints_what_a_script_call_and_an_operation_inside_one_cost(monkeypatch):
    """Every case measured on a real embedded Redis: a positive CPU time a call or an
    operation, CLAIM's case named with the count of functions it makes. (Fewer calls
    than the command makes: the numbers are the benchmark's business, not the test's.)"""
    from click.testing import CliRunner

    from rqcrawl.bench import scriptcost
    from rqcrawl.bench.command import bench

    monkeypatch.setattr(scriptcost, "CALLS", 1_000)
    monkeypatch.setattr(scriptcost, "INSIDE_CALLS", 100)  # (CPU time is read in ticks)
    result = CliRunner().invoke(bench, ["--script-costs", "--repeat", "2"])
    assert result.exit_code == 0, result.output
    rows = dict(re.findall(r"^  (\S.*?)\s+(\d+\.\d\d)  \(", result.output, re.M))
    assert len(rows) == 3 + len(scriptcost.INSIDE), result.output
    assert re.search(r"CLAIM .* \((\d\d) of the frontier's (\d\d) functions made\)", result.output)
    assert all(float(v) > 0 for label, v in rows.items() if label != "nothing (the loop)")
    assert "reproduce: rqcrawl bench --script-costs --repeat 2" in result.output


def test_the_notes_give_rqcrawls_cpu_a_page_as_a_share_of_scrapys():
    """The same run's Scrapy CPU a page is the yardstick: 1.1 s of rqcrawl and its Redis
    over 100 pages against Scrapy's 4.4 s over 200."""
    from rqcrawl.bench.report import Result, notes

    redis = {"calls": {}, "usec": {}, "commands": 0, "cpu_s": 0.1, "rss": 2**20}
    redis |= dict.fromkeys(("job_bytes", "held_bytes", "frontier_bytes"), 1)
    redis |= {"bloom_bytes": 1, "items_bytes": 1, "seen": 1, "bloom_capacity": 1}
    redis |= {"bloom_optimum_bytes": 1, "sized_bloom_bytes": 1, "sized_bloom_optimum_bytes": 1}
    redis |= {"frontier_urls": 1}
    ours = Result("rqcrawl", 2, 1, 0.0, 100, 1.0, 1.0, 1000, 0.1, redis)
    scrapy = Result("scrapy", 16, 1, 0.0, 200, 4.0, 4.4, 1000, 0.1)
    said = notes([ours, scrapy])
    assert (
        "latency 0 ms: rqcrawl's CPU a page with Redis's / Scrapy's = 0.50 "
        "(Redis's alone 0.045)" in said
    ), said


def test_bench_crawls_the_skewed_site_in_both_depth_modes_and_the_slow_host_alone():
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--skewed", "--fan-pages", "8", "--crawl-delay", "0.2",
         "--chain-pages", "12", "--workers", "2"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {
        line.rsplit(None, 8)[0]: line.rsplit(None, 8)[1:]
        for line in proc.stdout.splitlines()
        if line.startswith(("exact depth", "--no-exact-depth"))
    }
    assert set(rows) == {"exact depth", "--no-exact-depth"}, proc.stdout
    for pages, wall, _, alone_pages, alone_wall, _, chain_wall, ratio in rows.values():
        assert (pages, alone_pages) == ("21", "9"), proc.stdout  # every page of each crawl
        # 7 Crawl-delays at least between the slow host's 9 pages (robots.txt's is ours)
        assert (
            float(alone_wall) >= 1.4
            and float(chain_wall) > 0
            and float(ratio) == pytest.approx(float(wall) / float(alone_wall), abs=0.02)
        ), proc.stdout
    assert "reproduce: rqcrawl bench --skewed --fan-pages 8" in proc.stdout


def test_bench_crawls_the_same_site_over_one_and_two_shards():
    """Both rows crawl the whole site (spread over 4 hosts); the per-page numbers are sane,
    and only the two-shard crawl sends links across shards."""
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--shards", "1,2", "--pages", "60", "--hosts", "4",
         "--workers", "2"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {
        line.split()[0]: line.split()
        for line in proc.stdout.splitlines()
        if re.match(r"\s+[12]\s", line)
    }
    assert set(rows) == {"1", "2"}, proc.stdout
    for n, (
        _,
        workers,
        pages,
        wall,
        rate,
        cpu,
        redis,
        per_shard,
        fetched,
        cmds,
        _outbox,
    ) in rows.items():
        assert workers == {"1": "2", "2": "1+1"}[n] and pages == "60", proc.stdout
        assert float(wall) > 0 and abs(60 / float(rate) - float(wall)) <= 0.051  # wall to 0.1 s
        assert 0.5 < float(cpu) < 1000 and 0 < float(redis) < 100, proc.stdout
        shares = [float(x) for x in per_shard.split("/")]
        assert len(shares) == int(n) and all(x > 0 for x in shares), proc.stdout
        assert sum(shares) == pytest.approx(float(redis), abs=0.02)
        assert sum(int(x) for x in fetched.split("/")) == 60, proc.stdout
        assert 20 < float(cmds) < 1000, proc.stdout
    assert float(rows["1"][10]) == 0 < float(rows["2"][10]), proc.stdout
    assert "reproduce: rqcrawl bench --shards 1,2 --pages 60 --hosts 4" in proc.stdout


def test_bench_refuses_workers_that_do_not_split_evenly_over_shards():
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--shards", "1,3", "--workers", "2"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "--shards 3 needs --workers a multiple of 3" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bench_times_the_phases_of_a_one_page_crawl_at_defaults_and_without_delay():
    """The literal command's phases and the site's two requests (robots.txt, then the page
    at once: robots.txt takes no turn of the host's pace, and no /sitemap.xml is probed), so
    the pace costs nothing at defaults and the fixed cost is the whole wall time."""
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--one-page", "--repeat", "1", "--no-scrapy",
         "--no-crawlee"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {}
    for line in proc.stdout.splitlines():
        if m := re.fullmatch(r"(\S.*?)\s+([\d.]+)\s+([\d.]+)", line):
            rows[m[1]] = (float(m[2]), float(m[3]))
    for phase in ("imports done", "crawl seeded", "crawl over seen", "workers stopped", "exit"):
        assert phase in rows, proc.stdout
    ranks = [f"request {i} to the host" for i in (1, 2)]
    assert [p for p in rows if p.startswith("request ")] == ranks, proc.stdout
    assert rows["requests to the host"] == (2, 2)
    assert rows["pace waits: (1 paced - 1) x delay"] == (0.0, 0.0)
    defaults, no_delay = rows["fixed cost: wall - pace waits"]
    assert defaults == pytest.approx(rows["exit"][0], abs=0.002)
    assert no_delay == pytest.approx(rows["exit"][1], abs=0.002)
    assert "reproduce: rqcrawl bench --one-page --repeat 1" in proc.stdout


@pytest.mark.skipif(not installed("crawlee"), reason="Crawlee is not installed (rqcrawl[bench])")
def test_bench_one_page_times_crawlee_beside_rqcrawl_in_the_same_run():
    """Crawlee for Python crawls the same one-page site in the same run, robots.txt read: its
    column has the site's two requests and its exit; the command's phases are rqcrawl's."""
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--one-page", "--repeat", "1", "--no-scrapy"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^phase\s+defaults\s+--delay 0\s+crawlee$", proc.stdout, re.M), proc.stdout
    rows = {
        m[1]: m.groups()[1:]
        for m in re.finditer(r"^(\S.*?)\s+(\S+)\s+(\S+)\s+(\S+)$", proc.stdout, re.M)
    }
    assert rows["requests to the host"] == ("2.000", "2.000", "2.000"), proc.stdout
    assert rows["imports done"][2] == "-" and float(rows["exit"][2]) > 0, proc.stdout
    assert "reproduce: rqcrawl bench --one-page --repeat 1 --no-scrapy" in proc.stdout


def test_a_probe_charges_a_stage_with_its_own_cpu_not_its_nested_stages():
    """Exclusive time: the outer stage, which only calls the inner one, is charged almost
    nothing of the inner one's CPU; calls and Redis round trips are counted per stage."""
    import time

    from rqcrawl.bench import ledger

    def spin(seconds: float) -> None:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    inner = ledger.probe("inner", lambda: spin(0.05))
    outer = ledger.probe("outer", lambda: inner() or inner())
    before = ledger.totals()
    outer()
    after = ledger.totals()
    ns = {s: after["ns"].get(s, 0) - before["ns"].get(s, 0) for s in ("inner", "outer")}
    assert ns["inner"] >= 0.1e9 and ns["outer"] < ns["inner"] / 10, ns
    calls = {s: after["calls"][s] - before["calls"].get(s, 0) for s in ("inner", "outer")}
    assert calls == {"inner": 2, "outer": 1}


def test_a_profile_whose_calls_outran_the_slowlog_gives_script_times_a_call_only():
    """A long crawl's SLOWLOG holds only its last calls: a figure a page from them would be
    a fraction of the truth, so each script's time a call is given instead."""
    from rqcrawl.bench.ledger import script_line

    times = {"FINISH": [10, 3000], "CLAIM": [10, 1000]}
    assert "FINISH 1.00 (300 us, 300 a call)" in script_line(times, True, 10)
    cut = script_line(times, False, 10_000)
    assert "FINISH 300 us a call, CLAIM 100 us a call" in cut and "a page)" in cut


def test_bench_profile_prints_where_a_pages_cpu_goes_stage_by_stage():
    """Every page passes each stage once; the probes' sum stays within the worker CPU that
    /proc measured (a stage counted twice would exceed it); Redis's side and the command."""
    from rqcrawl.bench.ledger import PROBES, TOTAL, UNATTRIBUTED

    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--profile", "--pages", "30", "--workers", "1"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {}
    for line in proc.stdout.splitlines():
        m = re.match(
            r"(.+?)\s+(-?\d+)\s+(-?\d+)(?:\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+))?$", line
        )
        if m:
            rows[m[1]] = m.groups()[1:]
    assert {stage for _, _, stage in PROBES} <= set(rows), proc.stdout
    for stage in ("fetch (HTTP client)", "parse (lxml)", "link extraction"):
        assert rows[stage][2] == "1.00", (stage, rows[stage])  # calls per page
    # once per job (a page's, and the odd job that ends a URL without a fetch)
    for stage in ("claim (lease, due deferrals)", "politeness gate: acquire", "finish/settle"):
        assert 1 <= float(rows[stage][2]) <= 1.2, (stage, rows[stage])
    # the claim rides in the transaction that starts the job (CrawlWorker): round trips of
    # its own only where the fresh Redis did not know its script yet (the first job's); the
    # host's slot was taken when the frontier released the URL and is freed by the finish
    # step, so the gate has none of its own but robots.txt's first read
    assert float(rows["claim (lease, due deferrals)"][4]) <= 0.3, proc.stdout
    assert float(rows["politeness gate: acquire"][4]) <= 0.3, proc.stdout
    assert float(rows["politeness gate: release"][4]) <= 0.3, proc.stdout
    assert 2 <= float(rows["RQ: job lifecycle (prepare, success, registries)"][4]) <= 2.4
    total = float(rows[TOTAL][0])
    assert total > 0 and float(rows[UNATTRIBUTED][0]) > -0.05 * total, proc.stdout
    assert re.search(r"Redis: [\d.]+ ms CPU/page, [\d.]+ commands/page", proc.stdout)
    # each page's job dequeued, claimed and finished by one script call each
    scripts = re.search(r"Redis time in scripts a page.*: \d+ us: (.*)", proc.stdout)
    calls = dict(re.findall(r"(\w+) ([\d.]+) \(", scripts[1]))
    for name in ("DEQUEUE", "CLAIM", "FINISH"):
        assert 1 <= float(calls[name]) <= 1.3, (name, scripts[0])
    assert "reproduce: rqcrawl bench --profile --pages 30 --workers 1" in proc.stdout


@pytest.mark.skipif(not shutil.which("valgrind"), reason="valgrind is not installed")
def test_bench_counts_redis_instructions_a_page_under_callgrind(tmp_path):
    """The count comes from callgrind's own totals (no valgrind'd server: no count); the
    profile is kept for callgrind_annotate."""
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--redis-instructions", "--pages", "30",
         "--workers", "1"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    m = re.search(r"Redis instructions a page: ([\d.]+) M .*commands a page ([\d.]+)", proc.stdout)
    assert m, proc.stdout
    # a page's scripts and RQ's commands are millions of instructions; the server's start and
    # the 17 MB Bloom filter's allocation, spread over 30 pages, are not tens of millions
    assert 1 < float(m[1]) < 20, proc.stdout
    assert 50 < float(m[2]) < 150, proc.stdout
    kept = (tmp_path / "redis-callgrind.out").read_text()
    assert re.search(r"^totals: \d+", kept, re.M)
    assert "reproduce: rqcrawl bench --redis-instructions --pages 30" in proc.stdout

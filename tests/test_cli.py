"""The commands a user types: clear one-line errors, the guard, redirects, the embedded crawl,
and the benchmark imported by no command but its own."""

from __future__ import annotations

import signal
import subprocess
import sys
from http.server import BaseHTTPRequestHandler

import click
import pytest
from helpers import BIN, env_with, read_jsonl, rqcrawl, seed_local, wait_finished, wait_until
from servers import HTTPSite, free_port, reply
from testsite import Site

from rqcrawl.cli import LAZY_SUBCOMMANDS, main
from rqcrawl.workers.runner import LocalWorkers


def assert_one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0]


def test_invalid_seed_url_is_a_one_line_error(redis_url):
    for bad in ["mailto:someone@example.org", "http://", "ftp://example.org/", "http://h:99999/"]:
        proc = rqcrawl(redis_url, "seed", bad, "--max-depth", "1", check=False)
        assert_one_line_error(proc, "invalid URL")


def test_unreachable_redis_is_a_one_line_error():
    dead = f"redis://127.0.0.1:{free_port()}/0"
    proc = rqcrawl(dead, "seed", "http://example.org/", "--max-depth", "1", check=False)
    assert_one_line_error(proc, "cannot reach Redis", dead)
    assert_one_line_error(rqcrawl(dead, "status", "x", check=False), "cannot reach Redis")


def test_unknown_crawl_and_bad_name(redis_url):
    assert_one_line_error(rqcrawl(redis_url, "status", "nope", check=False), "no crawl named")
    proc = rqcrawl(redis_url, "seed", "http://example.org/", "--crawl", "a:b", check=False)
    assert_one_line_error(proc, "invalid crawl name")


def test_seed_derives_and_prints_a_name(redis_url):
    proc = rqcrawl(redis_url, "seed", "http://example.org/", "--max-depth", "0")
    name = proc.stdout.strip().splitlines()[-1]
    assert name.startswith("example-org-")
    assert rqcrawl(redis_url, "status", name, "--json").stdout.startswith("{")


def test_guard_refuses_loopback_unless_allowed(redis_url, tmp_path):
    site = Site(pages=5)
    with HTTPSite(site.handle, max_requests=50, max_seconds=60) as http:
        seeded = rqcrawl(
            redis_url, "seed", http.base + "/p0.html", "--max-depth", "2", "--crawl", "g"
        )
        with LocalWorkers(redis_url, 1, worker_class=None):
            s = wait_finished(redis_url, "g")
    assert http.hits == {}  # refused before a single byte was sent
    assert s["skipped"] == {"refused_address": 1}
    out = tmp_path / "g.jsonl"
    rqcrawl(redis_url, "export", "g", "-o", str(out))
    [row] = read_jsonl(out)
    assert row["outcome"] == "refused_address" and "loopback" in row["error"]
    # the seed said so, in one line naming the flag; `failures` says where the skipped went
    assert seeded.stderr == (
        f"warning: {http.base}/p0.html (refused address 127.0.0.1 (loopback)) will be skipped "
        "as refused_address: add --allow-private for a site on your own machine or network "
        "(nothing else will be crawled)\n"
    )
    quiet = rqcrawl(redis_url, "failures", "g")
    assert quiet.stdout == ""
    said = "crawl g: 1 skipped (refused_address 1), not listed: --skipped lists them\n"
    assert quiet.stderr == said
    listed = rqcrawl(redis_url, "failures", "g", "--skipped")
    assert listed.stdout == f"refused_address  -  {http.base}/p0.html\n" and listed.stderr == ""


def test_a_seed_on_loopback_with_allow_private_or_a_name_to_resolve_says_nothing(redis_url):
    """Only what this machine can tell without DNS is checked at seed time."""
    allowed = seed_local(redis_url, "http://127.0.0.1:9/", "allowed", 0)
    named = rqcrawl(redis_url, "seed", "http://example.org/", "--crawl", "named")
    assert allowed.stderr == named.stderr == ""


def redirecting(routes: dict[str, tuple[int, str]]):
    """A handler answering `path -> (status, location or body)`."""

    def handle(req: BaseHTTPRequestHandler) -> None:
        status, value = routes.get(req.path, (404, ""))
        if 300 <= status < 400:
            reply(req, status, b"", headers={"Location": value})
        else:
            reply(req, status, value.encode())

    return handle


def test_redirect_hops_are_checked_against_scope_and_loops(redis_url, tmp_path):
    with HTTPSite(redirecting({}), host="127.0.0.2", max_requests=20, max_seconds=60) as other:
        routes = {
            "/": (200, '<a href="/away">a</a><a href="/loop1">l</a><a href="/ok">o</a>'),
            "/away": (302, other.base + "/"),
            "/loop1": (301, "/loop2"),
            "/loop2": (301, "/loop1"),
            "/ok": (302, "/final"),
            "/final": (200, "<title>Final</title>"),
        }
        with HTTPSite(redirecting(routes), max_requests=50, max_seconds=60) as http:
            seed_local(redis_url, http.base + "/", "r", 1)
            with LocalWorkers(redis_url, 1, worker_class=None):
                wait_finished(redis_url, "r")
        assert other.hits == {}  # the out-of-scope hop was never requested
    out = tmp_path / "r.jsonl"
    rqcrawl(redis_url, "export", "r", "-o", str(out))
    rows = {r["url"].rsplit("/", 1)[1]: r for r in read_jsonl(out)}
    assert rows["away"]["outcome"] == "out_of_scope"
    # every hop is a URL of its own (rqcrawl.fetch.hops): a loop ends at the hop that closes it
    assert rows["loop1"]["outcome"] == "redirected"
    assert rows["loop2"]["outcome"] == "failed" and "loop" in rows["loop2"]["error"]
    assert rows["loop2"]["via"] == [http.base + "/loop1"]
    assert rows["ok"]["outcome"] == "redirected" and rows["ok"]["redirect_to"].endswith("/final")
    assert rows["final"]["title"] == "Final" and rows["final"]["via"] == [http.base + "/ok"]
    assert rows["final"]["depth"] == rows["ok"]["depth"] == 1  # a redirect is not a click
    assert http.hits["/loop1"] == 1 and http.hits["/loop2"] == 1


def run_crawl(base: str, data_dir, out) -> subprocess.Popen:
    env = env_with("")
    env.pop("RQ_REDIS_URL")
    return subprocess.Popen(
        [str(BIN / "rqcrawl"), "crawl", base + "/p0.html", "--max-depth", "3", "-o", str(out),
         "--data-dir", str(data_dir), "--allow-private", "--workers", "2", "--delay", "0.1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_embedded_crawl_resumes_after_ctrl_c_without_refetching(tmp_path):
    site = Site(pages=60, slow={i: 0.15 for i in range(60)})
    expected = site.expected(3)
    out = tmp_path / "pages.jsonl"
    with HTTPSite(site.handle, max_requests=300, max_seconds=240) as http:
        first = run_crawl(http.base, tmp_path / "data", out)
        wait_until(lambda: sum(http.hits.values()) >= 8, 60, "8 pages requested")
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=60)
        assert first.returncode != 0
        assert "run the same command again" in err and "Traceback" not in err
        fetched_before = sum(http.hits.values())
        # the records of the pages so far are in the file (written as they came)
        assert 0 < len(read_jsonl(out)) <= fetched_before
        assert 0 < fetched_before < len(expected)

        second = run_crawl(http.base, tmp_path / "data", out)
        _, err = second.communicate(timeout=180)
        assert second.returncode == 0, err
        assert "finished" in err
    assert http.hits.pop("/robots.txt") == 1  # the verdict survived the restart in Redis
    assert "/sitemap.xml" not in http.hits  # not probed: robots.txt names the sitemaps
    assert all(n == 1 for n in http.hits.values()), http.hits
    rows = read_jsonl(out)
    assert len(expected) == len(http.hits), (sorted(expected), sorted(http.hits))
    assert len(rows) == len({r["url"] for r in rows}) == len(expected), rows  # appended to


# Runs the CLI with its arguments, then names on stderr the benchmark's modules it imported.
IMPORT_PROBE = """
import sys
from rqcrawl.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print(*sorted(m for m in sys.modules if m.startswith(("rqcrawl.bench", "scrapy"))), file=sys.stderr)
"""


def imported_bench_modules(*args: str) -> tuple[str, list[str]]:
    """stdout of the CLI run with `args`, and the benchmark's modules it imported."""
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr.split()


@pytest.mark.parametrize(
    "args", [[], *([name] for name in sorted(main.commands))], ids=lambda a: " ".join(a) or "-"
)
def test_no_other_command_imports_the_benchmark(args):
    stdout, modules = imported_bench_modules(*args, "--help")
    assert modules == []
    if not args:
        assert "bench     Benchmark rqcrawl against Scrapy" in stdout


def test_bench_loads_for_its_own_help():
    stdout, modules = imported_bench_modules("bench", "--help")
    assert "rqcrawl.bench.command" in modules
    assert "--pages" in stdout
    proc = subprocess.run([str(BIN / "rqcrawl"), "bench", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--no-scrapy" in proc.stdout, proc.stderr


def test_the_listing_shows_the_commands_own_help():
    """The group lists lazy commands by help it holds; it must say what the command says."""
    for name in LAZY_SUBCOMMANDS:
        command = main.get_command(click.Context(main), name)
        assert command.get_short_help_str(limit=1000) == LAZY_SUBCOMMANDS[name][1]

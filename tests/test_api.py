"""The Python API (rqcrawl.api): a real crawl and its control driven from Python alone, and
every refusal raised as one of the API's exceptions."""

from __future__ import annotations

import csv

import pytest
from helpers import wait_until
from servers import HTTPSite
from test_bad_input import crawl_keys
from test_crawl_e2e import path_of
from testsite import Site

import rqcrawl
from rqcrawl import api
from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import keys
from rqcrawl.parse.urls import canonicalize
from rqcrawl.workers.runner import LocalWorkers

SEED = "http://example.org/"


def finished(conn, name: str, timeout: float = 120) -> dict:
    """The crawl's status once it is finished (with the recovery pass, as `status` runs it)."""
    return wait_until(
        lambda: api.status(conn, name),
        timeout,
        f"crawl {name} to finish",
        accept=lambda s: s["state"] == "finished",
        every=0.2,
    )


def test_a_crawl_driven_through_the_api_alone(redis_url, conn, tmp_path):
    site = Site(pages=30)
    with HTTPSite(site.handle, max_requests=300, max_seconds=180) as http:
        started = api.start(
            conn, [http.base + "/p0.html"], max_depth=2, allow_private=True, delay=0
        )
        with LocalWorkers(redis_url, 2, log_dir=tmp_path / "workers"):
            final = finished(conn, started.name)
    assert started.name.startswith("127-0-0-1-") and not started.resumed
    assert started.admitted == 1 and started.cfg.scope_hosts == [http.base.split("//")[1]]

    expected = {path_of(canonicalize(http.base + p)) for p in site.expected(2)}
    rows = list(api.records(conn, started.name))
    assert sorted(path_of(r["url"]) for r in rows) == sorted(expected)
    assert final["admitted"] == len(rows) and final["fetched"] > 0

    failed = list(api.failures(conn, started.name))
    assert failed and {r["reason"] for r in failed} == {"http_404"}
    assert all("/missing" in r["url"] for r in failed)
    assert list(api.failures(conn, started.name, ["http_404"])) == failed
    assert list(api.failures(conn, started.name, ["timeout"])) == []

    out = tmp_path / "rows.csv"
    assert api.export(conn, started.name, out) == len(rows)
    with open(out, newline="") as f:
        assert len(list(csv.DictReader(f))) == len(rows)

    assert api.crawls(conn) == [started.name]
    assert api.purge(conn, started.name).keys > 0  # finished: no force needed
    assert api.crawls(conn) == [] and crawl_keys(conn) == []


def test_crawl_yields_each_record_once_and_a_second_run_resumes(tmp_path):
    """rqcrawl.crawl runs its own Redis and workers; a loop that breaks leaves the record it
    held (unacknowledged) to the next run, which hands it first, then the rest: every URL
    of the crawl once, but the one in hand."""
    site = Site(pages=30)
    with HTTPSite(site.handle, max_requests=300, max_seconds=180) as http:
        seeds = [http.base + "/p0.html"]
        run = {"max_depth": 2, "allow_private": True, "delay": 0, "workers": 1}
        first = []
        for record in rqcrawl.crawl(seeds, data_dir=tmp_path / "data", **run):
            first.append(record)
            if len(first) == 5:
                break
        rest = list(rqcrawl.crawl(seeds, data_dir=tmp_path / "data", **run))
    assert rest[0] == first[-1]
    expected = {path_of(canonicalize(http.base + p)) for p in site.expected(2)}
    assert sorted(path_of(r["url"]) for r in first[:-1] + rest) == sorted(expected)
    assert (tmp_path / "data" / "workers" / "1.log").exists()


def test_crawl_checks_its_input_before_it_starts_anything(tmp_path):
    with pytest.raises(api.InvalidInput, match="ftp"):
        rqcrawl.crawl(["ftp://example.org/"], data_dir=tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_pause_resume_cancel_purge(conn):
    api.start(conn, [SEED], "ctl", max_depth=1)  # no workers: the seed stays queued
    with pytest.raises(api.StateError, match="running.*force"):
        api.purge(conn, "ctl")
    assert api.pause(conn, "ctl") is True
    assert api.pause(conn, "ctl") is False
    assert api.status(conn, "ctl")["state"] == "paused"
    api.resume(conn, "ctl")
    assert api.status(conn, "ctl")["state"] == "running"
    with pytest.raises(api.StateError, match="not paused"):
        api.resume(conn, "ctl")

    cancelled = api.cancel(conn, "ctl")
    # the seed (queued: one job); its site's sitemaps wait for its robots.txt (a mark)
    assert (cancelled.dropped, cancelled.jobs_removed) == (1, 1)
    assert api.status(conn, "ctl")["state"] == "cancelled"
    with pytest.raises(api.StateError, match="already cancelled"):
        api.cancel(conn, "ctl")
    assert api.purge(conn, "ctl").keys > 0
    assert crawl_keys(conn) == []


def test_an_existing_crawl_keeps_its_settings_and_takes_more_seeds(conn):
    first = api.start(conn, [SEED], "again", max_depth=0)
    again = api.start(conn, [SEED, SEED + "b"], "again", max_depth=5)
    assert not first.resumed and again.resumed
    assert again.cfg == first.cfg and again.cfg.max_depth == 0 and again.admitted == 1
    assert api.add_seeds(conn, "again", [SEED + "c", SEED + "b"]) == 1
    assert api.add_seeds(conn, "again", SEED + "d") == 1  # one URL as a plain string
    assert api.status(conn, "again")["admitted"] == 4


def test_a_purged_name_used_again_shows_the_new_crawls_settings(conn):
    """A long-lived reader (the metrics server, a notebook, `rqcrawl pump`) must not keep an
    earlier crawl's settings for a name that was purged and used again."""
    api.start(conn, [SEED], "reused", max_depth=0)
    assert api.status(conn, "reused")["max_depth"] == 0
    api.purge(conn, "reused", force=True)
    api.start(conn, [SEED], "reused", max_depth=3)
    assert api.status(conn, "reused")["max_depth"] == 3
    assert api.crawl_config(conn, "reused").max_depth == 3


@pytest.mark.parametrize(
    "seeds, kwargs, words",
    [
        (["ftp://example.org/"], {}, "invalid URL"),
        ([SEED + "\udcff"], {}, "not UTF-8"),
        ([], {}, "no seed URL"),
        ([SEED], {"name": "a:b"}, "invalid crawl name"),
        ([SEED], {"delay": -1}, "'delay'"),
        ([SEED], {"no_such_setting": 1}, "unknown setting"),
        ([SEED], {"hook": "no_such_module_here:f"}, "no_such_module_here"),
    ],
)
def test_bad_input_is_refused_before_redis_is_touched(conn, seeds, kwargs, words):
    with pytest.raises(api.InvalidInput, match=words):
        api.start(conn, seeds, **kwargs)
    assert conn.dbsize() == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda c: api.status(c, "nope"),
        lambda c: api.crawl_config(c, "nope"),
        lambda c: api.records(c, "nope"),
        lambda c: api.failures(c, "nope"),
        lambda c: api.export(c, "nope", "/dev/null"),
        lambda c: api.add_seeds(c, "nope", [SEED]),
        lambda c: api.pause(c, "nope"),
        lambda c: api.resume(c, "nope"),
        lambda c: api.cancel(c, "nope"),
        lambda c: api.purge(c, "nope", force=True),
    ],
)
def test_an_unknown_crawl_is_no_such_crawl(conn, call):
    with pytest.raises(api.NoSuchCrawl, match="no crawl named 'nope'"):
        call(conn)


def test_a_damaged_crawl_is_reported_and_can_be_purged_with_force(conn):
    api.start(conn, [SEED], "broken", max_depth=0)
    conn.delete(keys.CrawlKeys("broken").inflight)
    conn.set(keys.CrawlKeys("broken").inflight, "not a hash")
    with pytest.raises(api.DamagedCrawl, match="crawl broken: .*WRONGTYPE"):
        api.status(conn, "broken", recover=False)
    with pytest.raises(api.StateError, match="--force"):
        api.purge(conn, "broken")
    api.purge(conn, "broken", force=True)
    assert crawl_keys(conn) == []


def test_export_refuses_an_unknown_format_and_an_unwritable_file(conn, tmp_path):
    api.start(conn, [SEED], "x", max_depth=0)
    with pytest.raises(api.InvalidInput, match="unknown export format 'xml'"):
        api.export(conn, "x", tmp_path / "x.xml", "xml")
    with pytest.raises(api.CrawlError, match="cannot write .*: Is a directory"):
        api.export(conn, "x", tmp_path)


def test_plan_layers_and_scopes_the_settings_without_redis(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[crawl]\nmax_depth = 4\ndelay = 2.0\nscope_hosts = ["Example.ORG"]\n')
    planned = api.plan(["HTTP://B.example/x#frag"], config_file=path, delay=0.5, retries=None)
    assert planned.seeds == ["http://b.example/x"]
    cfg = planned.cfg
    assert (cfg.max_depth, cfg.delay, cfg.retries) == (4, 0.5, CrawlConfig().retries)
    assert cfg.scope_hosts == ["example.org"]  # explicit hosts, lowercased
    assert api.plan(["http://b.example:8080/", SEED]).cfg.scope_hosts == [
        "b.example:8080",
        "example.org",
    ]

    def stable(**flags) -> str:
        return api.plan([SEED], stable_name=True, **flags).name

    assert stable() == stable() != stable(max_depth=7)
    assert stable().startswith("example-org-")

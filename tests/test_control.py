"""The operator's commands on real workers: pause, resume, cancel, purge, list and the
stored settings."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import tomllib
from http.server import BaseHTTPRequestHandler

from helpers import (
    BIN,
    env_with,
    read_jsonl,
    rqcrawl,
    seed_local,
    status,
    wait_finished,
    wait_until,
)
from rq import Queue, Worker
from servers import HTTPSite, free_port, reply
from test_cli import assert_one_line_error
from testsite import Site

from rqcrawl.frontier import keys
from rqcrawl.workers.runner import LocalWorkers


def settled(redis_url: str, crawl: str) -> dict:
    """Wait until nothing of a paused crawl is in flight; returns its status."""
    return wait_until(
        lambda: status(redis_url, crawl),
        30,
        f"{crawl} to settle",
        accept=lambda s: s["in_flight"] == 0,
    )


def all_idle(conn) -> bool:
    """Whether every registered worker waits for a job (none is running one)."""
    return all(w.get_state() == "idle" for w in Worker.all(connection=conn))


def counter(conn, crawl: str, field: str) -> int:
    return int(conn.hget(keys.CrawlKeys(crawl).counters, field) or 0)


def test_pause_gives_work_back_and_resume_finishes_exactly(redis_url, conn, tmp_path):
    site = Site(pages=40, slow={i: 0.1 for i in range(40)})
    expected = site.expected(3)
    with HTTPSite(site.handle, max_requests=300, max_seconds=180) as http:
        seed_local(redis_url, http.base + "/p0.html", "pz", 3)
        assert rqcrawl(redis_url, "pause", "pz").stdout.strip() == "crawl pz paused"
        assert "already paused" in rqcrawl(redis_url, "pause", "pz").stdout
        seed_local(redis_url, http.base + "/missing0", "pz", 3)  # admitted, not released
        s = status(redis_url, "pz")
        assert (s["state"], s["in_flight"], s["held"]) == ("paused", 1, 1)
        with LocalWorkers(redis_url, 2, log_dir=tmp_path):
            # The first seed's job was queued before the pause: a worker gives it back.
            wait_until(lambda: counter(conn, "pz", "put_back") == 1, 30, "the job put back")
            s = settled(redis_url, "pz")
            assert (s["state"], s["held"], s["fetched"]) == ("paused", 2, 0)
            assert http.hits == {}

            rqcrawl(redis_url, "resume", "pz")
            wait_until(lambda: sum(http.hits.values()) >= 8, 30, "8 pages requested")
            rqcrawl(redis_url, "pause", "pz")
            s = settled(redis_url, "pz")
            assert s["state"] == "paused" and s["held"] > 0
            requested = sum(http.hits.values())
            time.sleep(1.5)  # the behaviour under test: nothing is released while paused
            assert sum(http.hits.values()) == requested
            listed = rqcrawl(redis_url, "list").stdout.splitlines()
            # the last column: failures, and their reasons if any
            assert re.match(r"pz\s+paused\s+\d+/\d+\s+[\d.]+\s+\d+( \(.+\))?$", listed[1]), listed

            rqcrawl(redis_url, "resume", "pz")
            final = wait_finished(redis_url, "pz")
    assert http.hits.pop("/robots.txt") == 1
    assert all(n == 1 for n in http.hits.values()), http.hits
    assert len(http.hits) == len(expected) == final["admitted"]
    out = tmp_path / "pz.jsonl"
    rqcrawl(redis_url, "export", "pz", "-o", str(out))
    assert len(read_jsonl(out)) == len(expected)
    assert_one_line_error(rqcrawl(redis_url, "resume", "pz", check=False), "finished")
    assert_one_line_error(rqcrawl(redis_url, "pause", "pz", check=False), "finished")


def test_cancel_drops_pending_work_and_says_how_much(redis_url, conn, tmp_path):
    site = Site(pages=60, slow={i: 0.2 for i in range(60)})
    with HTTPSite(site.handle, max_requests=300, max_seconds=180) as http:
        seed_local(redis_url, http.base + "/p0.html", "cx", 3)
        with LocalWorkers(redis_url, 2, log_dir=tmp_path):
            wait_until(lambda: sum(http.hits.values()) >= 6, 30, "6 pages requested")
            said = rqcrawl(redis_url, "cancel", "cx").stdout
            dropped = int(re.search(r"cancelled: (\d+) URL\(s\) dropped", said).group(1))
            assert dropped > 0
            queued = Queue(keys.QUEUE_NAME, connection=conn).job_ids
            assert not [j for j in queued if j.startswith("rqcrawl-cx-")]
            # The pages being fetched at the cancel end, unrecorded; then nothing more.
            wait_until(lambda: all_idle(conn), 30, "the workers to finish their pages")
            requested = sum(http.hits.values())
            time.sleep(1)  # the behaviour under test: no request during this second
            assert sum(http.hits.values()) == requested
    s = status(redis_url, "cx")
    assert (s["state"], s["in_flight"], s["held"], s["dropped"]) == ("cancelled", 0, 0, dropped)
    out = tmp_path / "cx.jsonl"
    rqcrawl(redis_url, "export", "cx", "-o", str(out))
    # Every admitted URL was either recorded before the cancel or dropped by it.
    assert s["admitted"] == len(read_jsonl(out)) + dropped
    assert "cancelled (" in rqcrawl(redis_url, "status", "cx").stdout
    assert_one_line_error(rqcrawl(redis_url, "cancel", "cx", check=False), "already cancelled")
    assert_one_line_error(rqcrawl(redis_url, "resume", "cx", check=False), "not paused")


def test_cancel_ends_a_one_machine_crawl_with_what_it_recorded(redis_url, tmp_path):
    site = Site(pages=40, slow={i: 0.2 for i in range(40)})
    out = tmp_path / "emb.jsonl"
    with HTTPSite(site.handle, max_requests=300, max_seconds=120) as http:
        crawl = subprocess.Popen(
            [str(BIN / "rqcrawl"), "crawl", http.base + "/p0.html", "--max-depth", "3",
             "--crawl", "emb", "--allow-private", "--workers", "1", "-o", str(out)],
            env=env_with(redis_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_until(lambda: sum(http.hits.values()) >= 3, 30, "3 pages requested")
            rqcrawl(redis_url, "cancel", "emb")
            _, err = crawl.communicate(timeout=60)
        finally:
            if crawl.poll() is None:  # Ctrl-C: it stops its own workers, then goes
                crawl.send_signal(signal.SIGINT)
                crawl.communicate(timeout=60)
    assert crawl.returncode == 0 and "crawl emb cancelled:" in err, err
    s = status(redis_url, "emb")
    assert len(read_jsonl(out)) == s["admitted"] - s["dropped"]


def test_cancel_drops_a_parked_retry(redis_url, conn, tmp_path):
    def down(req: BaseHTTPRequestHandler) -> None:
        reply(req, 503, b"down")

    conf = tmp_path / "retry.toml"  # a backoff longer than `rqcrawl cancel` on a loaded machine
    conf.write_text("[crawl]\nretry_base = 8.0\n")
    with HTTPSite(down, max_requests=20, max_seconds=60) as http:
        seed_local(redis_url, http.base + "/", "rt", 1, "--no-robots", "--config", str(conf))
        with LocalWorkers(redis_url, 1, worker_class=None, log_dir=tmp_path):
            later = keys.CrawlKeys("rt").later  # a retry waits there for its time, as no job
            wait_until(lambda: conn.zcard(later), 30, "a parked retry")
            due = conn.zrange(later, 0, 0, withscores=True)[0][1]
            said = rqcrawl(redis_url, "cancel", "rt").stdout
            # the parked URL's next job already exists (listed as deferred): cancel deletes it
            assert "1 URL(s) dropped (0 held, 1 in flight; 1 queued RQ job(s) removed)" in said
            assert conn.zcard(later) == 0
            # the behaviour under test: past the backoff, nothing comes back
            time.sleep(max(0.0, due + 2 - time.time()))
    assert http.hits == {"/": 1}
    assert status(redis_url, "rt")["dropped"] == 1


def snapshot(conn, pattern: str) -> dict[bytes, bytes]:
    return {k: conn.dump(k) for k in conn.scan_iter(match=pattern)}


def test_purge_deletes_only_its_own_crawl(redis_url, conn):
    # "a" is a prefix of "a-b" in RQ job ids (rqcrawl-a-...), but not in key names.
    for name in ("a", "a-b"):
        seed_local(redis_url, f"http://127.0.0.1:9/{name}", name, 1)
    assert_one_line_error(rqcrawl(redis_url, "purge", "a", check=False), "running", "--force")
    [job_a] = [j for j in Queue(keys.QUEUE_NAME, connection=conn).job_ids if "-a-b-" not in j]
    others = snapshot(conn, "rqcrawl:{a-b}:*") | snapshot(conn, "rq:job:rqcrawl-a-b-*")
    assert len(others) >= 5

    said = rqcrawl(redis_url, "purge", "a", "--force").stdout
    assert re.match(r"crawl a purged: [4-9] key\(s\) and 1 RQ job\(s\) deleted", said), said
    assert snapshot(conn, "rqcrawl:{a}:*") == {} and not conn.exists(f"rq:job:{job_a}")
    assert job_a not in Queue(keys.QUEUE_NAME, connection=conn).job_ids
    assert snapshot(conn, "rqcrawl:{a-b}:*") | snapshot(conn, "rq:job:rqcrawl-a-b-*") == others
    assert conn.smembers(keys.CRAWLS) == {b"a-b"}
    assert_one_line_error(rqcrawl(redis_url, "status", "a", check=False), "no crawl named")
    assert [json.loads(rqcrawl(redis_url, "list", "--json").stdout)[0]["crawl"]] == ["a-b"]

    rqcrawl(redis_url, "cancel", "a-b")
    rqcrawl(redis_url, "purge", "a-b")  # cancelled: no --force needed
    assert not [k for k in conn.scan_iter() if b"rqcrawl" in k]
    assert rqcrawl(redis_url, "list").stdout.strip() == "no crawls in this Redis"


def test_status_config_shows_the_merged_settings_as_reloadable_toml(redis_url, tmp_path):
    conf = tmp_path / "in.toml"
    conf.write_text(
        "[crawl]\nmax_depth = 5\nwindow = 7\nretry_base = 1\n"
        '[crawl.fields]\nheading = { css = "h1::text" }\n'
        '"a b" = { xpath = "//a/@href", all = true }\n'
    )
    seed_local(redis_url, "http://Example.org/", "c1", 1, "--config", str(conf))
    shown = rqcrawl(redis_url, "status", "c1", "--config").stdout
    stored = json.loads(rqcrawl(redis_url, "status", "c1", "--config", "--json").stdout)
    # Flags over file over defaults; the seeds' host filled in.
    assert tomllib.loads(shown)["crawl"] == stored
    assert stored["max_depth"] == 1 and stored["window"] == 7 and stored["retry_base"] == 1.0
    assert stored["allow_private"] is True and stored["scope_hosts"] == ["example.org"]
    assert stored["read_timeout"] == 15.0  # a default
    assert stored["fields"] == {
        "heading": {"css": "h1::text"},
        "a b": {"xpath": "//a/@href", "all": True},
    }

    copy = tmp_path / "shown.toml"
    copy.write_text(shown)
    rqcrawl(redis_url, "seed", "http://example.org/", "--crawl", "c2", "--config", str(copy))
    assert rqcrawl(redis_url, "status", "c2", "--config").stdout == shown


def test_every_command_fails_in_one_line_on_a_missing_crawl_or_redis(redis_url):
    dead = f"redis://127.0.0.1:{free_port()}/0"
    for args in (["list"], ["pause", "x"], ["purge", "x"]):
        assert_one_line_error(rqcrawl(dead, *args, check=False), "cannot reach Redis", dead)
    for args in (
        ["pause", "x"],
        ["resume", "x"],
        ["cancel", "x"],
        ["purge", "x", "--force"],
        ["status", "x", "--config"],
        ["status", "x", "--watch"],
    ):
        assert_one_line_error(rqcrawl(redis_url, *args, check=False), "no crawl named 'x'")

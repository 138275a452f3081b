"""Records that leave Redis once delivered (issue 36 item 2): `rqcrawl export NAME --follow`
against real workers and a loopback site. Every visit the server saw is delivered exactly
once, also across a follower killed outright and restarted; the stream stays short while
followed; two followers split the records; with no follower the crawl holds at
max_undelivered, `status` says why, and it goes on once a follower drains the stream;
`rqcrawl crawl -o` stopped halfway leaves the records so far in its file."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import threading
import time
from collections import Counter

import pytest
import redis
from helpers import BIN, env_with, read_jsonl, rqcrawl, seed_local, wait_until
from servers import HTTPSite, RedisServer, reply

from rqcrawl import api
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.ops import follow, stats
from rqcrawl.ops.exporters.jsonl import JsonLinesExporter
from rqcrawl.workers.runner import LocalWorkers

# While a follower runs, records leave the stream within a read or two: far below this.
FOLLOWED_BOUND = 20


def site(pages: int, slow: float = 0.0):
    """A handler: / links to /p0../pN-1, leaves; each answer takes `slow` seconds."""

    def handle(req) -> None:
        time.sleep(slow)
        if req.path == "/":
            links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(pages))
            reply(req, 200, f"<html><title>home</title>{links}</html>".encode())
        elif req.path.startswith("/p"):
            reply(req, 200, f"<html><title>{req.path}</title>leaf</html>".encode())
        else:
            reply(req, 404, b"not found")

    return handle


def follower(redis_url: str, crawl: str, out) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "rqcrawl"), "export", crawl, "--follow", "-o", str(out)],
        env=env_with(redis_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def served(http: HTTPSite) -> Counter:
    """The page requests the server answered, by URL (robots.txt is no record)."""
    return Counter(http.base + path for _, path in http.log if path != "/robots.txt")


def sample_length(conn, stream: str, seconds: float) -> list[int]:
    """The stream's length every 0.1 s for `seconds`."""
    found, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        found.append(conn.xlen(stream))
        time.sleep(0.1)
    return found


@pytest.mark.timeout(150)
def test_a_followed_continuous_crawl_delivers_every_visit_once_across_a_killed_follower(
    redis_url, conn, tmp_path
):
    settings = tmp_path / "revisit.toml"
    settings.write_text("revisit_min = 1\nrevisit_max = 2\n")
    out, k = tmp_path / "visits.jsonl", CrawlKeys("cont")
    with HTTPSite(site(4), max_requests=2000, max_seconds=140) as http:
        seed_local(
            redis_url, http.base + "/", "cont", 1, "--revisit", "2s",
            "--db", f"sqlite:///{tmp_path / 'tasks.db'}", "--config", str(settings),
        )  # fmt: skip
        first = follower(redis_url, "cont", out)
        with LocalWorkers(redis_url, 1, log_dir=tmp_path / "workers"):
            wait_until(lambda: out.exists() and len(read_jsonl(out)) >= 5, 60, "deliveries")
            lengths = sample_length(conn, k.items, 6)
            first.kill()  # SIGKILL: whatever it wrote and did not acknowledge is pending
            first.communicate(timeout=30)
            wait_until(lambda: conn.xlen(k.items) >= 3, 30, "records waiting for a follower")
            second = follower(redis_url, "cont", out)
            lengths += sample_length(conn, k.items, 8)
            rqcrawl(redis_url, "pause", "cont")  # running pages end, and are recorded
            wait_until(
                lambda: not conn.hlen(k.inflight) and not conn.xlen(k.items),
                60,
                "every ended visit delivered",
            )
            seen = served(http)
        rqcrawl(redis_url, "cancel", "cont")
        _, err = second.communicate(timeout=60)  # a cancelled crawl's follower ends
    assert second.returncode == 0, err
    rows = read_jsonl(out)
    assert Counter(r["url"] for r in rows) == seen  # each visit once: none lost, none twice
    visits: dict[str, list[int]] = {}
    for r in rows:
        visits.setdefault(r["url"], []).append(r["visit"])
    assert all(sorted(v) == list(range(1, len(v) + 1)) for v in visits.values()), visits
    assert max(visits[http.base + "/"]) >= 3  # revisits
    assert max(lengths) <= FOLLOWED_BOUND, lengths


@pytest.mark.timeout(120)
def test_two_followers_split_the_records_with_no_overlap_and_nothing_missing(redis_url, tmp_path):
    pages = 40
    outs = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    with HTTPSite(site(pages), max_requests=500, max_seconds=110) as http:
        seed_local(redis_url, http.base + "/", "two", 1)
        procs = [follower(redis_url, "two", out) for out in outs]
        with LocalWorkers(redis_url, 2, log_dir=tmp_path / "workers"):
            results = [p.communicate(timeout=90) for p in procs]  # each ends with the crawl
    assert [p.returncode for p in procs] == [0, 0], results
    # (one follower may have taken every batch: it then wrote no file)
    rows = [read_jsonl(out) if out.exists() else [] for out in outs]
    a, b = ({r["url"] for r in part} for part in rows)
    got = [r["url"] for part in rows for r in part]
    assert len(got) == len(set(got)) and not a & b  # no record delivered twice
    assert set(got) == {http.base + "/"} | {f"{http.base}/p{i}" for i in range(pages)}


@pytest.mark.timeout(120)
def test_with_no_follower_the_crawl_holds_at_the_bound_says_why_and_resumes(
    redis_url, conn, tmp_path
):
    bound, pages, k = 3, 12, CrawlKeys("held")
    settings = tmp_path / "bound.toml"
    settings.write_text(f"max_undelivered = {bound}\n")
    out = tmp_path / "held.jsonl"
    with HTTPSite(site(pages), max_requests=500, max_seconds=110) as http:
        seed_local(redis_url, http.base + "/", "held", 1, "--config", str(settings))
        with LocalWorkers(redis_url, 1, log_dir=tmp_path / "workers"):
            wait_until(
                lambda: conn.xlen(k.items) >= bound and not conn.hlen(k.inflight),
                60,
                "the crawl held at the bound",
            )
            asked = sum(http.hits.values())
            s = stats.status(conn, "held")
            assert s["state"] == "running" and s["undelivered"] >= bound
            said = [w for w in s["warnings"] if w.startswith("held:")]
            assert said and f"max_undelivered = {bound}" in said[0], s["warnings"]
            time.sleep(2)  # the release thread's passes meanwhile release nothing
            assert sum(http.hits.values()) == asked and not conn.hlen(k.inflight)
            assert "held: " in rqcrawl(redis_url, "status", "held").stdout
            delivered: list[int] = []
            thread = threading.Thread(
                target=lambda: delivered.append(api.follow_records(conn, "held", out)),
                daemon=True,
            )
            thread.start()
            thread.join(90)  # it ends once the crawl finished and every record is delivered
    assert delivered, "the crawl did not go on once the follower drained the stream"
    urls = [r["url"] for r in read_jsonl(out)]
    assert len(urls) == len(set(urls)) == delivered[0] == pages + 1
    assert conn.xlen(k.items) == 0
    assert not [w for w in stats.status(conn, "held")["warnings"] if w.startswith("held:")]


def jsonl_size(record: dict) -> int:
    return len(json.dumps(record))


def big_pages(pages: int, size: int):
    """A handler: / links to /p0../pN-1, each a page of about `size` bytes of text."""

    def handle(req) -> None:
        if req.path == "/":
            links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(pages))
            reply(req, 200, f"<html><title>home</title>{links}</html>".encode())
        elif req.path.startswith("/p"):
            words = "word " * (size // 5)
            reply(req, 200, f"<html><title>{req.path}</title><p>{words}</p></html>".encode())
        else:
            reply(req, 404, b"not found")

    return handle


@pytest.mark.timeout(120)
def test_big_records_hold_the_crawl_at_the_byte_bound_and_are_read_in_small_batches(
    redis_url, conn, tmp_path, monkeypatch
):
    """Issue 43 item 4: records of `content = ["html"]` are big; the stream is bounded in
    bytes too (a few records here, far below max_undelivered), and a follower's read takes
    as many as BATCH_BYTES holds, not BATCH (500) records."""
    pages, size, bound = 12, 200_000, 500_000
    settings = tmp_path / "bytes.toml"
    settings.write_text(f'content = ["html"]\nmax_undelivered_bytes = {bound}\n')
    out, k = tmp_path / "bytes.jsonl", CrawlKeys("bytes")
    with HTTPSite(big_pages(pages, size), max_requests=500, max_seconds=110) as http:
        seed_local(redis_url, http.base + "/", "bytes", 1, "--config", str(settings))
        with LocalWorkers(redis_url, 1, threads=1, log_dir=tmp_path / "workers"):
            held = wait_until(
                lambda: stats.status(conn, "bytes"),
                60,
                "the crawl held at the byte bound",
                accept=lambda s: s["undelivered_bytes"] >= bound and not conn.hlen(k.inflight),
            )
            assert held["state"] == "running" and held["undelivered"] < pages
            assert held["undelivered_bytes"] < bound + 2 * size  # one page in flight at most
            said = [w for w in held["warnings"] if w.startswith("held:")]
            assert said and f"max_undelivered_bytes = {bound}" in said[0], held["warnings"]
            monkeypatch.setattr(follow, "BATCH_BYTES", 2 * size + 50_000)
            batches: list[int] = []
            delivered = api.follow_records(
                conn, "bytes", out, seen=lambda b: batches.append(sum(map(jsonl_size, b)))
            )
    urls = [r["url"] for r in read_jsonl(out)]
    assert len(urls) == len(set(urls)) == delivered == pages + 1
    # (without the byte bound: every record the stream held, at once)
    assert max(batches) <= follow.BATCH_BYTES, batches
    assert stats.status(conn, "bytes")["undelivered_bytes"] == 0


@pytest.mark.timeout(120)
def test_crawl_o_stopped_halfway_leaves_the_records_so_far_in_its_file(redis_url, tmp_path):
    out = tmp_path / "half.jsonl"
    with HTTPSite(site(30, slow=0.2), max_requests=500, max_seconds=110) as http:
        proc = subprocess.Popen(
            [str(BIN / "rqcrawl"), "crawl", http.base + "/", "-o", str(out), "--max-depth", "1",
             "--allow-private", "--delay", "0", "--no-sitemaps", "--workers", "1",
             "--threads", "1", "--data-dir", str(tmp_path / "data")],
            env=env_with(redis_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_until(lambda: sum(served(http).values()) >= 8, 60, "a few pages fetched")
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        seen = served(http)
    assert "stopped; run the same command again to resume it" in err, err
    urls = [r["url"] for r in read_jsonl(out)]
    assert len(urls) == len(set(urls)) and set(urls) <= set(seen)
    assert len(urls) >= 6 and len(seen) < 31  # the pages ended before the stop, not all


@pytest.mark.timeout(60)
def test_a_second_follower_on_one_output_is_refused_and_a_killed_ones_restart_is_not(
    redis_url, conn, tmp_path
):
    out = tmp_path / "one.jsonl"
    lock = CrawlKeys("one").fprefix + f"{os.uname().nodename}:{out}"  # named after the output

    def holder() -> str:
        return (conn.get(lock) or b"").decode()

    seed_local(redis_url, "http://127.0.0.1:9/", "one", 0)  # no worker: it stays running
    first = follower(redis_url, "one", out)
    wait_until(lambda: f":{first.pid}:" in holder(), 30, "the first follower's lock")
    second = rqcrawl(redis_url, "export", "one", "--follow", "-o", str(out), check=False)
    assert second.returncode == 1 and second.stderr.count("\n") == 1, second.stderr
    assert "another follower" in second.stderr and str(out) in second.stderr
    first.kill()  # its lock stays until its TTL: a restart here takes it over
    first.communicate(timeout=30)
    third = follower(redis_url, "one", out)
    wait_until(lambda: f":{third.pid}:" in holder(), 30, "the lock taken over")
    rqcrawl(redis_url, "cancel", "one")
    _, err = third.communicate(timeout=30)
    assert third.returncode == 0, err
    assert not conn.exists(lock)  # released on the way out


@pytest.mark.timeout(120)
def test_failures_of_delivered_records_are_read_from_the_followers_files(redis_url, tmp_path):
    """Once delivered, records have left Redis: `rqcrawl failures` says so rather than list
    nothing quietly, and with --records it reads them from the follower's directory of
    rotated files (or one file)."""

    def handle(req) -> None:
        if req.path == "/":
            links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(4))
            reply(
                req, 200, f'<html><title>home</title>{links}<a href="/gone">x</a></html>'.encode()
            )
        elif req.path.startswith("/p"):
            reply(req, 200, b"<html><title>leaf</title>leaf</html>")
        else:
            reply(req, 404, b"not found")

    out = tmp_path / "records"
    out.mkdir()
    with HTTPSite(handle, max_requests=100, max_seconds=90) as http:
        seed_local(redis_url, http.base + "/", "gone", 1)
        proc = subprocess.Popen(
            [str(BIN / "rqcrawl"), "export", "gone", "--follow", "-o", f"{out}/",
             "--rotate-records", "2"],
            env=env_with(redis_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        with LocalWorkers(redis_url, 2, log_dir=tmp_path / "workers"):
            result = proc.communicate(timeout=90)
    assert proc.returncode == 0, result
    assert list(out.glob("*.jsonl"))  # (a batch is not split: one file or more)

    quiet = rqcrawl(redis_url, "failures", "gone")
    assert quiet.stdout == "" and "left Redis and are not listed" in quiet.stderr, quiet
    listed = rqcrawl(redis_url, "failures", "gone", "--records", str(out)).stdout
    assert listed.splitlines() == [f"http_404  404  {http.base}/gone"], listed
    one_file = tmp_path / "all.jsonl"
    one_file.write_text("".join(f.read_text() for f in sorted(out.glob("*.jsonl"))))
    again = rqcrawl(redis_url, "failures", "gone", "--records", str(one_file), "--json").stdout
    assert [json.loads(line)["url"] for line in again.splitlines()] == [f"{http.base}/gone"]

    (out / "zz.jsonl").write_text("not json\n")  # read after the follower's files
    broken = rqcrawl(redis_url, "failures", "gone", "--records", str(out), check=False)
    assert broken.returncode == 1 and "Traceback" not in broken.stderr, broken
    assert broken.stderr.strip() == f"Error: {out}: zz.jsonl: line 1 is not JSON (Expecting value)"


def following(conn, crawl: str, pid: int) -> bool:
    """Whether process `pid` holds a follower's lock of `crawl` (its signal handlers are in
    place by then: they are set before the follower starts)."""
    locks = conn.scan_iter(match=CrawlKeys(crawl).fprefix + "*")
    return any(f":{pid}:" in (conn.get(k) or b"").decode() for k in locks)


@pytest.mark.timeout(120)
def test_a_follower_sent_sigterms_until_it_has_exited_exits_cleanly(redis_url, tmp_path):
    """SIGTERM every few milliseconds until the follower is gone: it ends its delivery at
    the first, and ignores those that come once it is done (Python's default handlers, put
    back at exit, made one of them an exit status -15)."""
    conn = redis.Redis.from_url(redis_url)
    with HTTPSite(site(3), max_requests=50, max_seconds=60) as http:
        seed_local(redis_url, http.base + "/", "signalled", 1)
        for run in range(3):
            proc = follower(redis_url, "signalled", tmp_path / f"{run}.jsonl")
            wait_until(lambda p=proc: following(conn, "signalled", p.pid), 30, "the follower")
            while proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                time.sleep(0.002)
            err = proc.stderr.read()
            assert proc.returncode == 0 and "Traceback" not in err, (run, proc.returncode, err)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_follower_stopped_says_how_many_rows_it_wrote(redis_url, tmp_path, sig):
    """Ctrl-C or SIGTERM: the count, as a plain export says it (nothing was said before)."""
    conn = redis.Redis.from_url(redis_url)
    seed_local(redis_url, "http://127.0.0.1:9/", "stopped", 0)  # no worker: it never ends
    out = tmp_path / "stopped.jsonl"
    proc = follower(redis_url, "stopped", out)
    wait_until(lambda: following(conn, "stopped", proc.pid), 30, "the follower")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == f"0 row(s) written to {out}\n", err


def test_a_follower_killed_between_its_read_and_its_mark_keeps_the_batch_before(conn, tmp_path):
    """A follower read a batch (pending in the group: Redis hands a blocked read its entries
    before the process sees them) and was killed before it marked where that batch would
    start. Its restart must not cut the file back to the mark of the batch before, which is
    acknowledged and gone from Redis (a clean-clone suite run lost one visit of a followed
    crawl, as this does)."""
    k, out = CrawlKeys("cut"), tmp_path / "cut.jsonl"

    def add(n: int) -> None:
        conn.xadd(k.items, {"r": json.dumps({"url": f"http://a.test/{n}", "depth": 0})})

    def follower() -> follow.Follower:
        return follow.Follower([conn], "cut", follow.Output(out, JsonLinesExporter, "cut"))

    add(0), add(1)
    first = follower()
    assert first.step(wait=False) == 2  # written, made durable, acknowledged, trimmed
    add(2)
    assert len(first.deliveries[0].take(10)) == 1  # read, and killed before its mark
    first.lock.release()  # (a killed follower's locks are taken over by its restart)
    first.output.release()
    second = follower()
    assert second.step(wait=False) == 1
    second.output.close()
    assert [r["url"] for r in read_jsonl(out)] == [f"http://a.test/{n}" for n in range(3)]


def add_records(conn, crawl: str, urls: list[str]) -> None:
    """Records in the crawl's stream, as a worker's finish step writes them."""
    for url in urls:
        conn.xadd(CrawlKeys(crawl).items, {"r": json.dumps({"url": url, "depth": 0})})


@pytest.mark.timeout(90)
def test_one_output_spelled_another_way_is_refused_and_a_restart_so_spelled_loses_nothing(
    redis_url, conn, tmp_path
):
    """Issue 42 item 1: the output reached through a symlinked directory, a leading `//`
    or a hard link is the same output: a second follower is refused in one line (before, it
    ran, and a restart's cut-back truncated records the other had acknowledged)."""
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real)
    out = real / "out.jsonl"
    urls = [f"http://a.test/{n}" for n in range(6)]
    seed_local(redis_url, "http://127.0.0.1:9/", "twice", 0)  # no worker: it stays running
    add_records(conn, "twice", urls[:3])
    first = follower(redis_url, "twice", out)
    wait_until(lambda: out.exists() and len(read_jsonl(out)) == 3, 30, "the first records")
    os.link(out, tmp_path / "hard.jsonl")
    for other in (link / "out.jsonl", f"/{out}", tmp_path / "hard.jsonl"):
        second = rqcrawl(redis_url, "export", "twice", "--follow", "-o", str(other), check=False)
        assert second.returncode == 1 and second.stderr.count("\n") == 1, (other, second.stderr)
        assert "another follower" in second.stderr and str(other) in second.stderr, second.stderr
    first.kill()  # its batch acknowledged: a restart must cut nothing off
    first.communicate(timeout=30)
    add_records(conn, "twice", urls[3:])
    restarted = follower(redis_url, "twice", link / "out.jsonl")
    wait_until(lambda: len(read_jsonl(out)) >= 6, 30, "the records after the restart")
    rqcrawl(redis_url, "cancel", "twice")
    _, err = restarted.communicate(timeout=30)
    assert restarted.returncode == 0, err
    assert [r["url"] for r in read_jsonl(out)] == urls  # each once, in order


@pytest.mark.timeout(90)
def test_a_follower_whose_write_fails_leaves_its_records_for_its_restart(redis_url, conn, tmp_path):
    """A write that fails (the file size limit, RLIMIT_FSIZE, mid-record) is one line, and
    nothing of the batch is acknowledged: a restart writes every record once (a follower
    that acknowledged before writing delivered 0 of 3)."""
    out, urls = tmp_path / "small.jsonl", [f"http://a.test/{n}" for n in range(3)]
    seed_local(redis_url, "http://127.0.0.1:9/", "small", 0)
    add_records(conn, "small", urls)

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (40, 40))  # less than one record

    failed = subprocess.run(
        [str(BIN / "rqcrawl"), "export", "small", "--follow", "-o", str(out)],
        env=env_with(redis_url), capture_output=True, text=True, timeout=60,
        preexec_fn=small_files,
    )  # fmt: skip
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1, failed.stderr
    assert failed.stderr == f"Error: cannot write {out}: File too large\n"
    assert out.stat().st_size == 40  # the part of a record that fitted
    restarted = follower(redis_url, "small", out)
    wait_until(lambda: len(out.read_text().splitlines()) >= 3, 30, "the records rewritten")
    rqcrawl(redis_url, "cancel", "small")
    _, err = restarted.communicate(timeout=30)
    assert restarted.returncode == 0, err
    assert [r["url"] for r in read_jsonl(out)] == urls


def crawl_o(redis_url: str, base: str, out, data_dir) -> subprocess.Popen:
    """`rqcrawl crawl BASE/ -o OUT` of a loopback site, one worker process."""
    return subprocess.Popen(
        [str(BIN / "rqcrawl"), "crawl", base + "/", "-o", str(out), "--max-depth", "1",
         "--allow-private", "--delay", "0", "--no-sitemaps", "--workers", "1",
         "--threads", "2", "--data-dir", str(data_dir)],
        env=env_with(redis_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.timeout(180)
def test_crawl_o_rides_out_a_redis_restart_with_every_record_once(tmp_path):
    """Issue 42 item 2: Redis restarted midway (AOF on); the follower waits for it as the
    workers do, and the file ends with every page's record once (before, the follower died
    on the connection error and the crawl ran on: 31 rows of 1501, exit 1)."""
    pages, out = 60, tmp_path / "all.jsonl"
    server = RedisServer(tmp_path / "aof", aof=True).start()
    try:
        with HTTPSite(site(pages, slow=0.1), max_requests=500, max_seconds=170) as http:
            proc = crawl_o(server.url, http.base, out, tmp_path / "data")
            try:
                wait_until(lambda: out.exists() and len(read_jsonl(out)) >= 8, 60, "rows")
                server.stop()  # a clean restart: the append-only file has every write
                server.start()  # same port, same directory
                _, err = proc.communicate(timeout=150)
            finally:
                if proc.poll() is None:
                    proc.kill()
    finally:
        server.stop()
    assert proc.returncode == 0, err
    urls = Counter(r["url"] for r in read_jsonl(out))
    assert urls == Counter([http.base + "/"] + [f"{http.base}/p{i}" for i in range(pages)])


@pytest.mark.timeout(120)
def test_crawl_o_stops_in_one_line_when_its_follower_fails(redis_url, tmp_path):
    """Issue 41 item 4: the follower failing (a write refused: the file is /dev/full) stops
    the crawl with one line, rather than a crawl that runs on with nothing written."""
    out = tmp_path / "full.jsonl"
    out.symlink_to("/dev/full")
    with HTTPSite(site(30, slow=0.2), max_requests=500, max_seconds=110) as http:
        proc = crawl_o(redis_url, http.base, out, tmp_path / "data")
        _, err = proc.communicate(timeout=100)
        fetched = sum(served(http).values())
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert err.splitlines()[-1] == (
        f"Error: cannot write {out}: No space left on device; the crawl stopped: run the same "
        "command again to resume it"
    ), err
    assert fetched < 31  # stopped early, not at the end of the crawl

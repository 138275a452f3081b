"""A worker asked to stop while its Redis is gone ends within seconds (RQ's stop request
writes to Redis, and the recommended worker's commands retry for half a minute before it
waits for Redis); the page it held comes back through its lease once Redis is back."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import threading
import time

import pytest
import redis
from helpers import BIN, child_pids, running, seed_local, stop_pids, wait_finished, wait_until
from rq import Worker
from servers import HTTPSite, RedisServer, drip, free_port, reply

from rqcrawl.defaults import DEFAULT_SLOTS, STOP_CHECK_S
from rqcrawl.workers.runner import WORKER_CLASS, LocalWorkers, watch
from rqcrawl.workers.stopping import Stop, StopAsked
from rqcrawl.workers.worker import CrawlWorker

STOPPED_WITHIN = 10.0  # seconds from SIGTERM to exit (the bound)


def site_with_a_slow_page():
    """/ links to /slow, whose first answer drips for a minute (a job busy when Redis dies);
    later answers are at once."""
    slow_hits = []

    def handle(req):
        if req.path == "/":
            reply(req, 200, b'<html><title>home</title><a href="/slow">s</a></html>')
        elif req.path == "/slow":
            slow_hits.append(time.time())
            if len(slow_hits) == 1:
                req.send_response(200)
                req.send_header("Content-Type", "text/html")
                req.send_header("Content-Length", "200")
                req.end_headers()
                drip(req, b"x" * 200)
            else:
                reply(req, 200, b"<html><title>slow</title></html>")
        else:
            reply(req, 404, b"")

    return handle, slow_hits


def stop_within(proc: subprocess.Popen, bound: float) -> tuple[float, int]:
    """SIGTERM `proc`; (seconds until it exited, its status), killing its group after
    `bound` x 3 so that a hang fails the test instead of blocking it."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(bound * 3)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        code = -signal.SIGKILL
    return time.monotonic() - sent, code


@pytest.mark.parametrize(
    ("worker_class", "threads"),
    [(WORKER_CLASS, 1), (WORKER_CLASS, 2), (None, 1)],
    ids=["CrawlWorker", "threads", "stock"],
)
@pytest.mark.parametrize("busy", [True, False], ids=["busy", "idle"])
def test_a_worker_whose_redis_is_gone_stops_within_seconds(tmp_path, worker_class, threads, busy):
    handle, slow_hits = site_with_a_slow_page()
    server = RedisServer(tmp_path / "aof", aof=True).start()
    try:
        with HTTPSite(handle, max_requests=50, max_seconds=180) as http:
            conn = redis.Redis.from_url(server.url)
            if busy:
                seed_local(server.url, http.base + "/", "gone", 1)
            workers = LocalWorkers(
                server.url, 1, threads, log_dir=tmp_path, worker_class=worker_class
            )
            try:
                wait_until(lambda: Worker.all(connection=conn), 30, "the worker to register")
                if busy:
                    wait_until(lambda: slow_hits, 30, "the slow page requested")
                    time.sleep(1)  # its job well inside the download
                else:
                    time.sleep(2)  # idle, blocked on the queue
                server.proc.kill()  # SIGKILL: Redis gone without a word
                server.proc.wait()
                time.sleep(1)  # the behaviour under test: the worker finds Redis gone
                took, code = stop_within(workers.procs[0], STOPPED_WITHIN)
                log = (tmp_path / "1.log").read_text()
            finally:
                with contextlib.suppress(ProcessLookupError):  # a stock worker's horse
                    os.killpg(workers.procs[0].pid, signal.SIGKILL)
                workers.stop()
            assert took < STOPPED_WITHIN, (took, log)
            if worker_class:  # ours ends cleanly (RQ's own exits with status 1)
                assert code == 0 and "Traceback" not in log.split("Redis unreachable")[-1], log
            if not busy:
                return
            # The page it held comes back through its lease once Redis is back.
            server.start()  # same port, same directory: the append-only file is read
            with LocalWorkers(server.url, 1, log_dir=tmp_path / "after"):
                s = wait_finished(server.url, "gone", timeout=90)
    finally:
        server.stop()
    assert len(slow_hits) == 2 and s["fetched"] == 2 and s["in_flight"] == 0, (slow_hits, s)


def test_rqcrawl_crawl_whose_redis_is_gone_stops_within_seconds(tmp_path):
    handle, slow_hits = site_with_a_slow_page()
    server = RedisServer(tmp_path / "redis").start()
    try:
        with HTTPSite(handle, max_requests=50, max_seconds=120) as http:
            crawl = subprocess.Popen(
                [str(BIN / "rqcrawl"), "crawl", http.base + "/", "-o", str(tmp_path / "o.jsonl"),
                 "--url", server.url, "--allow-private", "--delay", "0", "--no-sitemaps",
                 "--data-dir", str(tmp_path / "data")],
                stderr=subprocess.PIPE, text=True, start_new_session=True,
            )  # fmt: skip
            wait_until(lambda: slow_hits, 60, "the slow page requested")
            server.proc.kill()
            server.proc.wait()
            time.sleep(2)  # the behaviour under test: the crawl and its workers find it gone
            took, code = stop_within(crawl, STOPPED_WITHIN)
            err = crawl.stderr.read()
    finally:
        server.stop()
    assert took < STOPPED_WITHIN, (took, err)
    assert code == 1 and "Traceback" not in err, err
    assert err.rstrip().splitlines()[-1].startswith("Error: crawl "), err


def test_a_stop_ends_only_a_blocked_dequeue_and_moves_no_job(conn):
    """end_blocked_dequeues finds the worker's connection blocked on the queue by its name and
    ends its wait without a job; a dequeue that already took a job is left alone."""
    worker = CrawlWorker(["crawl"], connection=conn, name="stopper")
    ended = []

    def dequeue() -> None:
        ended.append(worker.connection.blmove("src", "dst", 20))

    assert not worker.end_blocked_dequeues({"stopper"})  # nothing blocked
    blocked = threading.Thread(target=dequeue)
    blocked.start()
    wait_until(lambda: "b" in client_flags(conn, "stopper"), 10, "the dequeue to block")
    began = time.monotonic()
    assert worker.end_blocked_dequeues({"stopper", "another"}) == {"stopper"}
    blocked.join(20)
    assert ended == [None] and time.monotonic() - began < 5  # its 20 s not waited
    conn.rpush("src", "job")
    assert worker.connection.blmove("src", "dst", 1) == b"job"
    assert not worker.end_blocked_dequeues({"stopper"}) and conn.lrange("dst", 0, -1) == [b"job"]


def client_flags(conn: redis.Redis, name: str) -> str:
    """The flags of the clients named `name` ('b': blocked)."""
    return "".join(c["flags"] for c in conn.client_list() if c["name"] == name)


def test_an_idle_worker_stops_at_once(redis_url, tmp_path):
    """SIGTERM to exit of an idle worker, blocked on the queue: its slots' dequeues are ended
    by CLIENT UNBLOCK (not after the rest of their STOP_CHECK_S), and its interpreter skips
    its last collections (quickexit). The unblocks are read from Redis's SLOWLOG (every
    command logged meanwhile), not timed: the time from the signal to the last dequeue's end
    grows with the machine's load (0.07-0.12 s quiet, 0.18-0.23 s in a CI run beside other
    work), up to what the dequeues' own ends would take (0.21-0.24 s). Without the unblocks
    the worker sends none (checked by disabling end_blocked_dequeues)."""
    conn = redis.Redis.from_url(redis_url)
    took = []
    logged = {k: conn.config_get(k)[k] for k in ("slowlog-log-slower-than", "slowlog-max-len")}
    try:
        for n in range(3):
            workers = LocalWorkers(redis_url, 1, log_dir=tmp_path / str(n))
            proc = workers.procs[0]
            try:
                wait_until(
                    lambda pid=proc.pid: any(w.pid == pid for w in Worker.all(connection=conn)),
                    30, "the worker to register",
                )  # fmt: skip
                wait_until(lambda: len(blocked_ids(conn)) == DEFAULT_SLOTS, 30,
                           "each of the worker's slots blocked on the queue")  # fmt: skip
                blocked = blocked_ids(conn)
                conn.config_set("slowlog-max-len", 100_000)
                conn.config_set("slowlog-log-slower-than", 0)
                conn.slowlog_reset()
                sent = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                proc.wait(STOPPED_WITHIN)
                took.append((time.monotonic() - sent, proc.returncode))
                conn.config_set("slowlog-log-slower-than", logged["slowlog-log-slower-than"])
                unblocked = {
                    int(entry["command"].split()[2])
                    for entry in conn.slowlog_get(100_000)
                    if entry["command"].upper().startswith(b"CLIENT UNBLOCK ")
                }
                # (a dequeue whose own STOP_CHECK_S ran out before the worker, late on a
                # loaded machine, listed its connections needs none)
                assert blocked & unblocked, (blocked, unblocked)
            finally:
                workers.stop()
    finally:
        for name, value in logged.items():
            conn.config_set(name, value)
    assert all(code == 0 for _, code in took), took
    assert sorted(t for t, _ in took)[1] < 2 * STOP_CHECK_S, took


def blocked_ids(conn: redis.Redis) -> set[int]:
    """The ids of the connections blocked in a command (a worker's dequeue), from CLIENT
    LIST."""
    return {int(c["id"]) for c in conn.client_list(_type="normal") if "b" in c["flags"]}


def test_a_watch_that_starts_after_its_redis_is_gone_waits_for_it_and_stops_when_asked():
    """On a busy machine the workers may fetch (and Redis go) before `rqcrawl crawl` starts
    watching: its first reads (the crawl's settings, its shards) wait for Redis like every
    later one, and a stop asked meanwhile ends it as a stop (CI once saw a raw "Redis:
    Error 111" here instead of "crawl ... stopped")."""
    gone = redis.Redis(port=free_port(), socket_connect_timeout=1)
    stop = Stop()
    threading.Timer(1.5, stop.asked.set).start()
    out = io.StringIO()
    with pytest.raises(StopAsked):
        watch(gone, "gone", LocalWorkers([], 0), out=out, stop=stop)
    assert "Redis unreachable" in out.getvalue(), out.getvalue()


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (workers, the embedded Redis, a worker's own children)."""
    found = []
    for child in child_pids(pid):
        found += [child, *descendants(child)]
    return found


@pytest.mark.timeout(120)
def test_a_crawl_command_killed_with_sigkill_leaves_no_worker_or_redis_running(tmp_path):
    """`rqcrawl crawl` killed with no chance to stop anything (kill -9, the OOM killer): its
    workers and its embedded Redis, in sessions of their own, end with it. Before, they ran
    for good (seen after a suite run: a worker and a redis-server of a test's crawl, orphans
    for minutes after their test)."""

    def handle(req) -> None:
        reply(req, 200, f"<html><title>{req.path}</title>{time.time()}</html>".encode())

    with HTTPSite(handle, max_requests=500, max_seconds=100) as http:
        proc = subprocess.Popen(
            [str(BIN / "rqcrawl"), "crawl", http.base + "/", "--revisit", "1s",
             "--allow-private", "--workers", "2", "-o", str(tmp_path / "o.jsonl"),
             "--data-dir", str(tmp_path / "data")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        left: list[int] = []
        try:
            wait_until(lambda: sum(http.hits.values()) > 0, 60, "a request")
            left = descendants(proc.pid)
            assert len(left) >= 3, left  # two workers and the embedded Redis
            proc.kill()
            proc.wait()
            wait_until(lambda: not any(map(running, left)), 30, "the crawl's processes to end")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            stop_pids([pid for pid in left if running(pid)])

"""The in-flight leases of the frontier, step by step against a real Redis: who takes one, who
drops it, and what the recovery pass does with an expired, renewed or missing one."""

from __future__ import annotations

import time

from rq.job import Job

from rqcrawl.config import CrawlConfig
from rqcrawl.defaults import LEASE
from rqcrawl.frontier import configs, keys, recovery, scripts
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.leases import Renewer
from rqcrawl.frontier.messages import Ending, Slot
from rqcrawl.frontier.state import InFlight
from rqcrawl.workers.crawlqueue import ask_ahead

URL = "http://127.0.0.1:9/a/page.html"


def seeded(conn, crawl: str) -> tuple[Frontier, str]:
    """A crawl whose one URL was released as a queued RQ job; returns its job id."""
    cfg = CrawlConfig.from_dict(
        {"allow_private": True, "bloom_capacity": 1000, "retries": 2, "sitemaps": False}
    )
    configs.save(conn, crawl, cfg)
    frontier = Frontier(conn, crawl, cfg)
    frontier.seed([URL])
    return frontier, InFlight(0, 0.0, 0).job_id(crawl, URL)


def lease_of(frontier: Frontier) -> float | None:
    return frontier.redis.zscore(frontier.keys.leased, URL)


def expire(frontier: Frontier) -> None:
    """Its worker died: the URL's lease and its host's slot run out (no renewal)."""
    past = time.time() - 1
    frontier.redis.zadd(frontier.keys.leased, {URL: past})
    frontier.redis.zadd(frontier.keys.host_leases(frontier.key_of(URL)), {URL: past})


def entry_of(frontier: Frontier) -> InFlight:
    return InFlight.parse(frontier.redis.hget(frontier.keys.inflight, URL))


def test_a_queued_job_holds_no_lease_and_is_not_taken_for_lost(conn):
    frontier, _ = seeded(conn, "q")
    assert lease_of(frontier) is None
    assert frontier.reap() == 0 and entry_of(frontier).attempt == 0


def test_the_live_job_takes_the_lease_a_stale_one_does_not(conn):
    frontier, job_id = seeded(conn, "c")
    stale = job_id.removesuffix("-0-0") + "-0-1"
    assert frontier.claim(URL, stale).entry is None and lease_of(frontier) is None
    claim = frontier.claim(URL, job_id)
    assert claim.entry is not None and not claim.paused
    assert time.time() + LEASE - 1 < lease_of(frontier) <= time.time() + LEASE


def test_an_expired_lease_brings_the_url_back_as_its_next_attempt(conn):
    frontier, job_id = seeded(conn, "x")
    frontier.claim(URL, job_id)
    expire(frontier)
    assert frontier.reap() == 1
    assert entry_of(frontier).attempt == 1 and lease_of(frontier) is None
    assert conn.hget(frontier.keys.counters, keys.RECOVERED) == b"1"
    next_job = Job.fetch(entry_of(frontier).job_id("x", URL), connection=conn)
    assert next_job.get_status() == "queued"


def test_a_recovered_url_goes_to_the_head_of_the_queue(conn):
    """It waited a lease already: it must not wait again behind the queued jobs."""
    frontier, job_id = seeded(conn, "h")
    frontier.claim(URL, job_id)
    frontier.seed([URL + "?next"])  # queued behind it
    expire(frontier)
    assert frontier.reap() == 1
    assert frontier.queue.job_ids[0] == entry_of(frontier).job_id("h", URL)


def test_a_job_dequeued_ahead_by_a_worker_killed_before_it_started_comes_back(conn, monkeypatch):
    """The worst moment for a worker that dequeues ahead (crawlqueue.ask_ahead): killed
    after its last success took the next job into RQ's intermediate list, before the job
    started. The job is `queued` in no queue: the recovery pass takes its URL back as its
    next attempt once its release is LOST_AFTER old."""
    frontier, job_id = seeded(conn, "k")
    scripts.load(conn, scripts.DEQUEUE)  # (by the worker's first dequeue, a plain call)
    with conn.pipeline(transaction=False) as pipe:  # the success pipeline's last step
        ask_ahead(pipe, frontier.queue, Job)
        (found,) = pipe.execute()
    assert found[0].decode() == job_id and frontier.queue.job_ids == []
    assert frontier.reap() == 0  # (released just now: its job may still start)
    monkeypatch.setattr(recovery, "LOST_AFTER", 0)
    assert frontier.reap() == 1
    assert entry_of(frontier).attempt == 1
    assert conn.hget(frontier.keys.counters, keys.RECOVERED) == b"1"


def renew(frontier: Frontier) -> None:
    """What the renewing thread of a process holding the URL's lease does."""
    renewer = Renewer()
    with renewer.hold(frontier.redis, (frontier.keys.leased, URL)):
        renewer.renew()


def test_a_renewed_lease_keeps_the_url_with_its_job(conn):
    frontier, job_id = seeded(conn, "r")
    frontier.claim(URL, job_id)
    expire(frontier)
    renew(frontier)
    assert frontier.reap() == 0 and entry_of(frontier).attempt == 0
    assert lease_of(frontier) > time.time()


def test_finishing_or_parking_a_url_drops_its_lease(conn):
    frontier, job_id = seeded(conn, "f")
    entry = frontier.claim(URL, job_id).entry
    slot = Slot(frontier.key_of(URL), 0.1)
    assert frontier.retry_later(URL, entry, 0.5, slot)
    assert lease_of(frontier) is None and conn.zscore(frontier.keys.later, URL) is not None
    assert (
        entry_of(frontier).attempt == 1 and conn.hget(frontier.keys.counters, keys.RETRIES) == b"1"
    )
    assert not frontier.retry_later(URL, entry, 0.5, slot)  # the stale job parks nothing
    renew(frontier)  # a renewal after the end does not bring a lease back
    assert lease_of(frontier) is None

    frontier, job_id = seeded(conn, "g")
    frontier.claim(URL, job_id)
    frontier.finish(URL, Ending({"fetched": 1}, {"url": URL, "outcome": "fetched", "depth": 0}))
    assert lease_of(frontier) is None and conn.hlen(frontier.keys.inflight) == 0


def test_an_expired_lease_of_an_ended_url_is_dropped(conn):
    frontier, job_id = seeded(conn, "e")
    frontier.claim(URL, job_id)
    conn.hdel(frontier.keys.inflight, URL)  # ended by a path that did not know the lease
    expire(frontier)
    assert frontier.reap() == 0 and lease_of(frontier) is None


def test_the_renewer_renews_what_its_jobs_hold_and_forgets_what_they_left(conn):
    frontier, job_id = seeded(conn, "h")
    frontier.claim(URL, job_id)
    renewer = Renewer()
    host_slot = ("rqcrawl:{h}:leases:127.0.0.1:9", "job-1")
    conn.zadd(host_slot[0], {host_slot[1]: time.time() - 1})
    with renewer.hold(conn, (frontier.keys.leased, URL), host_slot):
        expire(frontier)
        renewer.renew()  # both in one round trip
        assert lease_of(frontier) > time.time() and conn.zscore(*host_slot) > time.time()
    expire(frontier)
    renewer.renew()
    assert lease_of(frontier) < time.time()

"""The frontier's RQ side: released URLs become RQ jobs, deferred ones wake up, lost ones
come back.

The crawl's state and its changes (admission, the level barrier, the window, leases,
deferral) belong to rqcrawl.frontier.state; this module turns what a change released into RQ jobs of
the queue `crawl`, with tiny JSON-friendly arguments (crawl, url, depth), so that a stock
`rq worker crawl` serves any crawl.

A URL whose host is not ready (politeness, robots.txt) stays in flight but leaves RQ: it waits
in the state's `later` set (its next job shown in RQ's deferred registry) and is released
again as a new job of the same attempt (a new `turn`) by whichever comes first: a job starting
on any worker, the release thread of `rqcrawl.workers.CrawlWorker`, or the crawl's waker job,
which workers without that thread (the card's stock `rq worker crawl`) queue when they park a
URL: no RQ scheduler is needed. A retry waits there too, as the next attempt.

The recovery pass (every REAP_EVERY seconds) requeues a URL whose lease ran out (its worker
died) within seconds, where RQ itself notices a dead worker's job only when its heartbeat
expires.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING

from redis import Redis
from redis.client import Pipeline
from rq import Queue
from rq.job import Job, JobStatus
from rq.registry import DeferredJobRegistry, FinishedJobRegistry, StartedJobRegistry

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.robots import site_of
from rqcrawl.frontier import keys, levels, shards
from rqcrawl.frontier.outage import TableUnavailable
from rqcrawl.frontier.state import (
    RENDER_TURN,
    Children,
    CrawlState,
    Ended,
    InFlight,
    Released,
    StaleCrawl,
    outcome_counts,
)
from rqcrawl.ops.sinks import record
from rqcrawl.parse import sitemaps
from rqcrawl.parse.changes import Content, Prior
from rqcrawl.parse.urls import host_of
from rqcrawl.render import choice

if TYPE_CHECKING:
    from rqcrawl.frontier.tasks import TaskTable

LOST_AFTER = 30  # seconds a released URL may go without a live RQ job before it is requeued
# A dead worker's URL is queued again LEASE to LEASE + REAP_EVERY seconds after its death.
_LIVE = {"queued", "started", "scheduled", "deferred"}
PUMP_EVERY = 2.0  # seconds between two pumps of a crawl's due revisits (by any process)
PUMP_BATCH = 500  # due URLs taken from the task table per transaction
DRAIN_BATCH = 500  # links moved from a shard's outbox to their shards per round
JOB_FUNC = "rqcrawl.workers.jobs.crawl_url"
RENDER_FUNC = "rqcrawl.render.render_url"  # a page the browser renders (queue crawl-render)
SITEMAP_FUNC = "rqcrawl.workers.jobs.crawl_sitemap"  # a sitemap entry (parse.sitemaps)
log = logging.getLogger(__name__)
WAKER_FUNC = "rqcrawl.workers.jobs.await_deferred"
# Told the due time of every URL this process parks: the release thread of
# rqcrawl.workers.CrawlWorker, which sleeps up to its MAX_SLEEP between two looks at the
# parked URLs, and would release one parked for sooner than that up to MAX_SLEEP late.
_park_watchers: list[Callable[[float], None]] = []
# Seconds a waker job (stock workers) goes on releasing deferred URLs as they come due, while
# no other job waits for a worker: each waker is a fork and the crawler's imports in a stock
# worker, so one runs for a while rather than one per deferral.
WAKER_SPAN = 5.0


def _crawl_func(url: str) -> str:
    """The job function of `url` on the crawl queue: a sitemap entry's reads its document."""
    return SITEMAP_FUNC if sitemaps.document(url) else JOB_FUNC


class CompactJob(Job):
    """An RQ job whose first save leaves out the fields that are still empty (callbacks,
    start and end times, worker, group): 8 of 17, about 130 bytes of Redis per pending job.
    RQ reads a missing field as empty. Only the first save: a later one (a requeue, a failed
    job) must overwrite old values with empty ones."""

    _new = False

    @classmethod
    def create(cls, *args, **kwargs) -> CompactJob:
        job = super().create(*args, **kwargs)
        job._new = True
        return job

    def to_dict(self, include_meta: bool = True, include_result: bool = True) -> dict:
        fields = super().to_dict(include_meta=include_meta, include_result=include_result)
        return {k: v for k, v in fields.items() if v != ""} if self._new else fields

    def set_status(self, status: JobStatus, pipeline: Pipeline | None = None) -> None:
        """A new job's status goes in its first save, which RQ's enqueue queues right after
        in the same pipeline: one HSET per job, not two."""
        if self._new and pipeline is not None:
            self._status = status
            return
        super().set_status(status, pipeline=pipeline)


def watch_parks(watcher: Callable[[float], None]) -> Callable[[], None]:
    """Call `watcher` with the due time of every URL this process parks from now on;
    returns what stops it."""
    _park_watchers.append(watcher)
    return lambda: _park_watchers.remove(watcher)


class Frontier:
    """One crawl's frontier as RQ sees it: its state, and the jobs of what that releases."""

    def __init__(self, redis: Redis, crawl: str, cfg: CrawlConfig):
        self.redis = redis
        self.crawl = crawl
        self.cfg = cfg
        self.state = CrawlState(redis, crawl, cfg)
        self.queue = Queue(keys.QUEUE_NAME, connection=redis, job_class=CompactJob)
        self.render_queue = Queue(keys.RENDER_QUEUE, connection=redis, job_class=CompactJob)

    def seed(self, urls: list[str], priority: int = 0) -> int:
        """Admit `urls` at depth 0 and `priority`, and their sites' first sitemap documents
        (rqcrawl.parse.sitemaps) unless the crawl reads none, and queue what the window allows;
        returns how many URLs were new to the crawl."""
        admitted, released = self.state.seed(urls, priority)
        if self.cfg.sitemaps and self.cfg.max_depth >= 1:
            roots = {site_of(u): sitemaps.entry(sitemaps.root(site_of(u))) for u in urls}
            cap = self.cfg.max_sitemaps_per_host
            released += self.state.hold_sitemaps(roots.items(), priority, cap)[1]
        self._enqueue(released)
        return admitted

    def resume(self) -> None:
        """Clear the crawl's halt and queue the held URLs of the current level."""
        self._enqueue(self.state.resume())

    def claim(
        self, url: str, rq_job_id: str, reply: list | None = None
    ) -> tuple[InFlight | None, bool]:
        """The URL's inflight entry if this job is its live attempt and turn (the job then
        holds the URL's lease), else None, and whether the crawl is paused; queues the
        deferred URLs that are due. Raises StaleCrawl if the crawl is not this Frontier's.
        `reply`: the claim's reply, when the worker already sent it (CrawlState.claim)."""
        claim = self.state.claim(url, rq_job_id, reply)
        self._enqueue(claim.due)
        if claim.stale:
            raise StaleCrawl(self.crawl)
        return claim.entry, claim.paused

    def finish(
        self,
        url: str,
        counts: dict[str, int],
        record: dict,
        children: Children,
        child_depth: int,
        content: Content | None = None,
        priority: int = 0,
        via: str = "",
    ) -> None:
        """End `url` for good (CrawlState.finish) and queue what that released. With
        revisits, the visit is first written to the task table, which schedules the next
        one, and the record gets its visit number and change: a worker dying between the
        two leaves the URL in flight, fetched again, rather than ended with no next visit.
        A page whose body an earlier URL of the crawl had is recorded `duplicate_of` it and
        its links are not admitted: they were with the first. `content`: what a fetched
        visit saw of the page; `priority`: the URL's (its links' is inherited from it).
        `via`: the children are a redirect's target (rqcrawl.fetch.hops), which keeps the
        priority."""
        if self.cfg.revisit:
            visited = self.table.visited(
                self.crawl, url, child_depth - (0 if via else 1), record["outcome"],
                record["status"], content, self.cfg, priority,
            )  # fmt: skip
            record["visit"], record["change"] = visited.visit, visited.change
            if visited.similarity is not None:
                record["similarity"] = visited.similarity
            if visited.duplicate_of:
                record["duplicate_of"], children = visited.duplicate_of, []
        child_priority = priority if via else self.state.inherited(priority)
        self._ended(
            self.state.finish(url, counts, record, children, child_depth, child_priority, via)
        )

    def _ended(self, ended: Ended) -> None:
        """Queue what ending a URL released, and what it calls for: a drain of the links
        it sent to other shards, the level's coordination, a recovery pass."""
        self._enqueue(ended.released)
        if ended.sent:
            self.drain()
        if ended.level_done:
            levels.coordinate(self.peers)
        if ended.reap_due:
            self.reap()

    def finish_sitemap(self, url: str, entry: InFlight, found: sitemaps.Found) -> None:
        """End the sitemap entry `url` for good: admit its pages at depth 1 (at most
        `max_sitemap_urls` admitted per site, grouped by priority), hold the sitemaps it
        names (at most `max_sitemaps_per_host` per site), then end it, and queue what that
        released. With revisits, known pages whose <lastmod> is after their last visit are
        due at once, and the document's own visit goes to the task table first (as a page's:
        read again on its schedule). A worker dying in between leaves the entry in flight:
        read again, what it admitted or held already is not again."""
        site, counts = site_of(sitemaps.target(url)), Counter(found.counts)
        pages = found.pages
        taken = self.state.take_sitemap_urls(site, len(pages), self.cfg.max_sitemap_urls)
        if taken < len(pages):
            counts[keys.links_dropped("max_sitemap_urls")] += len(pages) - taken
        by_priority: dict[int, list[tuple[str | None, str]]] = {}
        base = self.state.inherited(entry.priority)
        for listed_page in pages[:taken]:
            group = by_priority.setdefault(base + listed_page.offset, [])
            group.append((listed_page.verdict, listed_page.url))
        released: Released = []
        sent, admitted = False, 0
        for priority, children in sorted(by_priority.items(), reverse=True):
            listed = self.state.admit_listed(children, 1, priority, "sitemap")
            released += listed.released
            sent, admitted = sent or bool(listed.sent), admitted + listed.admitted
        self.state.return_sitemap_urls(site, taken - admitted)
        cap = self.cfg.max_sitemaps_per_host  # no more can be held: a site's cap
        named = [(site_of(d), sitemaps.entry(d)) for d in found.sitemaps[:cap]]
        capped, more = self.state.hold_sitemaps(named, entry.priority, cap)
        capped += max(0, len(found.sitemaps) - cap)
        if capped:
            counts[keys.sitemap_problem("not_held")] += capped
        released += more
        self._enqueue(released)
        if sent:
            self.drain()
        if self.cfg.revisit:
            self._revisit_sitemap(url, entry, found, counts)
        self._ended(self.state.finish(url, counts, None, [], 1))

    def _revisit_sitemap(
        self, url: str, entry: InFlight, found: sitemaps.Found, counts: Counter
    ) -> None:
        """Bring forward the known pages a sitemap says changed since their last visit, and
        schedule the sitemap's next read (its task row: unchanged documents are read less
        often, as pages are; one that failed or is gone backs off, as pages do)."""
        dated = [(p.url, p.lastmod) for p in found.pages if p.lastmod is not None]
        counts[keys.SITEMAP_LASTMOD] += self.table.pull_forward(self.crawl, dated)
        outcome = "fetched" if found.digest else "failed"
        content = Content(found.digest) if found.digest else None
        self.table.visited(
            self.crawl, url, 0, outcome, found.status, content, self.cfg.for_sitemaps(),
            entry.priority,
        )  # fmt: skip

    @cached_property
    def peers(self) -> list[Frontier]:
        """The frontier of every shard of the crawl, in shard order (this one among them)."""
        own = self.state.index
        return [
            self if i == own else Frontier(shards.connect(url), self.crawl, self.cfg)
            for i, url in enumerate(self.cfg.shards)
        ]

    def drain(self) -> int:
        """Admit the links waiting in this shard's outbox on their own shards and queue what
        that releases there, then drop them from the outbox: a drain that dies in between
        leaves them to the next one, whose admissions are no-ops of the Bloom filter.
        Returns how many links were moved (0 also when another drain holds the outbox)."""
        moved = 0
        while True:
            token = uuid.uuid4().hex
            links = self.state.read_outbox(token, DRAIN_BATCH)
            if links is None:
                return moved
            by_shard: dict[int, list] = {}
            for link in links:
                by_shard.setdefault(link.shard, []).append(link)
            for shard, group in by_shard.items():
                peer = self.peers[shard]
                peer._enqueue(peer.state.admit(group).released)
            if not all([self.peers[shard].state.replicated() for shard in by_shard]):
                self.state.trim_outbox(token, 0)  # kept: the next drain admits them again
                return moved
            self.state.trim_outbox(token, len(links))
            moved += len(links)
            if len(links) < DRAIN_BATCH:
                return moved

    def advance(self, level: int) -> None:
        """Raise this shard's level past `level` (rqcrawl.frontier.levels), queue its URLs."""
        self._enqueue(self.state.advance(level))

    def prior(self, url: str) -> Prior | None:
        """What the last visit of `url` left for a conditional GET, in a crawl with
        revisits (one primary-key SELECT), else None."""
        return self.table.prior(self.crawl, url) if self.cfg.revisit else None

    def retry_later(self, url: str, entry: InFlight, delay: float, why: str = "") -> bool:
        """Park the next attempt of `url` until `delay` seconds from now, at that exact time
        (like a deferral, not on RQ's scheduler's whole seconds); False if the job was
        stale. `why` is kept for `rqcrawl inspect` until the attempt is due."""
        nxt = replace(entry, released_at=time.time() + delay, attempt=entry.attempt + 1, turn=0)
        if not self._park(url, entry, nxt, keys.RETRIES):
            return False
        if why:
            self.state.note_retry(url, why, delay)
        return True

    def defer(self, url: str, entry: InFlight, until: float) -> bool:
        """Park `url` until `until` without using a worker; False if the job was stale."""
        return self._park(url, entry, replace(entry, released_at=until, turn=entry.turn + 1))

    def _park(self, url: str, entry: InFlight, nxt: InFlight, counter: str = "") -> bool:
        if not self.state.park(url, entry, nxt, counter):
            return False
        self._show_parked(url, nxt, "retry" if counter else "deferred")
        for watcher in _park_watchers:
            watcher(nxt.released_at)
        return True

    def _show_parked(self, url: str, nxt: InFlight, why: str) -> None:
        """Make the parked URL's next job now, `deferred` in RQ's registry of the queue
        `crawl`, where rq-dashboard lists it (its Deferred count) with when and why it waits;
        the release (_enqueue) queues the same job id. It expires if the URL ends otherwise
        (a cancel)."""
        kwargs = self._job_kwargs(url, nxt)
        at = datetime.fromtimestamp(nxt.released_at, UTC).strftime("%H:%M:%S")
        kwargs["description"] += f" ({why}: waits until {at} UTC)"
        job = self.queue.create_job(_crawl_func(url), status=JobStatus.DEFERRED, **kwargs)
        life = max(0, int(nxt.released_at - time.time())) + LOST_AFTER
        with self.redis.pipeline(transaction=False) as pipe:
            job.save(pipeline=pipe)
            pipe.expire(job.key, life)
            self.deferred_registry.add(job, pipeline=pipe)
            pipe.execute()

    @cached_property
    def deferred_registry(self) -> DeferredJobRegistry:
        return DeferredJobRegistry(queue=self.queue)

    def ensure_waker(self) -> None:
        """Queue the crawl's waker job (await_deferred) unless one is queued or running. A
        worker without the release thread of rqcrawl.workers.CrawlWorker (the card's stock
        `rq worker crawl`, no scheduler) calls it when it parks a URL: the parked URLs then
        come back even when no other job would start."""
        if not self.state.claim_waker():
            return
        self.queue.enqueue_call(
            WAKER_FUNC,
            args=(self.crawl,),
            job_id=f"rqcrawl-{self.crawl}-wake-{time.time_ns()}",
            description=f"{self.crawl} wake deferred URLs (for workers without a release thread)",
            result_ttl=0,
            failure_ttl=self.cfg.failure_ttl,
            timeout=self.cfg.job_timeout,
        )

    def await_deferred(self) -> int:
        """The waker job's work: for WAKER_SPAN seconds at most, queue the deferred URLs as
        they come due, until other jobs wait in the queue (this worker is then needed for
        them; their starts release due URLs too); then queue the next waker while URLs are
        still parked. Returns how many URLs it queued."""
        released, end = 0, time.time() + WAKER_SPAN
        while (nxt := self.next_due()) is not None and self.queue.count == 0:
            if time.time() >= end:
                break
            time.sleep(max(0.0, min(nxt, end) - time.time()))
            released += self.release_due()
        self.state.drop_waker()
        if self.next_due() is not None:
            self.ensure_waker()
        return released

    def release_due(self) -> int:
        """Queue the deferred URLs whose time has come; returns how many."""
        due = self.state.take_due()
        self._enqueue(due)
        return len(due)

    def next_due(self) -> float | None:
        """When the earliest deferred URL may run, if any is waiting."""
        return self.state.next_due()

    @cached_property
    def table(self) -> TaskTable:
        """The crawl's task table (crawls with revisits). Imported here: SQLAlchemy takes a
        fifth of a second to import, which a stock worker would pay for every job."""
        from rqcrawl.frontier.tasks import TaskTable

        return TaskTable(self.cfg.db)

    def maybe_pump(self, every: float = PUMP_EVERY) -> int:
        """Pump the due revisits of a crawl with revisits that is not cancelled, unless a pump
        ran for it in the last `every` seconds; returns how many URLs were readmitted."""
        if not self.cfg.revisit or self.state.cancelled() or not self.state.pump_due(every):
            return 0
        return self.pump()

    def pump(self) -> int:
        """Move due URLs from the task table into Redis (CrawlState.readmit) in batches and
        queue what that releases, until none is due or a window's worth is waiting: the
        database holds what is known, Redis only what is due now. The table is the whole
        crawl's: in a crawl over several shards, each URL goes to its host's shard (a pump
        of any shard may take it; the table hands each due row to one pump)."""
        readmitted = 0
        while due := self._take_due():
            targets = self._by_shard(due)
            for frontier, rows in targets.items():
                added, released = frontier.state.readmit(rows)
                frontier._enqueue(released)
                readmitted += added
            full = any(f.state.unfinished() >= self.cfg.window for f in targets)
            if len(due) < PUMP_BATCH or full:
                break
        return readmitted

    def _take_due(self) -> list[tuple[str, int, int]]:
        """A batch of due rows; none while the table does not answer (the next pump takes
        them: a row stays due until a pump took it)."""
        try:
            return self.table.take_due(self.crawl, PUMP_BATCH)
        except TableUnavailable as exc:
            log.warning("crawl %s: pump skipped: %s", self.crawl, exc)
            return []

    def _by_shard(self, due: list[tuple[str, int, int]]) -> dict[Frontier, list]:
        """Due rows (url, depth, priority) by the frontier of their host's shard."""
        if self.state.shards is None:
            return {self: due}
        placed: dict[Frontier, list] = {}
        for row in due:
            shard = self.state.shards.index_of(host_of(sitemaps.target(row[0])))
            placed.setdefault(self.peers[shard], []).append(row)
        return placed

    def _enqueue(self, entries: Released, at_front: bool = False) -> None:
        """Create the RQ jobs of released URLs in one pipeline (`at_front`: at the head of
        the queue, for a URL that already waited)."""
        if not entries:
            return
        by_queue: dict[Queue, list] = {}
        parked = []
        for u, e in entries:
            rendered = e.rendered or (self.cfg.render and self._rendered(u))
            queue, func = (
                (self.render_queue, RENDER_FUNC) if rendered else (self.queue, _crawl_func(u))
            )
            data = Queue.prepare_data(func, at_front=at_front, **self._job_kwargs(u, e))
            by_queue.setdefault(queue, []).append(data)
            if e.attempt or e.turn:
                parked.append(data.job_id)
        with self.redis.pipeline() as pipe:
            # A job id comes back when a paused URL is released again: its finished
            # predecessor's hash (and expiry) must not outlive into the new job.
            for queue, datas in by_queue.items():
                pipe.delete(*(Job.key_for(d.job_id) for d in datas))
                queue.enqueue_many(datas, pipeline=pipe)
            if parked:  # shown in the deferred registry while they waited (_show_parked)
                pipe.zrem(self.deferred_registry.key, *parked)
            pipe.execute()

    def _rendered(self, url: str) -> bool:
        """Whether `url` goes straight to the render queue (a `render` pattern names it)."""
        return not sitemaps.document(url) and choice.matches(url, self.cfg)

    def hand_off(self, url: str, entry: InFlight) -> bool:
        """Give `url`, claimed as `entry` by a plain job that found it needs the browser
        (render = "auto"), to a new job on the render queue, as a browser's turn of the same
        attempt (state.RENDER_TURN); False if the job was stale. A worker dying in between
        leaves the URL with no RQ job: the recovery pass brings it back as a plain job."""
        nxt = replace(entry, released_at=time.time(), turn=RENDER_TURN + entry.turn)
        if not self.state.hand_off(url, entry, nxt):
            return False
        data = Queue.prepare_data(RENDER_FUNC, at_front=True, **self._job_kwargs(url, nxt))
        with self.redis.pipeline() as pipe:
            pipe.delete(Job.key_for(data.job_id))
            self.render_queue.enqueue_many([data], pipeline=pipe)
            pipe.execute()
        return True

    def _job_kwargs(self, url: str, entry: InFlight) -> dict:
        """Job hygiene: tiny JSON-friendly args, a dashboard-readable description, a short
        result life (the crawl's records hold the outcome)."""
        short = url if len(url) <= 120 else url[:117] + "..."
        return {
            "args": (self.crawl, url, entry.depth),
            "job_id": entry.job_id(self.crawl, url),
            "description": f"{self.crawl} d{entry.depth} {short}",
            "result_ttl": self.cfg.job_ttl,
            "failure_ttl": self.cfg.failure_ttl,
            "timeout": self.cfg.job_timeout,
        }

    def maybe_reap(self) -> int:
        """Run a recovery pass unless one ran for this crawl in the last REAP_EVERY seconds."""
        return self.reap() if self.state.reap_due() else 0

    def reap(self) -> int:
        """Requeue URLs whose job was lost: its lease expired (worker killed), or it has no
        lease and no live RQ job LOST_AFTER seconds after its release (job failed, enqueue
        never happened). Uses RQ's own cleanup to turn abandoned jobs into failed ones
        first, and releases due deferred URLs, so that a URL still waiting is never taken
        for lost. Returns how many URLs were brought back or given up."""
        StartedJobRegistry(queue=self.queue).cleanup()
        if self.cfg.render:
            StartedJobRegistry(queue=self.render_queue).cleanup()
        # rq-dashboard lists the finished registry without cleaning it: expired jobs would
        # fill its first pages ("No jobs.") and their links answer HTTP 500.
        FinishedJobRegistry(queue=self.queue).cleanup()
        self.release_due()
        orphans, lost, unleased = self.state.recovery_candidates(LOST_AFTER)
        for url in orphans:  # leases left by jobs whose URL ended without them
            self.state.requeue(url, None, None)
        lost += self._jobless(unleased)
        for url, entry in lost:
            nxt = replace(entry, released_at=time.time(), attempt=entry.attempt + 1, turn=0)
            if entry.attempt >= self.cfg.retries:
                try:
                    self._give_up(url, entry)
                except TableUnavailable as exc:  # its record waits for the table: next pass
                    log.warning("crawl %s: %s not recorded lost yet: %s", self.crawl, url, exc)
            elif self.state.requeue(url, entry, nxt):
                # at the head of the queue: a dead worker's URL has waited a lease already,
                # and must not wait again behind a window of queued jobs
                self._enqueue([(url, nxt)], at_front=True)
        if self.cfg.shards:  # a drain or a level's end that a dead worker left undone
            levels.coordinate(self.peers)
        return len(lost)

    def _jobless(self, entries: Released) -> Released:
        """Those of the in-flight URLs whose RQ job is neither pending nor running."""
        with self.redis.pipeline(transaction=False) as pipe:
            for url, entry in entries:
                pipe.hget(Job.key_for(entry.job_id(self.crawl, url)), "status")
            found = pipe.execute()
        return [
            pair
            for pair, status in zip(entries, found, strict=True)
            if status is None or status.decode() not in _LIVE
        ]

    def _give_up(self, url: str, entry: InFlight) -> None:
        """Record `url` as lost after its last attempt, unless a worker took it meanwhile."""
        if not self.state.still_lost(url, entry):
            return
        message = f"job lost by its worker {entry.attempt + 1} times"
        if sitemaps.document(url):
            self.finish_sitemap(url, entry, sitemaps.Found.failed("lost", f"{url}: {message}"))
            return
        attempts = entry.attempt + 1
        lost = record(url, "lost", entry.depth, error=message, attempts=attempts, reason="lost")
        counts = {keys.FAILED: 1} | outcome_counts(host_of(url), {keys.FAILED: 1}, lost, None)
        self.finish(url, counts, lost, [], entry.depth + 1, priority=entry.priority)

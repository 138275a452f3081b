"""The frontier's RQ side: released URLs become RQ jobs, parked ones come back, lost ones
come back.

The crawl's state and its changes (admission, each host's queue and pace, exact depth, the
window, leases, parking) belong to rqcrawl.frontier.state; this module turns what a change
released into RQ jobs of the queue `crawl`, with tiny JSON-friendly arguments (crawl, url,
depth), so that a stock `rq worker crawl` serves any crawl. A URL is released when its host
may take a request, so a job rarely finds its host busy.

A host's next URL is due when its pace allows (a second after its last request ended, at
default settings): whichever comes first releases it: the end of a job (in its finish step),
a job starting on any worker, the release thread of `rqcrawl.workers.CrawlWorker` (woken for
the hosts its own jobs freed), or the crawl's waker job, which workers without that thread
(the card's stock `rq worker crawl`) queue when something is due later: no RQ scheduler is
needed. A retry, or a URL whose site's robots.txt is not ready, is parked in the state's
`later` (its next job shown in RQ's deferred registry) until its time, then waits for its
host like the others.

The recovery pass (every REAP_EVERY seconds) requeues a URL whose lease ran out (its worker
died) within seconds (rqcrawl.frontier.recovery).
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
from rq.registry import DeferredJobRegistry
from rq.serializers import DefaultSerializer, Serializer

from rqcrawl.config import CrawlConfig
from rqcrawl.defaults import (
    DRAIN_BATCH,
    DRAIN_ROUNDS,
    PUMP_BATCH,
    PUMP_EVERY,
    WAKER_SPAN,
    WAKER_YIELD,
)
from rqcrawl.fetch.robots import Robots, site_of
from rqcrawl.frontier import keys, levels, piggyback, requisites, shards, sitemaps
from rqcrawl.frontier.jobmeta import meta_for
from rqcrawl.frontier.messages import (
    RENDER_TURN,
    Claim,
    Ended,
    Ending,
    InFlight,
    Released,
    Slot,
)
from rqcrawl.frontier.outage import TableUnavailable
from rqcrawl.frontier.recovery import LOST_AFTER, Recovery
from rqcrawl.frontier.state import CrawlState, StaleCrawl
from rqcrawl.parse import rendering
from rqcrawl.parse.changes import Content, Prior, VisitEnd
from rqcrawl.untrusted import inert

if TYPE_CHECKING:
    from rqcrawl.frontier.tasks import TaskTable

JOB_FUNC = "rqcrawl.workers.jobs.crawl_url"
RENDER_FUNC = "rqcrawl.render.render_url"  # a page the browser renders (queue crawl-render)
SITEMAP_FUNC = "rqcrawl.workers.jobs.crawl_sitemap"  # a sitemap entry (frontier.sitemaps)
REQUISITE_FUNC = "rqcrawl.workers.jobs.crawl_requisite"  # a requisite (frontier.requisites)
log = logging.getLogger(__name__)
WAKER_FUNC = "rqcrawl.workers.jobs.await_deferred"
# Told when a host freed by this process, or a URL it parks, is due: the release thread of
# rqcrawl.workers.CrawlWorker, which sleeps up to its MAX_SLEEP between two looks at the
# crawls, and would release a URL due sooner than that up to MAX_SLEEP late.
_due_watchers: list[Callable[[float], None]] = []


def _crawl_func(url: str) -> str:
    """The job function of `url` on the crawl queue: a sitemap entry's reads its document,
    a requisite's archives it."""
    if sitemaps.document(url):
        return SITEMAP_FUNC
    return REQUISITE_FUNC if requisites.resource(url) else JOB_FUNC


def handed(serializer: Serializer | None) -> Serializer | None:
    """The serializer to hand RQ's Job, Queue and registry: RQ resolves any other than None
    with an isinstance check of a typing Protocol, 9 us on Python 3.11, six times a page;
    None stands for the default one and resolves at once."""
    return None if serializer is DefaultSerializer else serializer


class CompactJob(Job):
    """An RQ job whose first save leaves out the fields that are still empty (callbacks,
    start and end times, worker, group): 8 of 17, about 130 bytes of Redis per pending job.
    RQ reads a missing field as empty. Only the first save: a later one (a requeue, a failed
    job) must overwrite old values with empty ones."""

    _new = False

    @classmethod
    def create(cls, *args, **kwargs) -> CompactJob:
        kwargs["serializer"] = handed(kwargs.get("serializer"))
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


def watch_due(watcher: Callable[[float], None]) -> Callable[[], None]:
    """Call `watcher` with the time a host this process freed may go next, or a URL it
    parks comes due, from now on; returns what stops it."""
    _due_watchers.append(watcher)
    return lambda: _due_watchers.remove(watcher)


def _tell_due(at: float) -> None:
    """Tell the watchers (watch_due) that something is due at `at` (0: nothing)."""
    if at > 0:
        for watcher in _due_watchers:
            watcher(at)


class Frontier(Recovery, CrawlState):
    """One crawl's frontier, the one face of it for workers and operators' commands: its
    state in Redis (CrawlState and its concerns) and the RQ jobs of what a change of it
    releases. A state step named `X_step` only changes the state and returns what it
    released; the Frontier's `X` is that step with the jobs queued."""

    def __init__(self, redis: Redis, crawl: str, cfg: CrawlConfig):
        super().__init__(redis, crawl, cfg)
        self.queue = Queue(keys.QUEUE_NAME, connection=redis, job_class=CompactJob)
        self.render_queue = Queue(keys.RENDER_QUEUE, connection=redis, job_class=CompactJob)

    def seed(self, urls: list[str], priority: int = 0) -> int:
        """Admit `urls` at depth 0 and `priority`, with their sites' sitemaps unless the crawl
        reads none (rqcrawl.frontier.sitemaps: those robots.txt names, read when it is
        fetched; /sitemap.xml with `sitemap_probe`; `sitemap_urls`), and queue what is due;
        returns how many URLs were new to the crawl."""
        reading = self.cfg.sitemaps and self.cfg.max_depth >= 1
        sites = sorted({site_of(u) for u in urls})
        if reading and self.cfg.obey_robots:  # (marked before a job can fetch robots.txt)
            self.expect_robots_sitemaps(sites, priority)
        admitted, released = self.seed_step(urls, priority)
        if reading:
            named = [(site_of(d), sitemaps.entry(d)) for d in self.cfg.sitemap_urls]
            if self.cfg.sitemap_probe:
                named += [(site, sitemaps.entry(sitemaps.root(site))) for site in sites]
            cap = self.cfg.max_sitemaps_per_host
            released += self.hold_sitemaps(named, priority, cap)[1]
        self._enqueue(released)
        return admitted

    def sitemaps_named(self, site: str, robots: Robots) -> None:
        """Hold the sitemaps the robots.txt of seed site `site` names, once per crawl (the
        seed left a mark for them): read by the job that fetched robots.txt, they cost no
        request and no turn of the host's pace of their own."""
        priority = self.take_robots_sitemaps(site)
        if priority is None:
            return
        robots_url = site + "/robots.txt"
        found = sitemaps.named_in(robots_url, robots.sitemaps(), self.cfg)
        named = [(site_of(d), sitemaps.entry(d)) for d in found.sitemaps]
        cap = self.cfg.max_sitemaps_per_host
        self._enqueue(self.hold_sitemaps(named, priority, cap)[1])

    def resume(self) -> None:
        """Clear the crawl's halt and queue what is due."""
        self._enqueue(self.resume_step())

    def claim(self, url: str, rq_job_id: str, reply: list | None = None) -> Claim:
        """CrawlState.claim_step for the job (its entry is None unless the job is the URL's live
        attempt and turn); queues what the claim released. Raises StaleCrawl if the crawl
        is not this Frontier's. `reply`: the claim's reply, when the worker already sent it."""
        claim = self.claim_step(url, rq_job_id, reply)
        self._enqueue(claim.due)
        if claim.stale:
            raise StaleCrawl(self.crawl)
        return claim

    def free_slot(self, url: str, slot: Slot) -> None:
        """Free the slot of a job whose request ended (or that failed, or was cut short),
        and queue what that released."""
        next_at, released = self.free_slot_step(url, slot)
        self._enqueue(released)
        _tell_due(next_at)

    def finish(
        self, url: str, ending: Ending, priority: int = 0, content: Content | None = None
    ) -> None:
        """End `url` for good (CrawlState.finish_step) and queue what that released. With
        revisits, the visit is first written to the task table (`priority`: the URL's),
        which schedules the next one, and the record gets its visit number and change: a
        worker dying between the two leaves the URL in flight, fetched again, rather than
        ended with no next visit. A page whose body an earlier URL of the crawl had is
        recorded `duplicate_of` it, its links admitted as any page's.
        `content`: what a fetched visit saw of the page."""
        record = ending.record
        if self.cfg.revisit and record is not None:
            end = VisitEnd(record["outcome"], record["status"], content)
            visited = self.table.visited(self.crawl, url, record["depth"], end, self.cfg, priority)
            record["visit"], record["change"] = visited.visit, visited.change
            if visited.similarity is not None:
                record["similarity"] = visited.similarity
            if visited.duplicate_of:
                record["duplicate_of"] = visited.duplicate_of
        ended = self.finish_step(url, ending)
        if ended.duplicate_of and record is not None:  # found by the finish step (Ending)
            record["duplicate_of"] = ended.duplicate_of
        self._ended(ended)

    def child_priority(self, priority: int, via: str = "") -> int:
        """The priority of the links of a URL of `priority`: inherited, or the same for a
        redirect's target (`via`)."""
        return priority if via else self.inherited(priority)

    def _ended(self, ended: Ended) -> None:
        """Queue what ending a URL released, and what it calls for: a drain of the links
        it sent to the outbox, the level's coordination over shards, the records left to
        settle, a recovery pass; and tell the release thread when the host it freed may go
        next."""
        self._enqueue(ended.released, last=True)
        _tell_due(ended.next_at)
        if ended.sent:
            self.drain()
        if ended.level_up and self.shards is not None:
            levels.coordinate(self.peers)
        if ended.settling:
            self.release_due()
        if ended.reap_due:
            self.reap()

    def finish_sitemap(
        self, url: str, entry: InFlight, found: sitemaps.Found, slot: Slot | None = None
    ) -> None:
        """End the sitemap entry `url` for good: admit its pages at depth 1 (at most
        `max_sitemap_urls` admitted per site, grouped by priority), hold the sitemaps it
        names (at most `max_sitemaps_per_host` per site), then end it, and queue what that
        released. With revisits, known pages whose <lastmod> is after their last visit are
        due at once, and the document's own visit goes to the task table first (as a page's:
        read again on its schedule). A worker dying in between leaves the entry in flight:
        read again, what it admitted or held already is not again."""
        site, counts = site_of(sitemaps.target(url)), Counter(found.counts)
        pages = found.pages
        taken = self.take_sitemap_urls(site, len(pages), self.cfg.max_sitemap_urls)
        if taken < len(pages):
            counts[keys.links_dropped("max_sitemap_urls")] += len(pages) - taken
        by_priority: dict[int, list[tuple[str | None, str]]] = {}
        base = self.inherited(entry.priority)
        for listed_page in pages[:taken]:
            group = by_priority.setdefault(base + listed_page.offset, [])
            group.append((listed_page.verdict, listed_page.url))
        released: Released = []
        sent, admitted = False, 0
        for priority, children in sorted(by_priority.items(), reverse=True):
            listed = self.admit_listed(children, 1, priority, "sitemap")
            released += listed.released
            sent, admitted = sent or bool(listed.sent), admitted + listed.admitted
        # (read again after a worker died, its known pages are lowered to depth 1 if deeper)
        self.return_sitemap_urls(site, taken - admitted)
        cap = self.cfg.max_sitemaps_per_host  # no more can be held: a site's cap
        named = [(site_of(d), sitemaps.entry(d)) for d in found.sitemaps[:cap]]
        capped, more = self.hold_sitemaps(named, entry.priority, cap)
        capped += max(0, len(found.sitemaps) - cap)
        if capped:
            counts[keys.sitemap_problem("not_held")] += capped
        released += more
        self._enqueue(released)
        if sent:
            self.drain()
        if self.cfg.revisit:
            self._revisit_sitemap(url, entry, found, counts)
        self._ended(self.finish_step(url, Ending(dict(counts), None, [], 1, slot=slot)))

    def hold_requisites(self, entries: list[str], depth: int, priority: int) -> int:
        """Hold the requisite entries of a page (or a stylesheet) of `depth`, each once per
        crawl (CrawlState.hold_requisites_step), and queue what that released; returns how many
        another shard's hosts left out."""
        released = self.hold_requisites_step(entries, depth, priority)
        self._enqueue(released)
        return len([e for e in entries if self.shard_of(e) != self.index])

    def finish_requisite(
        self, url: str, entry: InFlight, counts: dict[str, int], slot: Slot | None = None
    ) -> None:
        """End the requisite entry `url` for good: its counters, no record, no links."""
        self._ended(self.finish_step(url, Ending(dict(counts), None, [], entry.depth, slot=slot)))

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
        end = VisitEnd(outcome, found.status, content)
        self.table.visited(self.crawl, url, 0, end, self.cfg.for_sitemaps(), entry.priority)

    @cached_property
    def peers(self) -> list[Frontier]:
        """The frontier of every shard of the crawl, in shard order (this one among them;
        alone for a crawl on one Redis)."""
        if not self.cfg.shards:
            return [self]
        own = self.index
        return [
            self if i == own else Frontier(shards.connect(url), self.crawl, self.cfg)
            for i, url in enumerate(self.cfg.shards)
        ]

    def drain(self) -> int:
        """Admit the links waiting in this shard's outbox on their own shards (links to
        other shards' hosts, and links sent again one deeper when their page was found
        shorter) and queue what that releases there, then drop them from the outbox: a
        drain that dies in between leaves them to the next one, whose admissions are no-ops
        of the Bloom filter. Links pushed while this drain holds the outbox (whose own drain
        found it taken) are read by this one before it ends, within DRAIN_ROUNDS rounds:
        past them, pages still ending meanwhile drain what they push. Returns how many links
        were moved (0 also when another drain holds the outbox)."""
        moved = 0
        for _ in range(DRAIN_ROUNDS):
            token = uuid.uuid4().hex
            links = self.read_outbox(token, DRAIN_BATCH)
            if links is None:
                return moved
            by_shard: dict[int, list] = {}
            for link in links:
                by_shard.setdefault(link.shard, []).append(link)
            for shard, group in by_shard.items():
                peer = self.peers[shard]
                admitted = peer.admit(group)
                peer._enqueue(admitted.released)
            if not all([self.peers[shard].replicated() for shard in by_shard]):
                self.trim_outbox(token, 0)  # kept: the next drain admits them again
                return moved
            left = self.trim_outbox(token, len(links))
            moved += len(links)
            if not left:  # (None: the lock ran out, and the drain that took it reads on)
                return moved
        return moved

    def advance(self, level: int) -> None:
        """Raise this shard's level to `level` (rqcrawl.frontier.levels), settle the records
        that made final and queue what is due."""
        settling, released = self.advance_step(level)
        self._enqueue(released)
        if settling:
            self.release_due()

    def prior(self, url: str) -> Prior | None:
        """What the last visit of `url` left for a conditional GET, in a crawl with
        revisits (one primary-key SELECT), else None."""
        return self.table.prior(self.crawl, url) if self.cfg.revisit else None

    def retry_later(
        self, url: str, entry: InFlight, delay: float, slot: Slot, why: str = ""
    ) -> bool:
        """Park the next attempt of `url` until `delay` seconds from now, at that exact time
        (not on RQ's scheduler's whole seconds), then it waits for its host like the others;
        False if the job was stale. `slot`: how its request ended. `why` is kept for
        `rqcrawl inspect` until the attempt is due."""
        nxt = replace(entry, released_at=time.time() + delay, attempt=entry.attempt + 1, turn=0)
        if not self._park(url, entry, nxt, slot, keys.RETRIES):
            return False
        if why:
            self.note_retry(url, why, delay)
        return True

    def defer(self, url: str, entry: InFlight, until: float, slot: Slot) -> bool:
        """Park `url` until `until` without using a worker (its site's robots.txt is not
        ready, or its host had no slot for a job that came late); False if the job was
        stale."""
        return self._park(url, entry, replace(entry, released_at=until, turn=entry.turn + 1), slot)

    def _park(
        self, url: str, entry: InFlight, nxt: InFlight, slot: Slot, counter: str = ""
    ) -> bool:
        parked = self.park(url, entry, nxt, slot, counter)
        if parked is None:
            return False
        if nxt.released_at > time.time():
            self._show_parked(url, nxt, "retry" if counter else "deferred")
            _tell_due(nxt.released_at)
        self._enqueue(parked.released)
        _tell_due(parked.next_at)
        return True

    def _show_parked(self, url: str, nxt: InFlight, why: str) -> None:
        """Make the parked URL's next job now, `deferred` in RQ's registry of the queue
        `crawl`, where rq-dashboard lists it (its Deferred count) with when and why it waits;
        the release (_enqueue) queues the same job id. It expires if the URL ends otherwise
        (a cancel)."""
        kwargs = self._job_kwargs(url, nxt)
        at = datetime.fromtimestamp(nxt.released_at, UTC).strftime("%H:%M:%S")
        kwargs["description"] += inert(f" ({why}: waits until {at} UTC)")
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
        `rq worker crawl`, no scheduler) calls it when something of the crawl is due later
        (a host's next turn, a parked URL): it is then released on time even when no other
        job would start."""
        if not self.hold_waker():
            return
        self.queue.enqueue_call(
            WAKER_FUNC,
            args=(self.crawl,),
            job_id=f"rqcrawl-{self.crawl}-wake-{time.time_ns()}",
            description=f"{self.crawl} wake deferred URLs (for workers without a release thread)",
            result_ttl=0,
            failure_ttl=self.cfg.failure_ttl,
            timeout=self.cfg.job_timeout,
            meta=meta_for(WAKER_FUNC),
        )

    def await_deferred(self) -> int:
        """The waker job's work: for WAKER_SPAN seconds at most, queue what comes due as it
        does, while jobs of the crawl are in flight or something is due later, and until
        released jobs wait in the queue for WAKER_YIELD (every worker is busy: their starts
        release due URLs too, and this worker is needed for them); then queue the next waker
        while something is still due later. Returns how many URLs it queued."""
        released, end = 0, time.time() + WAKER_SPAN
        waiting_since = None
        while time.time() < end:
            nxt = self.next_due()
            if nxt is None and not self.unfinished():
                break
            if self.queue.count:
                waiting_since = waiting_since or time.monotonic()
                if time.monotonic() - waiting_since >= WAKER_YIELD:
                    break
            else:
                waiting_since = None
            pause = 0.1 if nxt is None else nxt - time.time()
            time.sleep(min(max(0.0, pause), end - time.time(), 0.1 if self.queue.count else 1.0))
            released += self.release_due()
        self.drop_waker()
        if self.next_due() is not None:
            self.ensure_waker()
        return released

    def release_due(self) -> int:
        """Queue what is due (hosts whose turn came, parked URLs whose time came), settling
        held-back records the level made final on the way; returns how many URLs were
        queued."""
        settling, due = self.take_due()
        self._enqueue(due)
        while settling:
            settling, more = self.take_due()
            self._enqueue(more)
            due += more
        return len(due)

    @cached_property
    def table(self) -> TaskTable:
        """The crawl's task table (crawls with revisits). Imported here: SQLAlchemy takes a
        fifth of a second to import, which a stock worker would pay for every job."""
        from rqcrawl.frontier.tasks import TaskTable

        return TaskTable(self.cfg.db)

    def maybe_pump(self, every: float = PUMP_EVERY) -> int:
        """Pump the due revisits of a crawl with revisits that is not cancelled, unless a pump
        ran for it in the last `every` seconds; returns how many URLs were readmitted."""
        if not self.cfg.revisit or self.cancelled() or not self.pump_due(every):
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
                added, released = frontier.readmit(rows)
                frontier._enqueue(released)
                readmitted += added
            full = any(f.unfinished() >= self.cfg.window for f in targets)
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
        if self.shards is None:
            return {self: due}
        placed: dict[Frontier, list] = {}
        for row in due:
            placed.setdefault(self.peers[self.shard_of(row[0])], []).append(row)
        return placed

    def _enqueue(self, entries: Released, at_front: bool = False, last: bool = False) -> None:
        """Create the RQ jobs of released URLs in one pipeline, the highest priority first
        (`at_front`: at the head of the queue, for a URL that already waited); `last`: the
        job's last write, which may ride on the worker's success (piggyback)."""
        if not entries:
            return
        by_queue: dict[Queue, list] = {}
        parked = []
        for u, e in sorted(entries, key=lambda pair: -pair[1].priority):  # hosts due together
            rendered = e.rendered or (self.cfg.render and self._rendered(u))
            queue, func = (
                (self.render_queue, RENDER_FUNC) if rendered else (self.queue, _crawl_func(u))
            )
            data = Queue.prepare_data(
                func, at_front=at_front, meta=meta_for(func), **self._job_kwargs(u, e)
            )
            by_queue.setdefault(queue, []).append(data)
            if e.attempt or e.turn:
                parked.append(data.job_id)

        # No MULTI/EXEC (two commands a page): one connection's commands run in order, so a
        # job's hash is there before its id is in a queue; one that never gets there is a
        # lost job, which recovery requeues like any other.
        def write(pipe: Pipeline) -> None:
            # A job id comes back when a paused URL is released again: its finished
            # predecessor's hash (and expiry) must not outlive into the new job.
            for queue, datas in by_queue.items():
                pipe.delete(*(Job.key_for(d.job_id) for d in datas))
                queue.enqueue_many(datas, pipeline=pipe)
            if parked:  # shown in the deferred registry while they waited (_show_parked)
                pipe.zrem(self.deferred_registry.key, *parked)

        piggyback.send(self.redis, write, last)

    def _rendered(self, url: str) -> bool:
        """Whether `url` goes straight to the render queue (a `render` pattern names it)."""
        return sitemaps.target(url) == url and rendering.matches(url, self.cfg.render)

    def hand_off(self, url: str, entry: InFlight, slot: Slot) -> bool:
        """Give `url`, claimed as `entry` by a plain job that found it needs the browser
        (render = "auto"), to a job on the render queue, as a browser's turn of the same
        attempt (messages.RENDER_TURN), released when its host may take the browser's request
        (its plain request ended as `slot` says); False if the job was stale."""
        nxt = replace(entry, released_at=time.time(), turn=RENDER_TURN + entry.turn)
        return self._park(url, entry, nxt, slot)

    def _job_kwargs(self, url: str, entry: InFlight) -> dict:
        """Job hygiene: tiny JSON-friendly args, a dashboard-readable description (inert:
        rq-dashboard shows it unescaped), a short result life (the crawl's records hold the
        outcome)."""
        short = url if len(url) <= 120 else url[:117] + "..."
        return {
            "args": (self.crawl, url, entry.depth),
            "job_id": entry.job_id(self.crawl, url),
            "description": inert(f"{self.crawl} d{entry.depth} {short}"),
            "result_ttl": self.cfg.job_ttl,
            "failure_ttl": self.cfg.failure_ttl,
            "timeout": self.cfg.job_timeout,
        }

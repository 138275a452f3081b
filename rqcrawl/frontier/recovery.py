"""The recovery pass (CrawlState's RQ concern beside rqcrawl.frontier.dispatch): a URL
whose lease ran out (its worker died) or whose job was lost is queued again, within seconds,
where RQ itself notices a dead worker's job only when its heartbeat expires; after its last
attempt it is recorded lost."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from rq.job import Job, JobStatus
from rq.registry import FinishedJobRegistry, StartedJobRegistry

from rqcrawl.defaults import RELEASE_GRACE
from rqcrawl.frontier import keys, levels, requisites, sitemaps
from rqcrawl.frontier.messages import Ending, InFlight, Released
from rqcrawl.frontier.outage import TableUnavailable
from rqcrawl.frontier.records import record
from rqcrawl.frontier.state import outcome_counts
from rqcrawl.parse.urls import host_of

# Seconds a released URL may go without a live RQ job before it is requeued: at least as
# long as its slot waits for its job (state.RELEASE_GRACE).
LOST_AFTER = RELEASE_GRACE
# A dead worker's URL is queued again LEASE to LEASE + REAP_EVERY seconds after its death.
_LIVE = {"queued", "started", "scheduled", "deferred"}
log = logging.getLogger(__name__)


class Recovery:
    """The recovery pass (Frontier's part)."""

    def maybe_reap(self) -> int:
        """Run a recovery pass unless one ran for this crawl in the last REAP_EVERY seconds."""
        return self.reap() if self.reap_due() else 0

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
        orphans, lost, unleased = self.recovery_candidates(LOST_AFTER)
        for url in orphans:  # leases left by jobs whose URL ended without them
            self.requeue(url, None, None)
        lost += self._jobless(unleased)
        for url, entry in lost:
            nxt = replace(entry, released_at=time.time(), attempt=entry.attempt + 1, turn=0)
            if entry.attempt >= self.cfg.retries:
                try:
                    self._give_up(url, entry)
                except TableUnavailable as exc:  # its record waits for the table: next pass
                    log.warning("crawl %s: %s not recorded lost yet: %s", self.crawl, url, exc)
                continue
            # at the head of its host's queue, and of RQ's once released: a dead worker's
            # URL has waited a lease already, and must not wait again behind other jobs
            released = self.requeue(url, entry, nxt)
            if released:
                self._enqueue(released, at_front=True)
        # a drain (or, over shards, a level's end) that a dead worker left undone
        if self.cfg.shards:
            levels.coordinate(self.peers)
        else:
            self.drain()
        return len(lost)

    def _jobless(self, entries: Released) -> Released:
        """Those of the in-flight URLs whose RQ job is neither pending nor running: gone,
        ended, or `queued` but in no queue (taken from it by a worker that died before the
        job started: it waits in that worker's intermediate list until RQ's own cleanup,
        minutes later)."""
        with self.redis.pipeline(transaction=False) as pipe:
            for url, entry in entries:
                job_id = entry.job_id(self.crawl, url)
                pipe.hget(Job.key_for(job_id), "status")
                queue = self.render_queue if entry.rendered else self.queue
                pipe.lpos(queue.key, job_id)
            found = pipe.execute()
        lost = []
        for pair, status, place in zip(entries, found[::2], found[1::2], strict=True):
            state = status.decode() if status is not None else None
            if state not in _LIVE or (state == JobStatus.QUEUED and place is None):
                lost.append(pair)
        return lost

    def _give_up(self, url: str, entry: InFlight) -> None:
        """Record `url` as lost after its last attempt, unless a worker took it meanwhile."""
        if not self.still_lost(url, entry):
            return
        message = f"job lost by its worker {entry.attempt + 1} times"
        if sitemaps.document(url):
            self.finish_sitemap(url, entry, sitemaps.Found.failed("lost", f"{url}: {message}"))
            return
        if requisites.resource(url):
            self.finish_requisite(url, entry, {keys.requisite_problem("lost"): 1})
            return
        attempts = entry.attempt + 1
        lost = record(url, "lost", entry.depth, error=message, attempts=attempts, reason="lost")
        counts = {keys.FAILED: 1} | outcome_counts(host_of(url), {keys.FAILED: 1}, lost, None)
        self.finish(url, Ending(counts, lost, [], entry.depth + 1), entry.priority)

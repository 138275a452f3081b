"""Short leases that the process running a job renews, so that only a dead worker's share of
the crawl is taken back, and within seconds: the job's URL (the frontier's `leased` set) and
its host's politeness slot (`leases:HOST`). A lease is a member of a Redis sorted set scored
by its expiry.

One daemon thread per process renews every lease the process holds, every RENEW_EVERY
seconds, in one pipelined round trip (one command per set) whatever the number of jobs. It
lives in the process that runs the job, so every kind of worker gets it: a `CrawlWorker` or
`SimpleWorker` (one thread for all its jobs), the threads of `rqcrawl.workers.threadworkers`, and
the work-horse a stock forking `rq worker` forks for each job (a thread of the horse, which dies
with it).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from redis import Redis
from redis.client import Pipeline

from rqcrawl.defaults import (
    CLAIM_NOTE_EVERY,
    DUE_BATCH,
    FORKED_TTL,
    LEASE,
    REAP_EVERY,
    RENEW_EVERY,
)
from rqcrawl.frontier import scripts
from rqcrawl.frontier.messages import (
    Claim,
    Ended,
    InFlight,
    Released,
    Slot,
    pairs,
)

log = logging.getLogger(__name__)


class Renewer:
    """The leases the jobs of this process hold, and the thread renewing them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[Redis, str], Counter[str]] = {}  # (redis, set) -> members
        self._pid = 0  # the process whose thread runs; a forked child starts its own

    @contextmanager
    def hold(self, redis: Redis, *leases: tuple[str, str]) -> Iterator[None]:
        """Keep the (sorted set, member) `leases` alive while the block runs; one that does
        not exist (not taken, or ended) is not created."""
        try:  # (RQ's job timeout may interrupt anywhere: no count must outlive the job)
            with self._lock:
                if self._pid != os.getpid():
                    self._held = {}
                    self._pid = os.getpid()
                    threading.Thread(target=self._run, name="rqcrawl-leases", daemon=True).start()
                for key, member in leases:
                    self._held.setdefault((redis, key), Counter())[member] += 1
            yield
        finally:
            with self._lock:
                for key, member in leases:
                    members = self._held.get((redis, key), Counter())
                    members[member] -= 1
                    if members[member] <= 0:
                        del members[member]
                    if not members:
                        self._held.pop((redis, key), None)

    def renew(self) -> None:
        """Extend every lease the process holds by LEASE seconds."""
        with self._lock:
            held = [(redis, key, list(members)) for (redis, key), members in self._held.items()]
        expiry = time.time() + LEASE
        for redis in {redis for redis, _, _ in held}:
            with redis.pipeline(transaction=False) as pipe:
                for _, key, members in (h for h in held if h[0] is redis):
                    pipe.zadd(key, dict.fromkeys(members, expiry), xx=True)
                pipe.execute()

    def _run(self) -> None:
        pid = os.getpid()
        while self._pid == pid:
            time.sleep(RENEW_EVERY)
            try:
                self.renew()
            except Exception as exc:  # Redis down for a moment: the next renewal may work
                log.warning("rqcrawl: could not renew leases: %s", exc)


renewer = Renewer()


class Leases:
    """A job's life in the frontier (CrawlState's part): its claim (the URL's lease and
    its key's slot), parking, putting back, and the recovery of lost URLs."""

    def claim_step(self, url: str, job_id: str, reply: list | None = None) -> Claim:
        """The URL's entry if the job `job_id` is its live attempt and turn (the job then
        takes the URL's lease, and its key's slot if it may make its request now), whether
        the crawl is paused, and the URLs released meanwhile (in the same call, so that busy
        workers keep parked URLs on time). `reply`: the claim's reply already got (the
        recommended worker sends claim_call with the job's start, in its round trip)."""
        if reply is None:
            reply = scripts.CLAIM(self.redis, **self.claim_call(url, job_id))
        raw, paused, identity, due, sitemapped, via, go, lowered, level = reply
        entry = InFlight.parse(raw) if raw is not None else None
        if entry is not None and entry.job_id(self.crawl, url) != job_id:
            entry = None
        if entry is not None and sitemapped:
            entry = replace(entry, source="sitemap")
        if entry is not None and via:
            entry = replace(entry, via=tuple(json.loads(via)))
        go = go.decode() if isinstance(go, bytes) else str(go)
        wait = float(go) if entry is not None and go not in ("0", "1") else None
        return Claim(
            entry, bool(paused), pairs(due), not self.same_crawl(identity), wait,
            int(lowered) if lowered is not None else None, int(level),
        )  # fmt: skip

    def claim_call(self, url: str, job_id: str) -> dict:
        """The keys and arguments by name of the claim of `url` by the job `job_id`
        (scripts.CLAIM). The claim's time is noted for `status` at most every
        CLAIM_NOTE_EVERY per process."""
        attempt, turn = job_id.rsplit("-", 2)[1:]
        k, now = self.keys, time.time()
        note = now - self.claim_noted_at >= CLAIM_NOTE_EVERY
        if note:
            self.claim_noted_at = now
        return dict(
            sitemapped=k.sitemapped, via=k.via, url=url, key=self.key_of(url), attempt=attempt,
            turn=turn, expiry=repr(now + LEASE), limit=DUE_BATCH, note=int(note),
            **self.frontier_names(),
        )  # fmt: skip

    def same_crawl(self, identity: bytes | None) -> bool:
        """Whether `identity` (the crawl's `started_at`, set once when it is first seeded)
        is this crawl's: a crawl purged and seeded again under the same name has another,
        and a worker must then drop what it kept of the old one (settings, known links).
        The first identity seen is this state's."""
        if self.identity is None:
            self.identity = identity
        return identity is None or identity == self.identity

    def park(
        self, url: str, entry: InFlight, nxt: InFlight, slot: Slot, counter: str = ""
    ) -> Ended | None:
        """Replace the job's `entry` by `nxt`, waiting in `later` until nxt.released_at (a
        deferral, or with counter keys.RETRIES a retry; a time come already: at the head of
        its key's queue), the job's `slot` freed; None if the job was stale, else what that
        released and when the key may go next."""
        ok, next_at, *released = scripts.PARK(
            self.redis, url=url, key=slot.key, expected=entry.encode(), entry=nxt.encode(),
            until_at=repr(nxt.released_at), counter=counter, slot=slot.encode(),
            **self.frontier_names(),
        )  # fmt: skip
        return Ended(0, pairs(released), next_at=float(next_at)) if ok else None

    def put_back(self, url: str, entry: InFlight) -> bool:
        """For a job whose claim saw the crawl paused: True if the crawl is halted, `url`
        then being given back to its key's queue unfetched (or dropped if cancelled)."""
        return bool(
            scripts.PUT_BACK(
                self.redis, url=url, key=self.key_of(url), expected=entry.encode(),
                **self.frontier_names(),
            )
        )  # fmt: skip

    def note_forked(self, pipe: Pipeline) -> None:
        """In the job's own pipeline: a forking worker ran a job of the crawl (see stats)."""
        pipe.set(self.keys.forked, 1, ex=FORKED_TTL)

    def recovery_candidates(self, lost_after: float) -> tuple[list[str], Released, Released]:
        """For the recovery pass: URLs whose lease expired though they ended (the lease is
        only to be dropped), in-flight URLs whose lease expired (their worker died), and
        in-flight URLs with no lease, not parked and not back in their key's queue, released
        over `lost_after` seconds ago (their job may have failed or never been enqueued)."""
        k = self.keys
        now = time.time()
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(k.inflight)
            pipe.zrange(k.leased, 0, -1, withscores=True)
            pipe.zrange(k.later, 0, -1)
            inflight, leases, waiting = pipe.execute()
        leases = {url.decode(): expiry for url, expiry in leases}
        waiting = {url.decode() for url in waiting}
        entries = {url.decode(): InFlight.parse(raw) for url, raw in inflight.items()}
        expired = {url for url, expiry in leases.items() if expiry < now}
        orphans = sorted(expired - entries.keys())
        lost = [(url, e) for url, e in entries.items() if url in expired]
        unleased = [
            (url, e) for url, e in entries.items()
            if url not in leases and url not in waiting and e.released_at < now - lost_after
        ]  # fmt: skip
        return orphans, lost, self._not_queued(unleased)

    def _not_queued(self, entries: Released) -> Released:
        """Those of the in-flight `entries` that are not back in their key's queue (a
        parked URL whose time came waits there for its key)."""
        if not entries:
            return []
        with self.redis.pipeline(transaction=False) as pipe:
            for url, _ in entries:
                pipe.zscore(self.keys.qprefix + self.key_of(url), url)
            queued = pipe.execute()
        return [pair for pair, score in zip(entries, queued, strict=True) if score is None]

    def requeue(self, url: str, entry: InFlight | None, nxt: InFlight | None) -> Released | None:
        """Replace `url`'s in-flight `entry` by `nxt`, back at the head of its key's queue,
        unless the URL ended, was requeued or had its lease renewed meanwhile (then None);
        an expired lease is dropped either way (None, None: only that). Returns what was
        released."""
        ok, *released = scripts.REQUEUE(
            self.redis, url=url, key=self.key_of(url), expected=entry.encode() if entry else "",
            entry=nxt.encode() if nxt else "", **self.frontier_names(),
        )  # fmt: skip
        return pairs(released) if ok else None

    def still_lost(self, url: str, entry: InFlight) -> bool:
        """Whether `url` is still in flight as `entry` with no live lease (before giving it
        up: nobody took it meanwhile)."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(self.keys.inflight, url)
            pipe.zscore(self.keys.leased, url)
            current, lease = pipe.execute()
        same = current is not None and InFlight.parse(current) == entry
        return same and (lease is None or lease < time.time())

    def reap_due(self) -> bool:
        """Take the recovery pass's turn unless one ran in the last REAP_EVERY seconds (the
        lock the finish step also takes for workers)."""
        return bool(self.redis.set(self.keys.reap_lock, 1, nx=True, ex=REAP_EVERY))

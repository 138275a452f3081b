"""Delivery of a crawl's records: the Redis consumer group through which followers
(rqcrawl.ops.follow) take the records stream's entries, each entry to one follower.

An entry read is pending in the group until its follower acknowledges it, once it is on
disk. A follower is named after its output, so that one restarted on the same output reads
its own pending entries first; those of a follower that never came back are claimed by any
other (XAUTOCLAIM) after `reclaim_after` seconds idle. Before writing a batch a follower
marks where in which file it starts (`mark`), and the mark goes with the batch's
acknowledgment: restarted with entries still pending and a mark, it cuts the file back there
(a batch written but not acknowledged is written again, never twice); with entries pending
and no mark, they were read and never written (killed in between), and nothing is cut.
Acknowledged entries are trimmed from the stream (scripts.ACK_RECORDS), so that Redis holds
only what is not yet delivered.

Two followers on one output would share one name, and the second would cut the first's file
back: a running follower holds a lock of its name (`hold`), renewed as it goes; a second is
refused, unless the holder was a process of this machine that is gone (killed outright: its
lock would otherwise block a restart for LOCK_TTL seconds).

Each follower's count of records delivered is kept (`delivered_to`), so that an export or
a listing that misses them says how many went where.
"""

from __future__ import annotations

import json
import os
import uuid

from redis import Redis
from redis.exceptions import ResponseError
from redis.lock import Lock

from rqcrawl.frontier import keys, scripts
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.frontier.records import from_entry
from rqcrawl.processes import alive

GROUP = "export"  # the followers' group: every follower of a crawl shares it
LOCK_TTL = 10  # seconds a follower's lock outlives its last renewal


class OutputTaken(Exception):
    """Another follower runs on this output (one line for the user)."""


def hold(redis: Redis, crawl: str, consumer: str) -> Lock:
    """The lock of follower `consumer` (renew it with `reacquire()` within LOCK_TTL, free it
    with `release()`), taken over from a dead process of this machine; OutputTaken if a live
    follower holds it."""
    lock = redis.lock(CrawlKeys(crawl).fprefix + consumer, timeout=LOCK_TTL, thread_local=False)
    host = os.uname().nodename
    token = f"{host}:{os.getpid()}:{uuid.uuid4().hex}"
    if lock.acquire(blocking=False, token=token):
        return lock
    holder = (redis.get(lock.name) or b"").decode()
    their_host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if their_host == host and pid.isdigit() and not alive(int(pid)):
        redis.delete(lock.name)  # (a race with another restart: one of the two acquires)
        if lock.acquire(blocking=False, token=token):
            return lock
    raise OutputTaken(
        f"another follower (process {holder.rsplit(':', 1)[0] or '?'}) writes to this output: "
        "stop it, or follow into another file or directory"
    )


def delivered(redis: Redis, crawl: str) -> bool:
    """Whether followers took records of the crawl's stream on this Redis (records taken are
    trimmed once acknowledged: what remains is not the whole crawl)."""
    try:
        groups = redis.xinfo_groups(CrawlKeys(crawl).items)
    except ResponseError:  # no stream: nothing was recorded here
        return False
    for group in groups:
        name, last = group["name"], group["last-delivered-id"]
        name, last = (v.decode() if isinstance(v, bytes) else v for v in (name, last))
        if name == GROUP and last != "0-0":
            return True
    return False


def delivered_to(redis: Redis, crawl: str) -> dict[str, int]:
    """The records each follower (by name: its machine and output) delivered on this Redis."""
    found = redis.hgetall(CrawlKeys(crawl).delivered)
    return {name.decode(): int(n) for name, n in found.items()}


class Delivery:
    """One consumer `consumer` of a crawl's records on one Redis (a shard's stream)."""

    def __init__(
        self, redis: Redis, crawl: str, consumer: str, reclaim_after: float = 30.0
    ) -> None:
        self.redis, self.consumer = redis, consumer
        crawl_keys = CrawlKeys(crawl)
        self.stream, self.followers = crawl_keys.items, crawl_keys.followers
        self.delivered, self.counters = crawl_keys.delivered, crawl_keys.counters
        self.record_size = 0  # bytes of the largest record of the last read
        self.backlog = True  # this consumer's own pending entries are read first
        self.reclaim_ms = int(reclaim_after * 1000)
        self._claim_from = "0-0"
        try:  # from the first entry: records written before any follower are delivered too
            redis.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def take(self, count: int, block_ms: int = 0, max_bytes: int = 0) -> list[tuple[str, dict]]:
        """Up to `count` records as (entry id, record): first those of dead followers (idle
        pending entries), then new ones, waiting up to `block_ms` for some (0: no wait). With
        `max_bytes`, fewer when records are big (a read counts entries, not bytes): see
        `fitting`."""
        if max_bytes:
            count = self.fitting(count, max_bytes)
        taken = self._own(count) if self.backlog else []
        taken = taken or self._reclaimed(count)
        if not taken:
            reply = self.redis.xreadgroup(
                GROUP, self.consumer, {self.stream: ">"}, count=count, block=block_ms or None
            )
            taken = reply[0][1] if reply else []
        if sizes := [len(data[b"r"]) for _, data in taken if data]:
            self.record_size = max(sizes)
        return [(eid.decode(), from_entry(data)) for eid, data in taken if data]

    def fitting(self, count: int, max_bytes: int) -> int:
        """How many records of the stream about `max_bytes` hold, at most `count`, at least
        one: at the size of the largest record of the last read or the stream's mean size
        (emit's `record_bytes` less `trimmed_bytes`, over its length), the larger."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.xlen(self.stream)
            pipe.hmget(self.counters, keys.RECORD_BYTES, keys.TRIMMED_BYTES)
            length, (appended, trimmed) = pipe.execute()
        mean = (int(appended or 0) - int(trimmed or 0)) // max(length, 1)
        return max(1, min(count, max_bytes // max(self.record_size, mean, 1)))

    def _own(self, count: int) -> list:
        """This consumer's pending entries, left by its last run (none: the backlog is done)."""
        reply = self.redis.xreadgroup(GROUP, self.consumer, {self.stream: "0"}, count=count)
        entries = reply[0][1] if reply else []
        self.backlog = bool(entries)
        return entries

    def pending(self) -> bool:
        """Whether this consumer has entries read and not acknowledged (by an earlier run)."""
        return bool(self.redis.xpending_range(self.stream, GROUP, "-", "+", 1, self.consumer))

    def mark(self, path: str, offset: int) -> None:
        """The next batch is written from `offset` of the file `path`."""
        self.redis.hset(self.followers, self.consumer, json.dumps([path, offset]))

    def marked(self) -> tuple[str, int] | None:
        """Where this consumer's last unacknowledged batch started, if it has one."""
        raw = self.redis.hget(self.followers, self.consumer)
        return tuple(json.loads(raw)) if raw and self.pending() else None

    def _reclaimed(self, count: int) -> list:
        """Entries pending for over `reclaim_after` in any consumer, now this one's (entries
        trimmed meanwhile come back empty and are acknowledged away)."""
        reply = self.redis.xautoclaim(
            self.stream, GROUP, self.consumer, self.reclaim_ms, self._claim_from, count=count
        )
        start, claimed, deleted = reply[0], reply[1], reply[2] if len(reply) > 2 else []
        self._claim_from = start.decode() if isinstance(start, bytes) else start
        if deleted:
            self.acknowledge([d.decode() for d in deleted])
        return claimed

    def acknowledge(self, ids: list[str]) -> int:
        """The records of `ids` are on disk: acknowledged and trimmed, and this consumer's
        mark dropped with them; returns the stream's length left."""
        return scripts.ACK_RECORDS(
            self.redis, tail_args=ids, items=self.stream, followers=self.followers,
            delivered_to=self.delivered, counters=self.counters, group=GROUP,
            consumer=self.consumer,
        )  # fmt: skip

"""Exact depth and exact finish for a crawl over several shards, with no Redis on every
page's path.

Each shard releases only URLs of its own `level`, as a crawl on one Redis does, but a shard
with nothing left in flight cannot raise its level by itself: another shard may still send
it links of that level. So its finish step only reports "nothing in flight here", and the
worker runs `coordinate`: it drains every shard's outbox (links to other shards' hosts), then
reads every shard twice (level, in flight, held, outbox, a version that changes with every
admission). Two equal reads in which every outbox is empty and every shard at the lowest
level L has nothing in flight mean that no link of depth <= L can appear anywhere again:
every page of depth < L has ended and its links were admitted on their shards. Each shard
at L then moves to L + 1 (scripts.ADVANCE, conditional, so that two coordinators racing do
it once) and releases that level. The same double read decides `finished` for `status`.
Behind Sentinel or with replicas, a shard's state counts only once a replica has it: a
failover that lost an ended page would bring the page back at level L while other shards
had moved on, and its links would get depths one too deep.

The worker whose shard went idle, the recovery pass and `status` all run it, so a worker
killed between two steps leaves nothing stranded: the outbox stays until drained, and a
level ends at the next recovery pass at the latest.
"""

from __future__ import annotations

import time
from typing import Protocol

from rqcrawl.frontier.state import CrawlState, LevelView


class Shard(Protocol):
    """What the coordinator needs of one shard's frontier (rqcrawl.frontier.dispatch.Frontier)."""

    state: CrawlState

    def drain(self) -> int: ...

    def advance(self, level: int) -> None: ...


SETTLE_TRIES = 20  # double reads that may differ (other workers moving) before giving up
SETTLE_PAUSE = 0.02  # seconds between two of them


def views(states: list[CrawlState]) -> list[LevelView]:
    return [s.level_view() for s in states]


def settled(states: list[CrawlState]) -> bool:
    """Whether the crawl is over on every shard: nothing held, in flight or in an outbox,
    in two reads that agree."""
    first = views(states)
    return not any(v.held or v.in_flight or v.outbox for v in first) and first == views(states)


def coordinate(shards: list[Shard]) -> int:
    """Drain every outbox and raise the level of the shards at the lowest level while the
    whole crawl has ended it (see the module docstring); returns how many levels were
    raised. Gives up when the lowest level still has URLs in flight (their end runs this
    again), when the crawl is halted or has nothing held, or when other workers keep the
    reads moving for SETTLE_TRIES reads (the recovery pass comes back to it)."""
    states = [f.state for f in shards]
    raised = tries = 0
    while tries < SETTLE_TRIES:
        for f in shards:
            f.drain()
        seen = views(states)
        low = min(v.level for v in seen)
        if any(v.halted for v in seen) or any(v.in_flight for v in seen if v.level == low):
            return raised
        if seen != views(states) or any(v.outbox for v in seen):
            tries += 1
            time.sleep(SETTLE_PAUSE)
            continue
        if not any(v.held for v in seen):
            return raised
        if not all(f.state.replicated() for f in shards):
            return raised  # what was read could be undone by a failover: retried later
        for f, v in zip(shards, seen, strict=True):
            if v.level == low:
                f.advance(low)
        raised += 1
    return raised

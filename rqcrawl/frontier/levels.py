"""Exact depth over several shards: the settled level is the whole crawl's, with no Redis
on every page's path.

Each shard knows the least depth of its URLs not yet ended (its `pending` depths, its
outbox's links included), but not the others': a link of a shallow page can still come to it
from another shard. So a shard never raises its level by itself. Its finish step reports when
its own URLs are all past the level, and the worker runs `coordinate`: it drains every
shard's outbox, then reads every shard twice (level, least pending depth, in flight, waiting,
outbox, held-back records, and a version that changes with every admission). Two equal reads
mean nothing moved in between, and the least pending depth over every shard is then the
crawl's settled level L: every page of depth < L has ended and its links were admitted on
their shards (a link in flight between shards is pending on the shard that sent it until
the receiving one admitted it). Each shard is raised to L (scripts.ADVANCE, which never
lowers it, so two coordinators racing do no harm), emits the held-back records L made final
and releases the URLs that waited for it. The same double read decides `finished` for
`status`. Behind Sentinel or with replicas, a shard's state counts only once a replica has
it: a failover that lost an ended page would bring the page back below a level already
passed, and its links would get depths one too deep.

The worker whose shard's URLs passed the level, the recovery pass and `status` all run it, so
a worker killed between two steps leaves nothing stranded: the outbox stays until drained,
and a level rises at the next recovery pass at the latest.
"""

from __future__ import annotations

import time
from typing import Protocol

from rqcrawl.config import CrawlConfig
from rqcrawl.defaults import SETTLE_PAUSE, SETTLE_TRIES
from rqcrawl.frontier.admission import LevelView


class Shard(Protocol):
    """What the coordinator needs of one shard's frontier (rqcrawl.frontier.dispatch.Frontier)."""

    cfg: CrawlConfig

    def level_view(self) -> LevelView: ...

    def replicated(self) -> bool: ...

    def drain(self) -> int: ...

    def advance(self, level: int) -> None: ...


def views(shards: list[Shard]) -> list[LevelView]:
    return [s.level_view() for s in shards]


def settled(shards: list[Shard]) -> bool:
    """Whether the crawl is over on every shard: nothing waiting, in flight, in an outbox
    or held back, in two reads that agree."""
    first = views(shards)
    busy = any(v.held or v.in_flight or v.outbox or v.held_back for v in first)
    return not busy and first == views(shards)


def coordinate(shards: list[Shard]) -> int:
    """Drain every outbox and raise every shard to the crawl's settled level once two reads
    agree (see the module docstring); returns how many shards were raised. Gives up when
    other workers keep the reads moving for SETTLE_TRIES reads (their ends run this again,
    and the recovery pass comes back to it)."""
    for _ in range(SETTLE_TRIES):
        for f in shards:
            f.drain()
        seen = views(shards)
        if seen != views(shards):
            time.sleep(SETTLE_PAUSE)
            continue
        lowest = [v.lowest for v in seen if v.lowest is not None]
        level = min(lowest) if lowest else shards[0].cfg.max_depth + 1
        behind = [(f, v) for f, v in zip(shards, seen, strict=True) if v.level < level]
        if not behind or not all(f.replicated() for f in shards):
            return 0  # (what was read could be undone by a failover: retried later)
        for f, _ in behind:
            f.advance(level)
        return len(behind)
    return 0

"""Per-host politeness shared by every worker on every machine: one Lua gate per request.

For each host (host:port) Redis keeps when its next request may start (`ready`), the last
time slot promised to a deferred job (`booked`) and the spacing of slots, in one hash field
of the crawl, plus a sorted
set of the leases of requests in progress (short, renewed by the process running the job:
a killed worker's lease frees itself within seconds).
A request may start when `ready` has passed and fewer than `host_concurrency` leases are live;
it then sets `ready` to now + delay, and its end pushes `ready` to at least end + delay (as
Heritrix does): the server then sees at least `delay` between two requests whatever the
scheduling jitter between the gate and the socket. Otherwise the gate books the next free
slot, spaced by the delay after the slots already booked, and the job parks its URL until
then instead of sleeping, so the worker goes on with other hosts. A job arriving fresh waits
behind booked ones, so deferred URLs are not starved by newcomers.

The pace listens to the host (docs/howto/politeness.md): slots are spaced by the delay and
the host's smoothed fetch time, bounded, so one slow response cannot stretch the schedule;
429/503 and Retry-After raise the host's delay (bounded exponential back-off) and successes
bring it back down (`adaptive_throttle`); `delay_factor` adds a delay proportional to the
smoothed fetch time (scripts._HOST_STATE).

With `politeness_by = "ip"` the gate's key is the host's address ("ip:ADDR", resolved by the
guard's resolver and kept IP_TTL seconds), so hosts sharing an address share one gate. In a
crawl over several shards, hosts of one address may live on different shards: the gate of an
address lives on its home shard (rendezvous hashing of the key over the shards, as hosts
are placed), one extra round trip to that shard per gate call when it is another.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from redis import Redis

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.guard import resolve
from rqcrawl.frontier import scripts
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.frontier.leases import LEASE

# Takes a script run (the script, its keys and arguments by name) to send later.
Later = Callable[[scripts.Script, dict], None]
IP_TTL = 60.0  # seconds a host's address is kept for its gate key (politeness_by = "ip")
PUSHBACK = (429, 503)  # answers that raise a host's delay (and any with Retry-After)


@dataclass(frozen=True)
class Pace:
    """A gate's pace as `rqcrawl hosts` and `status` show it: the delay in force between
    two requests and why (`setting`, `crawl-delay`, `backoff`, `delay_factor`), the extra
    delay of the back-off, the smoothed fetch time, and when the next request may start."""

    delay: float
    why: str
    backoff: float
    fetch_s: float
    ready: float


class Politeness:
    """The per-host (or per-IP) gate of one crawl. `home(key)`: the Redis holding the gate
    of `key` (this one but for per-IP gates of a crawl over several shards)."""

    def __init__(
        self,
        redis: Redis,
        crawl_keys: CrawlKeys,
        cfg: CrawlConfig,
        home: Callable[[str], Redis] | None = None,
    ):
        self.redis = redis
        self.keys = crawl_keys
        self.cfg = cfg
        self.home = home or (lambda key: redis)
        self._ips: dict[str, tuple[float, str]] = {}  # host -> (until, gate key)

    def gate(self, host: str) -> str:
        """The gate key of `host`: itself, or "ip:ADDR" of its first address with
        politeness_by = "ip" (itself when it does not resolve: its fetch fails anyway)."""
        if self.cfg.politeness_by != "ip":
            return host
        now = time.monotonic()
        until, key = self._ips.get(host, (0.0, host))
        if until > now:
            return key
        parts = urlsplit("//" + host)
        try:
            key = "ip:" + resolve(parts.hostname or host, parts.port or 80)[0][1][0]
        except (OSError, IndexError, ValueError):  # gaierror is an OSError
            key = host
        if len(self._ips) > 10_000:
            self._ips.clear()
        self._ips[host] = (now + IP_TTL, key)
        return key

    def acquire(self, host: str, lease: str, delay: float, booked: bool) -> float | None:
        """None when a request to `host` may start now (the lease is taken), else the time
        booked for this job to try again. `booked`: the job already waited for a slot."""
        now = time.time()
        expiry = now + LEASE  # renewed while the job runs: a dead worker's slot frees soon
        key = self.gate(host)
        answer = scripts.HOST_GATE(
            self.home(key), hosts=self.keys.hosts, leases=self.keys.host_leases(key), host=key,
            now=repr(now), delay=delay, concurrency=self.cfg.host_concurrency, lease=lease,
            expiry=repr(expiry), booked=int(booked), factor=repr(self.cfg.delay_factor),
            cap=repr(self.cfg.max_backoff_delay),
        )  # fmt: skip
        slot = float(answer)
        return None if slot == 0 else slot

    def release(
        self,
        host: str,
        lease: str,
        delay: float,
        started: float,
        status: int | None = None,
        retry_after: float | None = None,
        requested: bool = True,
        later: Later | None = None,
    ) -> None:
        """End a request begun at `started`: free its lease; the host's next request waits
        the delay in force from now (`delay` its base). The answer's `status` and
        `retry_after` feed the adaptive throttle; `requested` False: no request was made
        (its duration teaches nothing). `later`, when the gate lives on the crawl's own
        Redis, is given the script run to send with the caller's next round trip there
        (the job's success, worker.CrawlJob.on_success) instead of a round trip of its own:
        the end time is in it, so the pace is the same."""
        now = time.time()
        key = self.gate(host)
        named = dict(
            hosts=self.keys.hosts, leases=self.keys.host_leases(key), host=key, lease=lease,
            now=repr(now), delay=delay,
            duration=repr(max(0.0, now - started)) if requested else "-1",
            answer=_answer(status, retry_after), retry_after=repr(retry_after or 0.0),
            adaptive=int(self.cfg.adaptive_throttle), factor=repr(self.cfg.delay_factor),
            cap=repr(self.cfg.max_backoff_delay),
        )  # fmt: skip
        home = self.home(key)
        if later is not None and home is self.redis:
            later(scripts.HOST_RELEASE, named)
        else:
            scripts.HOST_RELEASE(home, **named)

    def lease(self, host: str, lease: str) -> tuple[Redis, tuple[str, str]]:
        """Where the lease `lease` of a request to `host` lives: its Redis, (set, member)."""
        key = self.gate(host)
        return self.home(key), (self.keys.host_leases(key), lease)

    def paces(self) -> dict[str, Pace]:
        """Every gate of this Redis (hosts, or "ip:ADDR"), with its delay in force and why:
        for `rqcrawl hosts` and `status`."""
        return {
            key.decode(): pace_of([float(x) for x in raw.split()], self.cfg)
            for key, raw in self.redis.hgetall(self.keys.hosts).items()
        }

    def delay_for(self, crawl_delay: float | None) -> float:
        """The delay between two requests to a host: ours, or its Crawl-delay (capped)."""
        return max(self.cfg.delay, min(crawl_delay or 0.0, self.cfg.max_crawl_delay))


def pace_of(state: Sequence[float], cfg: CrawlConfig) -> Pace:
    """A gate's Pace from its state (scripts._HOST_STATE: ready booked step fetch backoff
    base, the last three missing in an entry of an earlier version)."""
    ready, _, _, fetch, backoff, base = [*state, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0][:6]
    base = max(base, cfg.delay)
    adaptive = min(max(backoff, cfg.delay_factor * fetch), cfg.max_backoff_delay)
    if adaptive > base:
        why = "back-off" if backoff >= cfg.delay_factor * fetch else "delay_factor"
    else:
        why = "crawl-delay" if base > cfg.delay else "setting"
    return Pace(max(base, adaptive), why, backoff, fetch, ready)


def _answer(status: int | None, retry_after: float | None) -> str:
    """What the adaptive throttle hears of a request (scripts.HOST_RELEASE)."""
    if status in PUSHBACK or retry_after:
        return "push"
    return "ok" if status is not None and status < 400 else ""

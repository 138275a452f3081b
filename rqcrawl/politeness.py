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
"""

from __future__ import annotations

import time

from redis import Redis

from . import keys
from .config import CrawlConfig
from .leases import LEASE

# A host's state is "ready booked step": when its next request may start, the last slot
# promised to a deferred job, and the spacing of slots (delay + the last request's duration,
# so that slots match the pace the host really allows).
_LUA_STATE = """
local function load_state(hosts, host)
  local state = redis.call('HGET', hosts, host)
  if not state then return 0, 0, 0 end
  local r, b, s = string.match(state, '^(%S+) (%S+) (%S+)$')
  return tonumber(r), tonumber(b), tonumber(s)
end
local function save_state(hosts, host, ready, booked, step)
  redis.call('HSET', hosts, host, string.format('%.6f %.6f %.6f', ready, booked, step))
end
"""

# KEYS: hosts hash, the host's lease set. ARGV: host, now, delay, concurrency, lease id,
# lease expiry, booked (1 when the asking job holds a booked slot).
# Returns '0' to go, else the time (string) of the slot booked for the job. A booked job that
# just missed its slot (the host is free, ready within one step) keeps its turn: it comes
# back at `ready` instead of joining the end of the line.
_LUA_GATE = (
    _LUA_STATE
    + """
local host, now, delay = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local is_booked = ARGV[7] == '1'
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local ready, booked, step = load_state(KEYS[1], host)
step = math.max(step, delay)
local free = redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[4])
-- Without a delay, `ready` is only the end of another worker's last request, whose clock may
-- be a little ahead of ours: waiting for it deferred jobs for nothing, and every later job
-- queued behind them one request duration apart.
if free and (delay == 0 or now >= ready) and (is_booked or booked <= now) then
  redis.call('ZADD', KEYS[2], ARGV[6], ARGV[5])
  save_state(KEYS[1], host, now + delay, booked, step)
  return '0'
end
local slot
if is_booked and free and ready - now <= step then
  slot = ready
else
  slot = math.max(ready, booked + step, now + 0.05)
  save_state(KEYS[1], host, ready, slot, step)
end
return string.format('%.6f', slot)
"""
)

# Release a lease, push `ready` to at least end + delay and learn the slot spacing.
# KEYS: hosts hash, the host's lease set. ARGV: host, lease id, now, delay, duration.
_LUA_RELEASE = (
    _LUA_STATE
    + """
redis.call('ZREM', KEYS[2], ARGV[2])
local ready, booked = load_state(KEYS[1], ARGV[1])
local now, delay = tonumber(ARGV[3]), tonumber(ARGV[4])
local step = delay + tonumber(ARGV[5])
save_state(KEYS[1], ARGV[1], math.max(ready, now + delay), booked, step)
return 1
"""
)


class Politeness:
    """The per-host gate of one crawl."""

    def __init__(self, redis: Redis, crawl: str, cfg: CrawlConfig):
        self.crawl = crawl
        self.cfg = cfg
        self.hosts = keys.key(crawl, "hosts")
        self._gate = redis.register_script(_LUA_GATE)
        self._release = redis.register_script(_LUA_RELEASE)

    def acquire(self, host: str, lease: str, delay: float, booked: bool) -> float | None:
        """None when a request to `host` may start now (the lease is taken), else the time
        booked for this job to try again. `booked`: the job already waited for a slot."""
        now = time.time()
        expiry = now + LEASE  # renewed while the job runs: a dead worker's slot frees soon
        args = [host, repr(now), delay, self.cfg.host_concurrency, lease, repr(expiry)]
        answer = self._gate(keys=[self.hosts, self.lease_key(host)], args=[*args, int(booked)])
        slot = float(answer)
        return None if slot == 0 else slot

    def release(self, host: str, lease: str, delay: float, started: float) -> None:
        """End a request begun at `started`: free its lease; the host's next request waits
        `delay` from now."""
        now = time.time()
        args = [host, lease, repr(now), delay, repr(max(0.0, now - started))]
        self._release(keys=[self.hosts, self.lease_key(host)], args=args)

    def delay_for(self, crawl_delay: float | None) -> float:
        """The delay between two requests to a host: ours, or its Crawl-delay (capped)."""
        return max(self.cfg.delay, min(crawl_delay or 0.0, self.cfg.max_crawl_delay))

    def lease_key(self, host: str) -> str:
        """The sorted set of the leases of requests in progress to `host` (rqcrawl.leases)."""
        return keys.key(self.crawl, "leases", host)

"""Per-host politeness shared by every worker on every machine: one Lua gate per request.

For each host (host:port) Redis keeps when its next request may start (`ready`) and the last
time slot promised to a deferred job (`booked`), in one hash field of the crawl, plus a sorted
set of the leases of requests in progress (expiring, so a killed worker's lease frees itself).
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

# KEYS: hosts hash, the host's lease set. ARGV: host, now, delay, concurrency, lease id,
# lease expiry, booked (1 when the asking job holds a booked slot).
# Returns '0' to go, else the time (string) of the slot booked for the job.
_LUA_GATE = """
local host, now, delay = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local ready, booked = 0, 0
local state = redis.call('HGET', KEYS[1], host)
if state then
  local r, b = string.match(state, '^(%S+) (%S+)$')
  ready, booked = tonumber(r), tonumber(b)
end
local free = redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[4])
if free and now >= ready and (ARGV[7] == '1' or booked <= now) then
  redis.call('ZADD', KEYS[2], ARGV[6], ARGV[5])
  redis.call('HSET', KEYS[1], host, string.format('%.6f %.6f', now + delay, booked))
  return '0'
end
local slot = math.max(ready, booked + delay, now + 0.05)
redis.call('HSET', KEYS[1], host, string.format('%.6f %.6f', ready, slot))
return string.format('%.6f', slot)
"""

# Release a lease and push `ready` to at least the given time.
# KEYS: hosts hash, the host's lease set. ARGV: host, lease id, not-before time.
_LUA_RELEASE = """
redis.call('ZREM', KEYS[2], ARGV[2])
local state = redis.call('HGET', KEYS[1], ARGV[1])
if state then
  local r, b = string.match(state, '^(%S+) (%S+)$')
  if tonumber(r) < tonumber(ARGV[3]) then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[3] .. ' ' .. b)
  end
end
return 1
"""


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
        expiry = now + self.cfg.connect_timeout + self.cfg.download_timeout + 10
        args = [host, repr(now), delay, self.cfg.host_concurrency, lease, repr(expiry)]
        answer = self._gate(keys=[self.hosts, self._leases(host)], args=[*args, int(booked)])
        slot = float(answer)
        return None if slot == 0 else slot

    def release(self, host: str, lease: str, delay: float) -> None:
        """End a request: free its lease; the host's next request waits `delay` from now."""
        args = [host, lease, f"{time.time() + delay:.6f}"]
        self._release(keys=[self.hosts, self._leases(host)], args=args)

    def delay_for(self, crawl_delay: float | None) -> float:
        """The delay between two requests to a host: ours, or its Crawl-delay (capped)."""
        return max(self.cfg.delay, min(crawl_delay or 0.0, self.cfg.max_crawl_delay))

    def _leases(self, host: str) -> str:
        return keys.key(self.crawl, "leases", host)

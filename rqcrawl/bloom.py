"""The shared Bloom filter: which URLs a crawl has already admitted, in Redis.

Bit positions come from one 128-bit MurmurHash3 by double hashing (Kirsch-Mitzenmacher), so a
URL costs one hash in Python whatever `k` is. Check-and-add runs as one Lua call per batch, so
two workers that find the same link at once can never both see it as new. A filter larger than
one Redis string (2^32 bits) is split into shards whose keys share one hash tag.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import mmh3
from redis import Redis

MAX_SHARD_BITS = 2**32  # a Redis string holds at most 512 MB

# Lua helper shared with the frontier script. `pos` holds k global bit positions per URL from
# index `first`; shards are KEYS[shard_key0 + shard]. Returns 1 when some bit was still clear
# (the URL is new); with `add`, also sets every bit.
LUA_BLOOM = """
local function bloom_test(shard_key0, shard_bits, k, pos, first, add)
  local new = 0
  for i = first, first + k - 1 do
    local p = tonumber(pos[i])
    local key = KEYS[shard_key0 + math.floor(p / shard_bits)]
    local off = p % shard_bits
    if add then
      if redis.call('SETBIT', key, off, 1) == 0 then new = 1 end
    elseif redis.call('GETBIT', key, off) == 0 then
      return 1
    end
  end
  return new
end
"""

# KEYS: shards. ARGV: shard_bits, k, add (1/0), then k positions per URL.
_LUA_BATCH = (
    LUA_BLOOM
    + """
local shard_bits, k, add = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
local out = {}
for first = 4, #ARGV, k do
  out[#out + 1] = bloom_test(1, shard_bits, k, ARGV, first, add)
end
return out
"""
)


def optimal_size(capacity: int, error_rate: float) -> tuple[int, int]:
    """(bits, hashes) of the optimal filter for `capacity` items at `error_rate`."""
    if capacity < 1 or not 0 < error_rate < 1:
        raise ValueError("capacity must be >= 1 and error_rate between 0 and 1")
    bits = math.ceil(-capacity * math.log(error_rate) / math.log(2) ** 2)
    hashes = max(1, round(bits / capacity * math.log(2)))
    return bits, hashes


class BloomFilter:
    """A Bloom filter in Redis, shared by every worker of a crawl.

    `name` is the key prefix of the shards (`name:0`, `name:1`, ...); it should carry a hash tag
    such as `rqcrawl:{crawl}:bloom`, otherwise one is added so all shards share a Cluster slot.
    """

    def __init__(
        self,
        redis: Redis,
        name: str,
        capacity: int = 1_000_000,
        error_rate: float = 0.001,
        shard_limit: int = MAX_SHARD_BITS,
    ):
        self.redis = redis
        self.capacity = capacity
        self.error_rate = error_rate
        self.bits, self.hashes = optimal_size(capacity, error_rate)
        shards = math.ceil(self.bits / shard_limit)
        self.shard_bits = math.ceil(self.bits / shards)
        prefix = name if "{" in name else f"{{{name}}}"
        self.keys = [f"{prefix}:{i}" for i in range(shards)]
        self._script = redis.register_script(_LUA_BATCH)

    def positions(self, url: str) -> list[int]:
        """The k bit positions of `url`: h1 + i*h2 mod m, from one 128-bit hash."""
        h = mmh3.hash128(url.encode("utf-8"), signed=False)
        h1, h2 = h & 0xFFFFFFFFFFFFFFFF, (h >> 64) | 1
        return [(h1 + i * h2) % self.bits for i in range(self.hashes)]

    def flat_positions(self, urls: Iterable[str]) -> list[int]:
        return [p for url in urls for p in self.positions(url)]

    def add_many(self, urls: Sequence[str]) -> list[bool]:
        """Add `urls`; True where a URL was not in the filter before (atomic for the batch)."""
        return self._run(urls, add=True)

    def contains_many(self, urls: Sequence[str]) -> list[bool]:
        return [not new for new in self._run(urls, add=False)]

    def _run(self, urls: Sequence[str], add: bool) -> list[bool]:
        if not urls:
            return []
        args = [self.shard_bits, self.hashes, int(add), *self.flat_positions(urls)]
        return [bool(x) for x in self._script(keys=self.keys, args=args)]

    def stats(self) -> dict:
        """Size, fill ratio and the false-positive rate a lookup would see right now."""
        with self.redis.pipeline(transaction=False) as pipe:
            for key in self.keys:
                pipe.bitcount(key)
            set_bits = sum(pipe.execute())
        fill = set_bits / self.bits
        return {
            "capacity": self.capacity,
            "error_rate": self.error_rate,
            "bits": self.bits,
            "bytes": math.ceil(self.bits / 8),
            "hashes": self.hashes,
            "shards": len(self.keys),
            "bits_set": set_bits,
            "fill_ratio": fill,
            "estimated_items": _estimated_items(set_bits, self.bits, self.hashes),
            "estimated_false_positive_rate": fill**self.hashes,
        }


def _estimated_items(set_bits: int, bits: int, hashes: int) -> int:
    """Swamidass-Baldi estimate of how many items were added."""
    if set_bits >= bits:
        return -1
    return round(-bits / hashes * math.log(1 - set_bits / bits))

"""The shared Bloom filter: which URLs a crawl has already admitted, in Redis.

Bit positions come from one 128-bit MurmurHash3 by double hashing (Kirsch-Mitzenmacher), so a
URL costs one hash in Python whatever `k` is. Check-and-add runs in Lua, so two workers that
find the same link at once can never both see it as new. Any number of URLs is split into
calls of at most MAX_POSITIONS bit operations: Redis runs nothing else during a Lua call, and
Redis 6 refuses a command of more than a million arguments outright.

The bits are split into shards (Redis strings whose keys share one hash tag) laid out so that
the allocator wastes almost nothing: every shard but the last fills one of jemalloc's size
classes exactly, and each shard is created at its full length by its first write. Left to
grow bit by bit, Redis doubles a string under 1 MB and the allocator rounds up again, which
cost 1.6-1.9x the optimum.

Where the server has native Bloom commands (RedisBloom's BF.*, built into Redis 8), a crawl
can use one of those filters instead (NativeBloomFilter): a URL is then one 16-byte
fingerprint (the same MurmurHash3) checked and added by BF.MADD in the same Lua scripts, and
the filter grows by stacking sub-filters past its capacity instead of losing accuracy. The
choice is made when the crawl is created (`bloom_filter`, in control.start), so every worker
uses the same filter for the crawl's whole life.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

import mmh3
from redis import Redis
from redis.exceptions import ResponseError

from rqcrawl.config import optimal_size
from rqcrawl.frontier import scripts

MAX_SHARD_BITS = 2**32  # a Redis string holds at most 512 MB
KEY_BYTES = 80  # Redis's own cost of one key (dict entry, object, name), for choosing a layout
# Bit operations (or their equivalent in other work) in one Lua call: few enough that one call
# keeps Redis under about 10 ms (docs/changelog.md has what one costs).
MAX_POSITIONS = 1024

T = TypeVar("T")


def batches(items: Sequence[T], cost: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of `items`, in order, each of at most MAX_POSITIONS total `cost`
    (the bit operations, or equivalent, of one item) but never empty."""
    size = max(1, MAX_POSITIONS // cost)
    for start in range(0, len(items), size):
        yield items[start : start + size]


def allocation(size: int) -> int:
    """Bytes jemalloc (Redis's allocator) hands out for `size`: 16-byte steps up to 128 B,
    then four size classes per doubling."""
    if size <= 128:
        return max(16, -(-size // 16) * 16)
    step = 1 << ((size - 1).bit_length() - 3)
    return -(-size // step) * step


_SDS_HEADERS = ((1, 2**5), (3, 2**8), (5, 2**16), (9, 2**32), (17, 2**64))


def string_allocation(length: int) -> int:
    """Bytes of a Redis string's buffer: its sds header, the bytes and a NUL."""
    header = next(h for h, limit in _SDS_HEADERS if length < limit)
    return allocation(header + length + 1)


def layout_bytes(bits: int, shard_bits: int) -> int:
    """Redis memory of `bits` in shards of `shard_bits` (the last one shorter), keys included."""
    shards = math.ceil(bits / shard_bits)
    last = math.ceil((bits - (shards - 1) * shard_bits) / 8)
    full = (shards - 1) * string_allocation(shard_bits // 8)
    return full + string_allocation(last) + shards * KEY_BYTES


def _class_filling_lengths(up_to: int) -> Iterator[int]:
    """String lengths whose buffer fills a size class exactly, up to `up_to` bytes."""
    cls = 16
    while cls <= string_allocation(up_to):
        for header, _ in _SDS_HEADERS:
            length = cls - header - 1
            if length > 0 and string_allocation(length) == cls:
                yield length
        cls = allocation(cls + 1)


def shard_layout(bits: int, limit: int = MAX_SHARD_BITS) -> tuple[int, int]:
    """(shard bits, shards) storing `bits` in the least memory, with shards of at most `limit`
    bits. The candidates are shards filling a size class exactly, plus equal shards; up to
    about twice the fewest shards are tried, as two strings often fit better than one."""
    fewest = math.ceil(bits / limit)
    most = 2 * fewest + 2
    lengths = {math.ceil(bits / n / 8) for n in range(fewest, most + 1)}
    lengths.update(_class_filling_lengths(math.ceil(bits / 8)))
    fitting = [n * 8 for n in lengths if n * 8 <= limit and math.ceil(bits / n / 8) <= most]
    shard_bits = min(fitting, key=lambda s: (layout_bytes(bits, s), math.ceil(bits / s)))
    return shard_bits, math.ceil(bits / shard_bits)


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
        self.shard_bits, shards = shard_layout(self.bits, shard_limit)
        prefix = name if "{" in name else f"{{{name}}}"
        self.keys = [f"{prefix}:{i}" for i in range(shards)]
        self.count_key = f"{prefix}:bits_set"

    @property
    def script_keys(self) -> list[str]:
        """The keys the scripts take: the shards, then the count of set bits (lua/bloom.lua)."""
        return [*self.keys, self.count_key]

    @property
    def size(self) -> str:
        """The filter's size as the scripts take it (lua/bloom.lua's bloom_alloc)."""
        return str(self.bits)

    def positions(self, url: str) -> list[int | bytes]:
        """The k bit positions of `url`: h1 + i*h2 mod m, from one 128-bit hash."""
        h = mmh3.hash128(url.encode("utf-8"), signed=False)
        h1, h2 = h & 0xFFFFFFFFFFFFFFFF, (h >> 64) | 1
        return [(h1 + i * h2) % self.bits for i in range(self.hashes)]

    def flat_positions(self, urls: Iterable[str]) -> list[int | bytes]:
        """What the scripts get for `urls`: `hashes` arguments per URL, in order."""
        return [p for url in urls for p in self.positions(url)]

    def add_many(self, urls: Sequence[str]) -> list[bool]:
        """Add `urls`, any number; True where a URL was not in the filter before. Each URL's
        check-and-add is atomic, the whole list is not (it takes one call per batch)."""
        return self._run(urls, add=True)

    def contains_many(self, urls: Sequence[str]) -> list[bool]:
        """Whether each of `urls` (any number) is in the filter, in order."""
        return [not new for new in self._run(urls, add=False)]

    def _run(self, urls: Sequence[str], add: bool) -> list[bool]:
        out: list[bool] = []
        for batch in batches(urls, self.hashes):
            found = scripts.BLOOM_BATCH(
                self.redis, tail_keys=self.script_keys, tail_args=self.flat_positions(batch),
                shard_bits=self.shard_bits, size=self.size, k=self.hashes, add=int(add),
            )  # fmt: skip
            out += [bool(x) for x in found]
        return out

    def stats(self) -> dict:
        """Size, fill ratio and the false-positive rate a lookup would see right now."""
        set_bits = self._bits_set()
        fill = set_bits / self.bits
        return {
            "kind": "lua",
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

    def _bits_set(self) -> int:
        """The count the scripts keep; counted here only for a filter made before it was
        kept and not added to since (an add counts it once, lua/bloom.lua)."""
        kept = self.redis.get(self.count_key)
        if kept is not None:
            return int(kept)
        with self.redis.pipeline(transaction=False) as pipe:
            for key in self.keys:
                pipe.bitcount(key)
            return sum(pipe.execute())


class NativeBloomFilter(BloomFilter):
    """The crawl's filter as one RedisBloom filter (`name:bf`), reserved at `capacity` and
    `error_rate` by its first add; past its capacity it stacks sub-filters (each twice the
    last, with a tighter error rate), so it keeps about `error_rate` instead of filling up."""

    def __init__(self, redis: Redis, name: str, capacity: int = 1_000_000,
                 error_rate: float = 0.001):  # fmt: skip
        self.redis = redis
        self.capacity = capacity
        self.error_rate = error_rate
        self.bits, _ = optimal_size(capacity, error_rate)  # an optimal filter's: a yardstick
        self.hashes = 1  # one argument per URL: its fingerprint
        self.shard_bits = 0  # tells the scripts to use BF.* (lua/bloom.lua)
        prefix = name if "{" in name else f"{{{name}}}"
        self.keys = [f"{prefix}:bf"]

    @property
    def script_keys(self) -> list[str]:
        return self.keys

    @property
    def size(self) -> str:
        return f"{self.error_rate!r} {self.capacity}"

    def positions(self, url: str) -> list[int | bytes]:
        """The URL's fingerprint: its 128-bit MurmurHash3, 16 bytes."""
        return [mmh3.hash_bytes(url.encode("utf-8"))]

    def stats(self) -> dict:
        """BF.INFO's figures, under the names of the bit filter's where they mean the same."""
        try:
            raw = self.redis.execute_command("BF.INFO", self.keys[0])
        except ResponseError:  # not reserved yet: nothing was added
            raw = []
        info = {_text(k): v for k, v in zip(raw[::2], raw[1::2], strict=True)}
        items = int(info.get("Number of items inserted", 0))
        fill = items / self.capacity
        return {
            "kind": "native",
            "capacity": self.capacity,
            "error_rate": self.error_rate,
            "bytes": int(info.get("Size", 0)),
            "filters": int(info.get("Number of filters", 0)),
            "fill_ratio": fill,
            "estimated_items": items,
            # an optimal filter filled to `fill` of its capacity: (1 - 2**-fill) ** log2(1/p);
            # past it, sub-filters keep it near error_rate (at most about twice it in all)
            "estimated_false_positive_rate": (1 - 2 ** -min(fill, 1.0))
            ** math.log2(1 / self.error_rate),
        }


def native_available(redis: Redis) -> bool:
    """Whether the server has RedisBloom's commands (the module, or Redis 8)."""
    try:  # a read of a key nobody has: 0, or "unknown command"
        redis.execute_command("BF.EXISTS", "rqcrawl:bf-probe", "x")
    except ResponseError:
        return False
    return True


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _estimated_items(set_bits: int, bits: int, hashes: int) -> int:
    """Swamidass-Baldi estimate of how many items were added."""
    if set_bits >= bits:
        return -1
    return round(-bits / hashes * math.log(1 - set_bits / bits))

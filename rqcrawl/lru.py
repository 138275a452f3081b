"""A small least-recently-used map for what a worker keeps per crawl or per site.

Workers live for months and serve every crawl of their Redis, so nothing they keep may grow
with the number of crawls or sites they ever met. Written here rather than taken from
functools.lru_cache, which caches calls: these maps are filled by hand, must not keep a
"no such crawl" answer, drop entries on request (a purged crawl) and may have to close what
they evict (WARC files). Thread-safe: rqcrawl.workers.threadworkers share them between threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most `size` entries; `on_evict` gets each value dropped to make room or popped."""

    def __init__(self, size: int, on_evict: Callable[[V], None] | None = None):
        self.size = size
        self.on_evict = on_evict
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> V:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            evicted = [self._items.popitem(last=False)[1] for _ in range(len(self) - self.size)]
        self._evicted(evicted)
        return value

    def pop_where(self, match: Callable[[K], bool]) -> None:
        """Drop the entries whose key matches."""
        with self._lock:
            evicted = [self._items.pop(k) for k in [k for k in self._items if match(k)]]
        self._evicted(evicted)

    def _evicted(self, values: list[V]) -> None:
        if self.on_evict is not None:
            for value in values:
                self.on_evict(value)

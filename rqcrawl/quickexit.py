"""Leaving the interpreter without its last garbage collections.

At exit, CPython collects the whole heap while it tears the modules down: with redis-py, RQ,
requests and lxml loaded that is 60 to 100 ms of CPU, the biggest part of a worker's stop and
of the time from `rqcrawl crawl`'s last line to its exit. Frozen (gc.freeze), the heap is left
to the operating system instead. Nothing else is skipped: the atexit functions run, threads
are joined, the standard streams flushed, and objects freed by their reference count still
are; only garbage in reference cycles is never finalized (whatever writes, the export, the
logs, closes its files itself).
"""

from __future__ import annotations

import atexit
import gc

_registered = False


def skip_final_collection() -> None:
    """Freeze the heap when this process exits (registered once per process)."""
    global _registered
    if not _registered:
        atexit.register(gc.freeze)
        _registered = True

"""A new crawl job's meta: the crawler imported once in RQ's forking worker, not in every
job it forks.

RQ's stock worker (the card's `rq worker crawl`) forks a work-horse for each job and never
imports the job's function itself, so every work-horse imported the crawler anew (requests,
lxml, parsel, the frontier: about 0.3 s of CPU, most of a page's cost at `--delay 0`, and the
host waited for it). The worker does unpickle a job's meta when it fetches the job
(`rq.job.Job.restore`), so each job's meta carries a `Preload` of its function's module:
unpickling it imports that module, once per process, and every later fork inherits it, as a
preloading application server's workers do. The function is still named by a string, as RQ
names it: nothing here imports the workers. (`RQ_CONFIG=rqcrawl.workers.preload` does the same
before the first job.)
"""

from __future__ import annotations

import importlib

META_KEY = "preload"


class Preload(str):
    """A job meta's marker, the name of the module it imports when unpickled (see the
    module's docstring). A string everywhere else: rq-dashboard shows it, and puts it in JSON,
    as the module's name."""

    __slots__ = ()

    def __reduce__(self) -> tuple:
        return (preloaded, (str(self),))


def preloaded(module: str) -> Preload:
    """Unpickling a Preload: its module imported (a dictionary lookup after the first)."""
    importlib.import_module(module)
    return Preload(module)


def meta_for(func: str) -> dict[str, Preload]:
    """The meta of a new job that runs `func` (a dotted path, as RQ takes it)."""
    return {META_KEY: Preload(func.rpartition(".")[0])}

"""Several RQ workers in the threads of one process, so that a slow site can have many
requests in flight without one Python process (about 50 MB) per request.

A crawl job spends most of its time waiting for the network with the GIL released, so on a
site with 100 ms of latency eight threads do nearly eight times the pages of one. Each thread
is a full RQ worker (its own name, heartbeat and started-job registry entry), so dead-worker
recovery and `rq info` work as for separate processes. What RQ does with signals is moved to
the main thread: SIGALRM job timeouts become RQ's TimerDeathPenalty, and SIGINT/SIGTERM ask
every thread to stop after its current job (at once when Redis is gone: see
leave_without_redis).

    python -m rqcrawl.workers.threadworkers crawl --url redis://... --threads 8

Like `rq worker`, it reads the URL from $RQ_REDIS_URL when --url is not given. A process can
serve every shard of a sharded crawl: --url repeated (or the URLs in $RQ_REDIS_URL separated
by spaces) runs `--threads` workers for each, every one with its own connection (and, with
--with-scheduler, which no crawl needs, RQ's scheduler per shard). One set of threads per
shard rather than threads that go from shard to shard: each stays a stock RQ worker of one
Redis (registries, heartbeats, dead-worker recovery), and no shard's queue waits behind
another's.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from dataclasses import dataclass

from rq import Queue
from rq.utils import import_attribute

from rqcrawl.redisurl import CLIENT
from rqcrawl.workers.threaded import threaded_class
from rqcrawl.workers.worker import worker_name


@dataclass(frozen=True)
class ThreadWorkers:
    """The workers `run` starts per Redis: `threads` of `worker_class` on `queues`, the
    first one's RQ scheduler if asked, connected by `connection_class`."""

    queues: list[str]
    threads: int
    worker_class: str
    with_scheduler: bool
    maintenance_interval: int
    connection_class: str = CLIENT


def run(redis_urls: list[str], plan: ThreadWorkers) -> None:
    """Run `threads` workers per Redis until SIGINT/SIGTERM; then each finishes its
    current job."""
    queues, threads, maintenance_interval = plan.queues, plan.threads, plan.maintenance_interval
    cls = threaded_class(import_attribute(plan.worker_class))
    connect = import_attribute(plan.connection_class).from_url
    workers = []
    for shard, redis_url in enumerate(redis_urls):
        for i in range(threads):
            conn = connect(redis_url)
            qs = [Queue(q, connection=conn) for q in queues]
            name = worker_name(f":s{shard}t{i}" if len(redis_urls) > 1 else f":t{i}")
            workers.append(
                cls(qs, connection=conn, name=name, maintenance_interval=maintenance_interval)
            )
    if plan.with_scheduler:  # the scheduler is a forked process: fork before any thread exists
        for first in workers[::threads]:  # one per Redis
            first._start_scheduler(logging_level="WARNING")
    stop = threading.Event()

    def request_stop(signum, frame) -> None:
        for w in workers:
            w.ask_to_stop()
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    pool = [
        threading.Thread(target=w.work, kwargs={"logging_level": "WARNING"}, daemon=True)
        for w in workers
    ]
    for t in pool:
        t.start()
    while any(t.is_alive() for t in pool):
        stop.wait(0.5)
        if stop.is_set() and not all(w.redis_answers() for w in workers[::threads]):
            leave_without_redis(workers[::threads])
            return
    for t in pool:
        t.join()


def leave_without_redis(firsts: list) -> None:
    """A stop while a Redis of ours is gone: the threads' jobs could not record their end,
    and a thread cannot be interrupted, so the process leaves them (daemon threads) and
    their URLs come back through their leases, as after a kill. The schedulers, processes
    of their own, are stopped first."""
    print("rqcrawl: stopping without Redis; pages in progress come back", file=sys.stderr)
    for first in firsts:
        if first.scheduler:
            first.stop_scheduler()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queues", nargs="+")
    env_urls = os.environ.get("RQ_REDIS_URL", "").split()
    parser.add_argument(
        "--url",
        action="append",
        required=not env_urls,
        help="Redis URL (repeat it for the shards of a sharded crawl)",
    )
    parser.add_argument("--threads", type=int, default=8, help="Workers per Redis")
    parser.add_argument("--worker-class", default="rq.worker.SimpleWorker")
    parser.add_argument("--with-scheduler", action="store_true")
    parser.add_argument("--maintenance-interval", type=int, default=600)
    parser.add_argument("--connection-class", default=CLIENT, help="Its from_url connects")
    parser.add_argument("--quiet", action="store_true", help="(always: warnings only)")
    args = parser.parse_args()
    plan = ThreadWorkers(
        args.queues,
        args.threads,
        args.worker_class,
        args.with_scheduler,
        args.maintenance_interval,
        args.connection_class,
    )
    run(args.url or env_urls, plan)


if __name__ == "__main__":
    main()

"""The recommended worker: `rq worker crawl -w rqcrawl.workers.CrawlWorker`.

It is RQ's SimpleWorker (no fork per job, so the HTTP keep-alive sessions, the crawl configs and
the robots.txt verdicts stay warm across jobs) plus one background thread that tends every
crawl of the Redis: it releases deferred URLs the moment they are due and runs the recovery
pass even when no job ends, so URLs of a killed worker come back although nobody runs
`rqcrawl status`. A stock `rq worker crawl` stays correct without it, only coarser: deferred
URLs then wait for a job start or the crawl's wake-up job, up to a second late.

It also trims RQ's per-job bookkeeping, which at crawl speed costs more Redis round trips than
the crawl itself (docs/changelog.md has the counts): a waiting job is dequeued with its hash
in one round trip instead of two (CrawlQueue), and with the success of the job before it in
none of its own, a crawl job's claim of its URL goes with its
start (CrawlJob.claimed), a heartbeat within seconds of one that gave the worker's key its
full time-to-live is skipped (also the shorter one RQ sends before every job) and the others
go in one round trip instead of three, the worker's state is written only when it changes
(and `idle` only once no job waits: between two jobs Redis keeps saying `busy`), the
`rq suspend` flag is read once a second rather than before every job, a job without
callbacks gets no heartbeat for them, the job's preparation goes in one transaction instead
of two, and a crawl job's success (which has no dependents to watch) in one round trip
instead of four, and without an RQ result (its outcome is in the job's `meta`). What RQ
stores is otherwise unchanged.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Hashable

from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.client import Pipeline
from rq.exceptions import StopRequested
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.utils import get_version, now
from rq.worker import SimpleWorker, WorkerStatus

from rqcrawl.config import ConfigError
from rqcrawl.defaults import (
    HEARTBEAT_EVERY,
    REDIS_POLL,
    REDIS_RETRY_FOR,
    SCHEDULER_STOP_S,
    SLOT_UNBLOCK_S,
    SUSPENSION_EVERY,
)
from rqcrawl.frontier import piggyback, scripts
from rqcrawl.ops.metrics import port_from_env as metrics_port_from_env
from rqcrawl.ops.metrics import serve_from_env as serve_metrics
from rqcrawl.quickexit import skip_final_collection
from rqcrawl.redisurl import REDIS_DOWN, server_key
from rqcrawl.workers import slot_name
from rqcrawl.workers.crawljob import CLAIMING, CRAWL_QUEUE_FUNCS, CrawlJob
from rqcrawl.workers.crawlqueue import CrawlQueue, ask_ahead, before_waiting, hold, put_back
from rqcrawl.workers.crawls import claim_call
from rqcrawl.workers.jobs import abandon
from rqcrawl.workers.resilience import (
    RetryUntilStopped,
    StopWithoutRedis,
    raise_first_error,
    riding_out_redis,
)
from rqcrawl.workers.tender import Tender
from rqcrawl.workers.threaded import (
    StopBetweenDequeues,
    own_connection,
    slots_from_env,
    threaded_class,
)


def worker_name(suffix: str = "") -> str:
    """`host:pid` (and a thread's suffix): rq-dashboard and `rq info` then say where a worker
    runs, instead of RQ's random hex."""
    return f"{socket.gethostname()}:{os.getpid()}{suffix}"


class CrawlWorker(StopBetweenDequeues, SimpleWorker):
    """SimpleWorker plus the release-and-recovery thread (see the module docstring), riding
    out Redis crashes, restarts and failovers, with `slots` requests in flight: the worker
    `rq worker` starts runs the others in threads (each a full RQ worker with its own
    connection, name `<name>:sN`, heartbeat and registry entries, so recovery and `rq info`
    see them as separate workers) and stops them with itself."""

    threaded = False  # a slot of another worker's process (ThreadedMixin)
    runs_slots = True  # its process runs RQCRAWL_SLOTS of them (slots)

    # RQ retries a failed blocking dequeue after 1, 2, 4 ... 60 s: a worker would come back
    # up to a minute after Redis did. Retry every second instead.
    max_connection_wait_time = 1.0

    # One tender per process and Redis, however many workers run in its threads
    # (rqcrawl.workers.threadworkers serves several shards: each needs its deferred URLs
    # released), by the server's key (redisurl.server_key).
    _tending: dict[Hashable, threading.Lock] = {}
    _tending_guard = threading.Lock()
    _slots: list[tuple[CrawlWorker, threading.Thread]] = []  # the other slots' workers (work)
    _full_beat_at: float | None = None  # when the last heartbeat with the worker's full TTL went
    _preparing: Pipeline | None = None  # the job's preparation (see prepare_execution)
    _suspension_checked_at = 0.0
    _sent_state: str | None = None  # the state last written to Redis (None: write the next)

    def __init__(self, *args, **kwargs) -> None:
        kwargs["name"] = self._client_name = kwargs.get("name") or worker_name()
        self._stopping = threading.Event()  # set by a stop request: see RetryUntilStopped
        super().__init__(*args, **kwargs)
        skip_final_collection()  # a stop then ends the process at once
        if self.job_class is Job:  # RQ's default: a custom --job-class is left alone
            self.job_class = CrawlJob
        if self.queue_class is Queue:  # (and a custom --queue-class)
            self.queue_class = CrawlQueue
        self._tune_pool()

    def _tune_pool(self) -> None:
        """RQ raises the socket timeout above its blocking dequeue's, but only for the
        connections its pool makes from then on: the one `rq worker` opened before (to
        check `rq suspend`) keeps redis-py's 5 s. Handed to the blocking dequeue (the
        release thread makes that likely), it timed out every 5 s and RQ backed off 1, 2,
        4 ... 60 s, so an idle worker took new work up to a minute late. The pool's idle
        connections are therefore dropped: every connection is made anew, with RQ's timeout.

        Unless the connection has a retry policy of its own, a command that finds Redis
        gone (crashed, restarting, failing over) is retried for about REDIS_RETRY_FOR
        seconds: a job then goes on where it was (its steps are atomic and idempotent)
        instead of leaving a lost job and a held politeness lease behind; unless the
        worker is stopping (RetryUntilStopped).

        Its connections carry the worker's name (CLIENT SETNAME), by which a stop finds
        the one blocked on the queue (end_blocked_dequeues)."""
        pool = self.connection.connection_pool
        pool.connection_kwargs["client_name"] = self._client_name
        if pool.connection_kwargs.get("retry") is None:
            retries = int(REDIS_RETRY_FOR / REDIS_POLL)
            policy = RetryUntilStopped(ExponentialBackoff(REDIS_POLL), retries, self._stopping)
            pool.connection_kwargs["retry"] = policy
        pool.disconnect(inuse_connections=False)
        pool.reset()

    def request_stop(self, signum, frame) -> None:
        """RQ's warm stop, for this worker and its slots; but from now on a command that
        finds Redis gone fails at once (RetryUntilStopped), so that the worker ends within
        seconds whatever the state of Redis. A job it held then comes back through its
        lease, as after a kill.

        RQ stops an idle worker by raising StopRequested from the signal handler wherever
        it is, also after its dequeue moved a job into RQ's intermediate list and before the
        job starts: the job then stays there `queued`, run by nobody, until RQ's maintenance
        fails it a minute or more later (10 minutes for a default `rq worker`), and its
        crawl's level cannot end meanwhile (a resumed crawl stalled). Here RQ's StopRequested
        is caught and the stop noted, honoured before the next dequeue; or at once if the
        dequeue was blocked and is ended without a job (end_blocked_dequeues), or Redis is
        gone (its URLs come back through their leases)."""
        self._stopping.set()
        for sibling, _ in self._slots:
            sibling.ask_to_stop()
        if self._slots:  # idle slots stop now, not after their dequeue's STOP_CHECK_S
            self.end_blocked_dequeues({sibling.name for sibling, _ in self._slots})
        try:
            super().request_stop(signum, frame)
        except StopRequested:  # RQ's answer for an idle worker
            self.ask_to_stop()
            if self.end_blocked_dequeues({self.name}) or not self.redis_answers():
                raise  # (RQ's idle loop would retry a gone Redis for minutes)
            return
        if self.get_state() == WorkerStatus.BUSY and not self.redis_answers():
            self.log.warning(
                "Worker %s: Redis unreachable: stopping now, the job's URL comes back "
                "through its lease",
                self.name,
            )
            raise StopWithoutRedis()

    def ask_to_stop(self) -> None:
        self._stopping.set()
        super().ask_to_stop()

    def slots(self) -> int:
        """Requests in flight in this process (a threaded worker is one of them)."""
        return slots_from_env() if self.runs_slots and not self.threaded else 1

    def _start_slots(self, work_kwargs: dict) -> list[tuple[CrawlWorker, threading.Thread]]:
        """The other slots of this process: workers of this class in threads, set up as
        this one, working as it was asked to (burst, logging), never with a scheduler."""
        started = []
        cls = threaded_class(type(self))
        kwargs = {**work_kwargs, "with_scheduler": False}
        for i in range(1, self.slots()):
            sibling = cls(
                [q.name for q in self.queues], name=slot_name(self.name, i),
                connection=own_connection(self.connection), job_class=self.job_class,
                queue_class=self.queue_class, serializer=self.serializer,
                default_result_ttl=self.default_result_ttl, worker_ttl=self.worker_ttl,
                maintenance_interval=self.maintenance_interval,
                job_monitoring_interval=self.job_monitoring_interval,
            )  # fmt: skip
            thread = threading.Thread(target=sibling.work, kwargs=kwargs, daemon=True)
            thread.start()
            started.append((sibling, thread))
        return started

    def set_shutdown_requested_date(self) -> None:
        """RQ writes the date of a stop request from the signal handler: with Redis gone
        that write is skipped, rather than raised into the job the signal interrupted."""
        try:
            super().set_shutdown_requested_date()
        except REDIS_DOWN as exc:
            self.log.warning("Worker %s: stopping; Redis unreachable (%s)", self.name, exc)

    def unsubscribe(self) -> None:
        """RQ's, with its pub/sub thread told to stop before the UNSUBSCRIBE: the reply then
        wakes the thread, which exits at once, instead of reading again and RQ's join waiting
        its whole second (a second of every stop, of `rqcrawl crawl`'s end too)."""
        if self.pubsub_thread:
            self.pubsub_thread.stop()
        super().unsubscribe()

    def stop_scheduler(self) -> None:
        """RQ's, but a scheduler that does not end within SCHEDULER_STOP_S, or at once when
        Redis is gone (its last writes would retry), is killed; its lock expires on its own."""
        process = self.scheduler._process
        if process is None or not process.pid:
            return
        with contextlib.suppress(OSError):
            os.kill(process.pid, signal.SIGTERM)
        process.join(SCHEDULER_STOP_S if self.redis_answers() else 0)
        if process.is_alive():
            process.kill()
            process.join()

    def teardown(self) -> None:
        """RQ's (the worker's death registered); with Redis gone, a stopping worker leaves
        its key to expire (its TTL) rather than wait for Redis. A job it dequeued ahead goes
        back to its queue."""
        try:
            put_back(self.connection)
            super().teardown()
        except REDIS_DOWN as exc:
            if not self._stopping.is_set():
                raise
            self.log.warning("Worker %s: stopped without Redis (%s)", self.name, exc)

    @riding_out_redis
    def heartbeat(self, timeout: int | None = None, pipeline: Pipeline | None = None) -> None:
        """RQ's heartbeat, skipped while a full-TTL one went less than HEARTBEAT_EVERY ago:
        the worker's key then has minutes left, more than the TTL of the heartbeat RQ sends
        before every job (the job's timeout, at most job_monitoring_interval, plus a minute),
        which is skipped too. Else sent with `pipeline`, or in one round trip."""
        full, asked = self.worker_ttl + 60, timeout or self.worker_ttl + 60
        recent = self._full_beat_at is not None and (
            time.monotonic() - self._full_beat_at < HEARTBEAT_EVERY
        )
        if recent and asked <= full and not self.stop_asked():
            return  # (a stopping worker sends it: without Redis, RQ's dequeue loop ends here)
        if pipeline is not None:
            super().heartbeat(timeout, pipeline=pipeline)
        else:
            with self.connection.pipeline(transaction=False) as pipe:
                super().heartbeat(timeout, pipeline=pipe)
                pipe.execute()
        self._full_beat_at = time.monotonic() if asked >= full else None
        self._sent_state = None  # (the state goes again with the next change: a Redis that
        # restarted meanwhile has it back within HEARTBEAT_EVERY of work)

    def execute_job(self, job: Job, queue: Queue) -> None:
        """SimpleWorker's, with the heartbeat after the job sent in one round trip with the
        `idle` state (which set_state sends only once the worker waits; the work loop's own
        heartbeat then finds it recent), unless the job's success already did
        (handle_job_success), which also carries the RQ jobs of the URLs the page released
        (piggyback). A job cut short by a lost Redis is marked failed once Redis is back, so
        that the crawl's recovery pass brings its URL back at once rather than when RQ finds
        it abandoned."""
        try:
            with piggyback.carried(self.connection):
                self.perform_job(job, queue, self.prepare_execution(job))
            if self.get_state() != WorkerStatus.IDLE:
                with self.connection.pipeline(transaction=False) as pipe:
                    self.set_state(WorkerStatus.IDLE, pipeline=pipe)
                    self.heartbeat(pipeline=pipe)
                    pipe.execute()
        except REDIS_DOWN as exc:
            self.await_redis(exc)
            self._fail_cut_short(job, queue, exc)
        finally:
            self._preparing = None

    def prepare_execution(self, job: Job) -> Execution:
        """RQ's (the execution's record, the `busy` state), but queued in the transaction
        of prepare_job_execution rather than sent in one of its own: one round trip a job."""
        # (no MULTI/EXEC: one connection's commands run in order, all in one send)
        pipe = self._preparing = self.connection.pipeline(transaction=False)
        execution = Execution.create(job, self.get_heartbeat_ttl(job), pipe, self.name)
        self.executions[execution.id] = execution
        self.set_state(WorkerStatus.BUSY, pipeline=pipe)
        return execution

    def prepare_job_execution(self, job: Job, remove_from_intermediate_queue: bool = False) -> None:
        """RQ's, in the pipeline prepare_execution opened; with a crawl job's claim of
        its URL (CrawlJob.claimed), which it would otherwise send in a round trip of its own."""
        pipe, self._preparing = self._preparing, None
        if pipe is None:
            return super().prepare_job_execution(job, remove_from_intermediate_queue)
        with pipe:
            heartbeat_ttl = self.get_heartbeat_ttl(job)
            self.heartbeat(heartbeat_ttl, pipeline=pipe)
            job.heartbeat(now(), heartbeat_ttl, pipeline=pipe)
            job.prepare_for_execution(self.name, pipeline=pipe)
            pipe.persist(job.key)
            if remove_from_intermediate_queue:
                pipe.lrem(
                    Queue(job.origin, connection=self.connection).intermediate_queue_key, 1, job.id
                )
            claiming = self._queue_claim(job, pipe)
            replies = pipe.execute(raise_on_error=False)
        if claiming:
            *replies, claimed = replies
            if not isinstance(claimed, Exception):  # else the job claims itself
                job.claimed = claimed
        raise_first_error(replies)

    def _queue_claim(self, job: Job, pipe: Pipeline) -> bool:
        """Queue the claim of a crawl job's URL in `pipe`; whether it was (not for a job of
        a crawl that is gone, or whose settings do not load: the job says so itself)."""
        if not isinstance(job, CrawlJob) or job.func_name not in CLAIMING:
            return False
        try:
            crawl, url, _ = job.args
            call = claim_call(self.connection, crawl, url, job.id)
        except ConfigError:
            return False
        if call is None:
            return False
        scripts.CLAIM.queue(pipe, **call)
        return True

    def handle_job_success(
        self, job: Job, queue: Queue, started_job_registry: object, execution: Execution
    ) -> None:
        """RQ's, with a crawl job's status written by the save of its fields and `meta`
        (CrawlJob.succeeding); for a crawl job, which has no dependents and no repeats, in
        one round trip instead of three (RQ watches the job's dependents and reads them
        first), with the worker's heartbeat and `idle` state, which execute_job would send in
        a fourth (set_state: the state waits for a dequeue that blocks)."""
        succeeding = job.succeeding() if isinstance(job, CrawlJob) else contextlib.nullcontext()
        with succeeding:
            if job.func_name in CRAWL_QUEUE_FUNCS and not (job.repeats_left or job.has_rate_limit):
                self._handle_crawl_success(job, execution)
            else:
                super().handle_job_success(job, queue, started_job_registry, execution)

    def _handle_crawl_success(self, job: Job, execution: Execution) -> None:
        """RQ's handle_job_success without its dependents and repeats, and with the `idle`
        state, in one round trip (no MULTI/EXEC, as prepare_execution's). The job's return
        value (its outcome, which its `meta` holds too: jobs._describe) gets no RQ result
        of its own: two writes a page fewer. The pipeline ends with the dequeue of the
        worker's next job (crawlqueue.ask_ahead), whose own round trip it spares."""
        ahead = self._dequeues_ahead()
        with self.connection.pipeline(transaction=False) as pipe:
            piggyback.take(pipe)  # the RQ jobs of the URLs the page released
            self.increment_successful_job_count(pipeline=pipe)
            self.increment_total_working_time(job.ended_at - job.started_at, pipe)
            result_ttl = job.get_result_ttl(self.default_result_ttl)
            if result_ttl != 0:
                job.set_status(JobStatus.FINISHED, pipeline=pipe)
                job.save(pipeline=pipe, include_meta=False, include_result=False)
                job.finished_job_registry.add(job, result_ttl, pipe)
            job.cleanup(result_ttl, pipeline=pipe, remove_from_queue=False)
            job._status = JobStatus.FINISHED
            self.cleanup_execution(job, pipeline=pipe, execution=execution)
            self.set_state(WorkerStatus.IDLE, pipeline=pipe)
            self.heartbeat(pipeline=pipe)
            if ahead:
                ask_ahead(pipe, self.queues[0], self.job_class)
            replies = pipe.execute(raise_on_error=False)
        if ahead:
            *replies, found = replies
            if not isinstance(found, Exception):  # (a script Redis forgot: the next
                hold(self.queues[0], found)  # dequeue loads it again)
        raise_first_error(replies)

    def _dequeues_ahead(self) -> bool:
        """Whether the worker's next job is dequeued with this job's success (ask_ahead):
        for a worker of one queue that goes on."""
        return (
            len(self.queues) == 1
            and issubclass(self.queue_class, CrawlQueue)
            and not self.stop_asked()
            and get_version(self.connection) >= (6, 2, 0)
        )

    @riding_out_redis
    def _fail_cut_short(self, job: Job, queue: Queue, exc: Exception) -> None:
        self.handle_job_failure(job, queue, exc_string=f"Redis connection lost: {exc}")

    def handle_exception(self, job: Job, *exc_info) -> None:
        """RQ's; and a job that failed because Redis went away is abandoned (see
        jobs.abandon) once Redis answers again. A stop without Redis ends the worker at
        once: the job's fate is its lease's (see request_stop)."""
        if isinstance(exc_info[1], StopWithoutRedis):
            raise exc_info[1]
        super().handle_exception(job, *exc_info)
        if isinstance(exc_info[1], REDIS_DOWN):
            self.await_redis(exc_info[1])
            self._abandon(job)

    @riding_out_redis
    def _abandon(self, job: Job) -> None:
        abandon(job)

    def await_redis(self, exc: Exception) -> None:
        """Wait until Redis answers again (a crash and restart, a failover); a stop request
        meanwhile ends the worker (StopRequested: RQ's own loops would retry forever)."""
        self.log.warning("Worker %s: Redis unreachable (%s), waiting for it", self.name, exc)
        while not self.stop_asked():
            try:
                self.connection.ping()
            except REDIS_DOWN:
                time.sleep(REDIS_POLL)
                continue
            self.log.warning("Worker %s: Redis is back", self.name)
            return
        raise StopRequested()

    def handle_execution_ended(self, job: Job, queue: Queue, heartbeat_ttl: int) -> None:
        """RQ extends the job's heartbeat here to cover its success or failure callback;
        crawl jobs have none, so that round trip is skipped for them."""
        if job.success_callback or job.failure_callback:
            super().handle_execution_ended(job, queue, heartbeat_ttl)
        else:
            job.ended_at = now()

    @riding_out_redis
    def set_state(self, state: str, pipeline: Pipeline | None = None) -> None:
        """RQ writes the state before every dequeue and after every job, `idle` then `busy`
        again at each job. Here a state is written only when it differs from the one Redis
        has, and `idle` only when the worker waits: before a dequeue that blocks (a worker
        of CrawlQueue: before_waiting), so that between two jobs Redis keeps `busy`."""
        self._state = state
        if state == WorkerStatus.SUSPENDED:  # (`rq suspend`: nobody would run it meanwhile)
            put_back(self.connection)
        if state == WorkerStatus.IDLE and issubclass(self.queue_class, CrawlQueue):
            return  # (sent by send_idle)
        self._send_state(pipeline)

    @riding_out_redis
    def send_idle(self) -> None:
        """Before a dequeue that blocks: Redis says `idle` if the worker is."""
        if self.get_state() == WorkerStatus.IDLE:
            self._send_state()

    def _send_state(self, pipeline: Pipeline | None = None) -> None:
        if self._state != self._sent_state:
            super().set_state(self._state, pipeline=pipeline)
            self._sent_state = self._state

    @riding_out_redis
    def check_for_suspension(self, burst: bool) -> None:
        """`rq suspend` takes effect within SUSPENSION_EVERY instead of at the next job."""
        if time.monotonic() - self._suspension_checked_at < SUSPENSION_EVERY:
            return
        self._suspension_checked_at = time.monotonic()
        super().check_for_suspension(burst)

    @riding_out_redis
    def run_maintenance_tasks(self) -> None:
        super().run_maintenance_tasks()

    def work(self, *args, **kwargs) -> bool:
        before_waiting(self.send_idle)
        if not self.threaded:
            # RQ's own stop handlers, in before the slots start: a stop never finds slots
            # running without them (RQ installs them again after registering the worker)
            signal.signal(signal.SIGINT, self.request_stop)
            signal.signal(signal.SIGTERM, self.request_stop)
            try:
                metrics_port_from_env()  # (a bad value: one line, before any slot starts)
                self._slots = self._start_slots(kwargs)
            except ConfigError as exc:
                raise SystemExit(f"rqcrawl: {exc}") from None
        with self._tending_guard:
            tending = self._tending.setdefault(server_key(self.connection), threading.Lock())
        try:
            if not tending.acquire(blocking=False):
                return super().work(*args, **kwargs)
            try:
                return self._work_tended(*args, **kwargs)
            finally:
                tending.release()
        finally:
            for sibling, _ in self._slots:  # each ends its job (or leaves it: Redis gone)
                sibling.ask_to_stop()
            self._join_slots()

    def _join_slots(self) -> None:
        """Wait for the slots to end their jobs; with Redis gone, not at all (their URLs
        come back through their leases). When stopping, an idle slot's dequeue is ended
        again every SLOT_UNBLOCK_S: one that had passed its stop check when the stop's
        CLIENT UNBLOCK came (sixteen threads wait for one GIL) began its dequeue after it,
        and would block out its STOP_CHECK_S (a one-page crawl's stop took 0.37 s)."""
        if not self._stopping.is_set():
            for _, thread in self._slots:
                thread.join()
            return
        if not self.redis_answers():
            return
        while alive := [(s, t) for s, t in self._slots if t.is_alive()]:
            idle = {s.name for s, _ in alive if s.get_state() != WorkerStatus.BUSY}
            if idle:
                self.end_blocked_dequeues(idle)
            alive[0][1].join(SLOT_UNBLOCK_S)

    def _work_tended(self, *args, **kwargs) -> bool:
        serve_metrics(Redis(connection_pool=self.connection.connection_pool))
        stop = threading.Event()
        tender = Tender(Redis(connection_pool=self.connection.connection_pool))
        thread = threading.Thread(target=tender.run, args=(stop,), name="rqcrawl-tender")
        thread.daemon = True
        thread.start()
        try:
            return super().work(*args, **kwargs)
        finally:
            stop.set()
            tender.wake.set()
            thread.join(5)

"""The fixed numbers of rqcrawl in one place: leases, intervals, batch sizes, caches and limits,
each with why it has its value.

A crawl's settings (rqcrawl.config, conf/default.toml) are what a user chooses per crawl; these
are what the code chose, the same for every crawl. Times are in seconds unless named `_MS`.
"""

from __future__ import annotations

# --- Leases and recovery ------------------------------------------------------------------
LEASE = 6.0  # a URL's lease unless renewed: a dead worker's URL is queued again within seconds
RENEW_EVERY = LEASE / 3  # a lease survives two late or failed renewals
REAP_EVERY = 5  # between two recovery passes of one crawl: one pass finds every expired lease
RELEASE_GRACE = 30  # a released URL's slot waits this long for its job before its host goes on
HOP_HOLD = 5.0  # a robots.txt hop's hold of a busy host's slot outlives its next ask this long
QUEUED_LEASE = 300  # a task-table row taken by a pump that died is due again after this
TABLE_WAIT = 10.0  # a URL whose task table did not answer waits this long, not the worker
FORKED_TTL = 60  # the `status` warning of a forking worker stays up this long after its job
WAKER_TTL = 60  # a lost waker job (its worker killed) keeps others from being queued this long
OUTBOX_LOCK = 30  # a drain holds its shard's outbox this long; a dead drain's is taken over
REPLICA_WAIT_MS = 2000  # most a drain waits for a shard's replica before it goes on

# --- Intervals ----------------------------------------------------------------------------
PUMP_EVERY = 2.0  # between two pumps of a crawl's due revisits, by any process
CLAIM_NOTE_EVERY = 1.0  # a process notes claims this often: `status` needs minutes, not each job
REAP_TRY_EVERY = 1.0  # a process's finishes try the recovery lock (free once a REAP_EVERY)
OTHERS_EVERY = 1.0  # max_host_share over shards: one read of the other shards per second
MAX_SLEEP = 0.1  # most a worker's release thread sleeps: a due URL is released that late at most
REFRESH_CRAWLS = 1.0  # a new crawl's deferred URLs wait for this read of the set of crawls
HEARTBEAT_EVERY = 5.0  # one full-TTL heartbeat (minutes of TTL) stands for the next ones
SUSPENSION_EVERY = 1.0  # between two reads of RQ's suspend flag (`rq suspend` is for people)
STOP_CHECK_S = 0.25  # an idle worker blocks this long on the queue: its stop takes that at most
SLOT_UNBLOCK_S = 0.05  # a stopping worker ends its idle slots' dequeues again this often
REDIS_POLL = 0.5  # between two tries to reach a Redis that went away
REDIS_RETRY_FOR = 30.0  # a command retries this long (a failover) before the worker waits
PING_TIMEOUT = 2.0  # a busy worker's stop request waits this long to learn whether Redis is up
SCHEDULER_STOP_S = 2.0  # a stopping worker waits this long for its RQ scheduler, then kills it
WAKER_SPAN = 60.0  # a waker job (a fork, in stock workers) releases due URLs this long
WAKER_YIELD = 0.5  # jobs waiting this long mean every worker is busy: the waker leaves
FORK_LEAD = 2.0  # a forking worker's job may be released this early: the fork takes that long
REFRESH = 0.5  # between two full status reads of `rqcrawl crawl` (progress, recovery, pumps)
FOLLOW_STOP_CHECK = 0.2  # `export --follow` looks for a stop signal this often
CHECK_GAP = 0.05  # `rqcrawl crawl` looks whether the crawl is over at most this often ...
END_NEAR = 4  # ... while more than this many URLs are left; then
END_GAP = 0.005  # ... this long after each change: a short crawl's end is seen at once
SETTLE_TRIES = 20  # double reads of the levels that may differ (workers moving) before giving up
SETTLE_PAUSE = 0.02  # between two of them

# --- Batches: one Redis or SQL call must not stall the others -----------------------------
DUE_BATCH = 500  # parked URLs brought back per call
PUMP_BATCH = 500  # due URLs taken from the task table per transaction
DRAIN_BATCH = 500  # links moved from a shard's outbox to their shards per round
DRAIN_ROUNDS = 8  # rounds of one drain at most: it ends while other pages keep pushing links
PAGE_BLOCK = 50  # max_pages over shards: pages a shard takes at a time, a round trip per block

# --- What one process keeps (workers live for months and meet many crawls) ----------------
DEFAULT_SLOTS = 16  # requests in flight per worker process: the network is what a crawler waits for
MAX_SLOTS = 1024  # the most RQCRAWL_SLOTS (--threads) takes: a typo starts no million threads
CRAWLS_KEPT = 32  # crawls whose state a process keeps: each may hold a few MB
CONFIGS_KEPT = 256  # crawls whose settings a process keeps (a config never changes)
KNOWN_MAX = (
    50_000  # URLs a process knows it admitted (about 6 MB): not sent to the Bloom filter again
)

# --- Limits of what is read and shown -----------------------------------------------------
SHARE_FLOOR = 100  # URLs a crawl admits before max_host_share applies: a small crawl is not cut
RATE_BUCKET = 10  # one `rate:N` counter of fetched pages per this many seconds
RECENT = 60  # rate buckets kept, and the span of the recent rate `status` reports
IDLE_WARN = 60  # URLs waiting in RQ this long with no job started: `status` warns
OVERDUE = 10  # a deferred URL this late is a stall in `status`
HOSTS_SHOWN = 10  # hosts in `status`, those with the most time left first
RECENT_ENDS = 2000  # newest records per shard read for the hosts' observed pace
GAP_CAP = 3  # most one gap between two ends of a host counts, in its modelled time per URL
DELAYS_READ = 200  # hosts without URLs in flight whose Crawl-delay `status` reads
RECORDS_SEARCHED = 1_000_000  # newest records `inspect` reads to find an ended URL's
HOSTS_LIMIT = 20  # hosts `rqcrawl hosts` lists by default

# --- The task table's database ------------------------------------------------------------
SQLITE_BUSY_TIMEOUT = 30  # a SQLite writer waits this long for another (worker processes)
CONNECT_TIMEOUT = 5  # to open a connection to PostgreSQL or MySQL
RETRY_DELAYS = (0.25, 0.5, 1.0, 2.0)  # tries of a worker's call to a database that did not answer
ASK_DELAYS = (0.25,)  # the same for what a person asked (status, purge): they are waiting

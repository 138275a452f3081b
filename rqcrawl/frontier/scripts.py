"""Every Lua script of rqcrawl, as rq keeps its own: one named constant each, called by name.

The Lua lives in .lua files under frontier/lua/, one a script and one a concern of the shared
code (bloom, levels, pacing, records, depth, composed by lua/frontier.lua); a line
`--#include NAME` puts lua/NAME.lua in its place, each file once per script, and a script
keeps only the shared functions it reaches (`reached`).
A `Script` declares the names of its KEYS and ARGV; a prelude generated from them binds each
name to its position, so the script's body and its callers use names only. A script that takes
a variable number of keys or arguments (the Bloom filter's shards, a page's links) gets them
after the named ones, and the prelude gives the index where they start.

The sha of a script is a function of its text, so nothing is registered per connection: a
call sends EVALSHA and loads the script only when the server does not know it (a restarted
Redis forgets them). Scripts sent in a pipeline are loaded first by `load`.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import NoScriptError

LUA_DIR = Path(__file__).parent / "lua"
INCLUDE = re.compile(r"^--#include (\w+)$", re.M)
# A shared function: `local function NAME(` at the start of a line to the first line that is
# `end` alone (the body is indented; tests/test_state.py checks every file keeps to that).
FUNCTION = re.compile(r"^local function (\w+)\(.*\n(?:(?!end\n).*\n)*end\n", re.M)
COMMENT = re.compile(r"--[^\n]*")
WORD = re.compile(r"\w+")


def lua_source(name: str, included: set[str] | None = None) -> str:
    """The text of lua/`name`.lua with its includes resolved (a file already included is not
    repeated: `included` holds the names taken so far)."""
    included = set() if included is None else included
    included.add(name)

    def expand(match: re.Match) -> str:
        other = match.group(1)
        return "" if other in included else lua_source(other, included).rstrip("\n")

    return INCLUDE.sub(expand, (LUA_DIR / f"{name}.lua").read_text(encoding="utf-8"))


def reached(source: str) -> str:
    """`source` with only the functions its own code names, and those they name in turn.

    Why: Redis runs a script's whole text at every call, so each `local function` in it is
    made again, with its upvalues, at every call, and is garbage after it (docs/benchmarks.md).
    A composed script includes all of the frontier's functions; few scripts reach them all.
    """
    blocks = list(FUNCTION.finditer(source))
    index = {block[1]: i for i, block in enumerate(blocks)}
    between = outside(source, [block.span() for block in blocks])
    todo = [index[word] for word in words_in(between) if word in index]
    kept: set[int] = set()
    while todo:
        if (i := todo.pop()) not in kept:
            kept.add(i)
            todo += [index[word] for word in words_in(blocks[i][0]) if word in index]
    return outside(source, [block.span() for i, block in enumerate(blocks) if i not in kept])


def outside(source: str, spans: list[tuple[int, int]]) -> str:
    """`source` without the text of `spans` (in order, not overlapping)."""
    edges = [0, *(edge for span in spans for edge in span), len(source)]
    return "".join(source[a:b] for a, b in zip(edges[::2], edges[1::2], strict=True))


@functools.cache
def words_in(code: str) -> frozenset[str]:
    """The words of `code` outside its comments (a function's text recurs in every script
    that includes it: read once)."""
    return frozenset(WORD.findall(COMMENT.sub("", code)))


class Script:
    """A Lua script with named KEYS and ARGV, its text from lua/`lua`.lua (see the module
    docstring)."""

    def __init__(
        self,
        keys: Sequence[str],
        args: Sequence[str],
        *,
        lua: str,
        key_tail: str = "",
        arg_tail: str = "",
    ):
        self.keys, self.args = tuple(keys), tuple(args)
        prelude = [f"local {name} = KEYS[{i}]" for i, name in enumerate(self.keys, 1)]
        prelude += [f"local {name} = ARGV[{i}]" for i, name in enumerate(self.args, 1)]
        if key_tail:  # the index of the first key after the named ones
            prelude.append(f"local {key_tail} = {len(self.keys) + 1}")
        if arg_tail:
            prelude.append(f"local {arg_tail} = {len(self.args) + 1}")
        self.prelude, self.lua = "\n".join(prelude) + "\n", lua

    @functools.cached_property
    def source(self) -> str:
        """The script's text, composed at its first use (a process runs few of them)."""
        return reached(self.prelude + lua_source(self.lua))

    @functools.cached_property
    def sha(self) -> str:
        return hashlib.sha1(self.source.encode()).hexdigest()

    def _flat(self, named: dict[str, Any], tail_keys: Sequence, tail_args: Sequence) -> list:
        unknown = named.keys() - set(self.keys) - set(self.args)
        if unknown:
            raise TypeError(f"unknown script parameters: {sorted(unknown)}")
        keys = [named[k] for k in self.keys] + list(tail_keys)
        return [len(keys), *keys, *(named[a] for a in self.args), *tail_args]

    def __call__(
        self, redis: Redis, tail_keys: Sequence = (), tail_args: Sequence = (), **named: Any
    ) -> Any:
        """Run the script now, with its keys and arguments by name."""
        flat = self._flat(named, tail_keys, tail_args)
        try:
            return redis.evalsha(self.sha, *flat)
        except NoScriptError:
            redis.script_load(self.source)
            return redis.evalsha(self.sha, *flat)

    def queue(
        self, pipe: Pipeline, tail_keys: Sequence = (), tail_args: Sequence = (), **named: Any
    ) -> None:
        """Add a run of the script to `pipe` (see `load`)."""
        pipe.evalsha(self.sha, *self._flat(named, tail_keys, tail_args))


def names_by_sha() -> dict[str, str]:
    """Each script's sha -> its name here (what the bench's profile reads SLOWLOG by)."""
    return {v.sha: k for k, v in globals().items() if isinstance(v, Script)}


def load(redis: Redis, *scripts: Script) -> None:
    """Load `scripts` into the server, for a pipeline that failed with NoScriptError."""
    for script in scripts:
        redis.script_load(script.source)


# Check (and with add = '1', add) URLs in the Bloom filter: k positions per URL in the tail.
# Returns 1 (new) or 0 per URL.
BLOOM_BATCH = Script(
    keys=(),
    args=("shard_bits", "size", "k", "add"),
    key_tail="shard0",
    arg_tail="positions",
    lua="bloom_batch",
)

# Every script that changes which URLs wait, run or end takes the crawl's frontier keys and
# arguments by these names (CrawlState.frontier_names), so that lua/frontier.lua can use them.
FRONTIER_KEYS = (
    "counters", "inflight", "ready", "blocked", "qkeys", "hosts", "later", "parked", "pending",
    "spec", "lowered", "items", "outbox", "leased",
)  # fmt: skip
FRONTIER_ARGS = (
    "qprefix", "lprefix", "sprefix", "pace", "levels", "now", "window", "undelivered",
)  # fmt: skip

# The one step that ends a URL: forget it from `inflight`, count its outcome, free its
# request's slot (`slot`: "key seconds answer retry_after base not_before", see free_slot),
# record it, admit its children through the Bloom filter into their keys' queues (budgets
# apply: max_pages, max_host_pages, and max_host_share once `share_floor` URLs were admitted;
# a refused child is recorded once, from `skip_record`, and stays refused: it is in the
# filter), lower the children that were known deeper (exact depth), and release the next URLs
# of the keys that are due while fewer than `window` have jobs.
# done: the ending URL ('' when seeding or admitting). final: '1' to end it, '0' to only admit
# its children while it stays in flight (a page with more links than one call should take).
# increments: "field n field n"; a field "kind|host" goes to the per-host hash.
# record: the URL's record as JSON, or ''; rec_depth its depth (-1: none). A URL found
# shorter while in flight (`lowered`) is recorded at its new depth, and its children one
# deeper than that. A record that may still be lowered is held back (lua/frontier.lua) with
# `links`, the page's links as a JSON list of "shard verdict url" (its children, and `cut`:
# those past max_depth, admitted here if the page turns out shallower).
# n: number of children; the tail holds 4 arguments per child (verdict, '-' to admit; key;
# host; url), then k Bloom positions per child. Children are held at `child_priority`.
# In a crawl over several shards, `foreign` is a JSON list of the page's links to other
# shards' hosts, appended to `outbox` in the same step (entries of
# rqcrawl.frontier.messages.Outgoing, admitted on their shard by a drain; counted in `outboxed`).
# marks: the ending URL's marks to drop, 's' in `sitemapped`, 'v' in `via` (set only when a
# URL is admitted: its claim read them, messages.Ending.marks).
# source: 'sitemap' to note the admitted children in `sitemapped` until they end (their
# records say where they came from), or ''. child_via: for a redirect's target (a child at
# the ending URL's own depth), the JSON list of the redirects that led to it, noted in `via`
# until it ends.
# max_pages over shards: a shard admits only the pages the first shard granted it
# (`pages_allowed`, see GRANT_PAGES); with fewer left than the children it would admit (new
# to the Bloom filter, not refused by a rule), and the first shard not yet out of pages, the
# script changes nothing but the filter's allocation and returns {2, pages needed, ...}.
# max_host_share counts `others`, the URLs admitted by the other shards (as last read).
# digest: the body digest of a fetched page (detect_duplicates), or ''. The first URL to
# end with a digest is kept in `digests`; another one with the same digest is a duplicate:
# its record gets `duplicate_of`, its links are admitted like any page's (a copy under
# another path links URLs found nowhere else: traps are the trap rules' and max_depth's).
# reap_every: the seconds of the recovery pass's lock, which an ending URL tries to take
# ('0': it does not try; see Admission._reap_try).
# Returns {1 | 0 (done had already ended), admitted, reap due, level up (over shards: this
# shard's pending URLs are past the crawl's level), links sent to the outbox, records left to
# settle, when the freed key may go next, the first URL of `digest` if done is a duplicate
# (else ''), released url, entry...}.
FINISH = Script(
    keys=(
        *FRONTIER_KEYS, "reap_lock", "host_pages", "revisiting", "sitemapped", "via", "digests",
    ),
    args=(
        *FRONTIER_ARGS, "done", "final", "digest", "marks", "increments", "record", "rec_depth",
        "child_depth", "child_priority", "source", "child_via", "links", "cut", "slot",
        "shard_bits", "k", "reap_every", "max_pages", "max_host_pages", "max_host_share",
        "share_floor", "skip_record", "skip_prefix", "n", "size", "foreign", "others",
    ),
    key_tail="bloom0",
    arg_tail="children",
    lua="finish",
)  # fmt: skip

# Over shards: raise this shard's level to `level` (the coordinator found that the whole crawl
# has nothing pending below it: rqcrawl.frontier.levels; a lower or equal one does nothing but
# go on settling), emit what became final, let blocked keys go and release what is due.
# Returns {raised (0 | 1), records left to settle, released url, entry...}.
ADVANCE = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "level"),
    lua="advance",
)

# The outbox's drain admitted the first `n` entries on their shards: drop them (they are no
# longer pending here, at their page's depth: lua/frontier.lua) and free the lock; nothing if the
# lock is no longer that drain's (it ran out: another drain reads the same entries again, and
# their second admission is a no-op). With n = 0 only the lock goes: LRANGE 0 -1 would name
# the whole list, entries pushed since the drain read it included.
# Returns 0 if not, else 1 + the links left, read in the same step as the lock is freed: a
# drain that found the lock taken left its links to the holder, which then reads again.
TRIM_OUTBOX = Script(
    keys=("outbox", "lock", "pending"),
    args=("token", "n"),
    lua="trim_outbox",
)

# Compare-and-set of one inflight entry, so the reaper never requeues a URL that ended or was
# requeued meanwhile, nor one whose lease a live worker renewed; the URL goes back to the head
# of its key's queue. An expired lease is dropped whatever the entry (url only, expected ''):
# no live job holds it. Returns {1 | 0 (replaced), released url, entry...}.
REQUEUE = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "url", "key", "expected", "entry"),
    lua="requeue",
)

# A starting job's one call: the URL's inflight entry (if it is the entry of the claiming job,
# its attempt and turn, the job takes the URL's lease until `expiry`, and its slot of `key`:
# the one its release took, or a free one if the key may go now), whether the crawl is paused,
# its identity (started_at), the URLs released meanwhile (parked ones that came due first),
# whether a sitemap admitted the URL, the redirects that led to it, '1' if the job may make
# its request (else when to come back; '0' for a job that is not the URL's), the URL's lowered
# depth if it was found shorter, and the level. note: '1' to note the claim's time as
# last_claim_at (see stats.idle_warnings).
CLAIM = Script(
    keys=(*FRONTIER_KEYS, "sitemapped", "via"),
    args=(*FRONTIER_ARGS, "url", "key", "attempt", "turn", "expiry", "limit", "note"),
    lua="claim",
)

# Park an in-flight URL until `until_at` (now or past: straight back to the head of its key's
# queue), if its entry is still the expected one, replaced by `entry`; the job's lease ends,
# its slot is freed (`slot`, as FINISH's), and what is due is released. `counter`: a field to
# increment, or ''. Returns {1 | 0 (stale), when the freed key may go next, released...}.
PARK = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "url", "key", "expected", "entry", "until_at", "counter", "slot"),
    lua="park",
)

# Free the slot of a job that did not end its URL (failed, cut short): `slot` as FINISH's;
# releases what is then due. Returns when the key may go next (0: no slot), then the
# released url, entry...
FREE_SLOT = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "url", "slot"),
    lua="free_slot",
)

# The turn of a robots.txt redirect hop to key `key` (rqcrawl.workers.gate.HopPacer), which
# takes no slot: `ended` is the key of the request that just ended ('' when asking again),
# whose next request now waits its delay in force from now; `own` is 1 when the asking job
# holds a slot of `key`. Another key's hop also waits for a free slot, and holds it meanwhile
# as `holder` (a lease until a while after it asks again), so that a busy host's URLs, each
# released as the one before ends, cannot starve it. Returns '0' when the hop may go now (the
# key's next request then waits its delay from now), else when to ask again.
HOP_TURN = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "key", "ended", "own", "holder", "hold_for"),
    lua="hop_turn",
)

# The last request of a robots.txt fetch, a redirect hop to key `key` (another host's), ended:
# that key's next request waits its delay from now, as after a page (HOP_TURN made it wait
# from when the hop went, before its answer came).
HOP_ENDED = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "key"),
    lua="hop_ended",
)

# Bring parked URLs whose time came back to their keys' queues, go on settling held-back
# records, and release what is due (the release thread, the waker, the recovery pass).
# Returns {records left to settle, released url, entry...}.
DUE = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "limit"),
    lua="due",
)

# If the crawl is halted and the job is still the live attempt for the URL, put the URL back
# in its key's queue at its depth (a new URL again), or drop it if the crawl was cancelled (a
# retry scheduled by a job that was running during the cancel); its slot is freed.
PUT_BACK = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "url", "key", "expected"),
    lua="put_back",
)

# Readmit URLs due for a revisit (from the task table) into their keys' queues, past the Bloom
# filter (seen is not done), unless the URL is already waiting for its revisit or in flight,
# or the crawl is cancelled. The tail holds "priority depth key url" entries. Returns
# {readmitted, released url, entry...}.
READMIT = Script(
    keys=(*FRONTIER_KEYS, "revisiting"),
    args=FRONTIER_ARGS,
    arg_tail="entries",
    lua="readmit",
)

# Hold sitemap documents (rqcrawl.frontier.sitemaps: entries "sitemap:<url>") at depth 0 and
# `priority`, past the Bloom filter and the budgets (a sitemap is not a page of the crawl):
# each document once per crawl (the field `entry` of `sitemaps`), at most `cap` per site (the
# field `docs|site`), none once the crawl is cancelled. The tail holds (site, key, entry).
# Returns {held, refused by the cap, released url, entry...} (one held before is neither:
# with revisits it comes back on its own schedule, from the task table).
HOLD_SITEMAPS = Script(
    keys=(*FRONTIER_KEYS, "sitemaps"),
    args=(*FRONTIER_ARGS, "cap", "priority"),
    arg_tail="triples",
    lua="hold_sitemaps",
)

# Hold requisites (rqcrawl.frontier.requisites: entries "requisite:<url>") at `depth` (their
# page's) and `priority`, past the budgets (a requisite is not a page of the crawl): each
# once per crawl, by the Bloom filter (check-and-add of the entry), none once the crawl is
# cancelled. The tail holds (key, entry) for each of `n` entries, then their Bloom positions.
# Returns {held, released url, entry...}.
HOLD_REQUISITES = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "depth", "priority", "n", "shard_bits", "k", "size"),
    key_tail="bloom0",
    arg_tail="tail",
    lua="hold_requisites",
)

# Halt the crawl for good and drop its pending work (waiting, in flight, parked) in one step,
# so that no release can slip in between; held-back records are emitted first (their pages
# were fetched: their depth is the crawl's last word). Returns false if it was already
# cancelled, else {held count, url, entry, url, entry...} of the dropped in-flight URLs.
CANCEL = Script(
    keys=(*FRONTIER_KEYS, "revisiting", "sitemapped", "via"),
    args=FRONTIER_ARGS,
    lua="cancel",
)

# max_pages over shards, run on the crawl's first shard: grant a shard `need` pages, or a
# block of up to `block` (at most 1/`shards` of those left, so that the shards that stop
# early strand little), never more than max_pages in all; returns the pages granted.
GRANT_PAGES = Script(
    keys=("counters",),
    args=("need", "block", "shards", "max_pages"),
    lua="grant_pages",
)

# RQ's non-blocking dequeue of one queue in one round trip (rqcrawl.workers.worker.CrawlQueue):
# the first job id moves to RQ's intermediate list as LMOVE does, and its hash comes with it
# (`prefix` .. id, a key the script names itself: RQ's job hashes are not in KEYS, as RQ
# runs on one server). Returns false for an empty queue, else {id, field, value, ...}; a job
# whose hash is gone comes with no fields, as RQ's HGETALL would.
DEQUEUE = Script(
    keys=("queue", "intermediate"),
    args=("prefix",),
    lua="dequeue",
)

# A follower wrote records `ARGV[delivered..]` to disk: acknowledge them in `group`, forget
# where its batch started in its file (the `followers` hash: a restart cuts the file back to
# a batch still pending there, never to one acknowledged), and trim the stream of every
# record that each of its groups has delivered and acknowledged (below the oldest pending
# one, else past the last delivered one), counting the bytes trimmed (`trimmed_bytes` of
# `counters`, against emit's `record_bytes`); count the records as the follower's
# (`delivered_to`: what left Redis and where it went). Returns the stream's length.
ACK_RECORDS = Script(
    keys=("items", "followers", "delivered_to", "counters"),
    args=("group", "consumer"),
    arg_tail="delivered",
    lua="ack_records",
)

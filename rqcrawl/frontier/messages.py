"""The messages between the frontier's Python and its Lua, one typed codec each: what a
released URL's entry holds (InFlight), how a request's slot ended (Slot), what ending a URL
writes (Ending) and did (Ended), what a claim learns (Claim), a link in a shard's outbox
(Outgoing), a child as the finish step takes it (Child) and a page's link as it keeps one
with a held-back record (KeptLink), a URL due for a revisit (Readmitted), the crawl's pace
and levels every frontier script takes (PaceArgs, LevelArgs), a key's pace as the scripts
keep it (HostPace), and the released URLs every releasing script returns (`pairs`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

Children = Sequence[tuple[str | None, str]]  # (verdict, url): a verdict refuses the URL
# Turns from here on are the browser's: a URL handed to the render queue (Frontier.hand_off)
# keeps going there when it is deferred (its turns count on from it); a retry or a recovery
# starts again at turn 0, a plain job, which decides anew.
RENDER_TURN = 1_000_000


@dataclass(frozen=True)
class InFlight:
    """A released URL: its depth, when it was (re)released or may run, its attempt number
    (retries and recoveries), its turn (deferrals within an attempt) and its priority.
    `source` ("sitemap" or ""), read by a claim from `sitemapped`, is not part of the stored
    entry (nor of its comparisons)."""

    depth: int
    released_at: float = field(compare=False)  # (the frontier's to set: see same_entry)
    attempt: int
    turn: int = 0
    priority: int = 0
    source: str = field(default="", compare=False)
    # the redirects that led to the URL (rqcrawl.fetch.hops), read by a claim from `via`
    via: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, raw: bytes | str) -> InFlight:
        """Entries written before priorities have four fields (priority 0)."""
        depth, at, attempt, turn, *priority = (
            raw.decode() if isinstance(raw, bytes) else raw
        ).split(" ")
        return cls(int(depth), float(at), int(attempt), int(turn), int(*priority or [0]))

    @property
    def rendered(self) -> bool:
        """Whether the URL's jobs are the render queue's (see RENDER_TURN)."""
        return self.turn >= RENDER_TURN

    def encode(self) -> str:
        return f"{self.depth} {self.released_at!r} {self.attempt} {self.turn} {self.priority}"

    def job_id(self, crawl: str, url: str) -> str:
        """Deterministic per (URL, attempt, turn), so a stale job recognises itself."""
        digest = hashlib.sha1(url.encode("utf-8")).hexdigest()[:20]
        return f"rqcrawl-{crawl}-{digest}-{self.attempt}-{self.turn}"


Released = list[tuple[str, InFlight]]  # URLs that became in flight: they need RQ jobs


@dataclass(frozen=True)
class Slot:
    """How a job's hold of a slot of its politeness key ended, for the key's pace
    (lua/pacing.lua, free_slot): the request's `seconds` (-1: none was made), the
    adaptive throttle's `answer` ('push' for 429/503 or a Retry-After, 'ok' for a success,
    '-' otherwise) and `retry_after`, the key's base delay as now known (`base`: the setting
    or its Crawl-delay; -1: unchanged), and a time before which the key takes no request.
    A `freed` slot was freed when its request ended (gate.Answered): the URL's end leaves
    the key's slots and pace as they are (it encodes as none)."""

    key: str
    seconds: float = -1.0
    answer: str = "-"
    retry_after: float = 0.0
    base: float = -1.0
    not_before: float = 0.0
    freed: bool = False

    def encode(self) -> str:
        if self.freed:
            return ""
        return (
            f"{self.key} {self.seconds!r} {self.answer} {self.retry_after!r} {self.base!r} "
            f"{self.not_before!r}"
        )


@dataclass(frozen=True)
class Ending:
    """What ending a URL writes in one atomic step (CrawlState.finish_step): the `counts` to add,
    its `record` (None: none), its `children` admitted at `child_depth` and `child_priority`
    (`via`: they are a redirect's target, led to by that JSON list of redirects,
    rqcrawl.fetch.hops), the end of its request's `slot`, and, for a page whose record may be
    held back (exact depth), all its `links` and those `cut` by max_depth, which a shorter
    path found later sends again. `digest`: the body digest of a fetched page, when the
    crawl detects duplicates: a page whose body an earlier URL of the crawl had is recorded
    `duplicate_of` it (scripts.FINISH), its links admitted as any page's. `claimed`: the
    entry the URL's claim read (its `source` and `via` then say whether it has a mark to
    drop; None: both are dropped)."""

    counts: dict[str, int]
    record: dict | None
    children: Children = ()
    child_depth: int = 1
    child_priority: int = 0
    via: str = ""
    slot: Slot | None = None
    links: Children | None = None
    cut: Children = ()
    digest: bytes = b""
    claimed: InFlight | None = None

    def marks(self) -> str:
        """Which of the URL's marks its end drops (scripts.FINISH): s its sitemap's, v the
        redirects that led to it; a claimed URL has those its claim found (they are set
        only when a URL is admitted)."""
        entry = self.claimed
        return ("s" if entry is None or entry.source else "") + (
            "v" if entry is None or entry.via else ""
        )


@dataclass(frozen=True)
class Claim:
    """What a starting job learns in one round trip (CrawlState.claim_step)."""

    entry: InFlight | None  # None: the URL ended, or a newer job replaced this one
    paused: bool
    due: Released  # URLs released meanwhile (see scripts.CLAIM)
    stale: bool  # the crawl was purged and created again since this state was made
    wait_until: float | None = None  # its key has no slot now: come back then
    lowered: int | None = None  # the URL was found shorter: its depth now
    level: int = 0  # the settled level when the job started


@dataclass(frozen=True)
class Ended:
    """What one end (or seeding, or resume) did: URLs new to the crawl, the released URLs,
    whether a recovery pass is due, whether the level rose (over several shards: whether
    this shard has nothing pending at the crawl's level, which may be over:
    rqcrawl.frontier.levels), how many links went to the outbox, whether held-back records
    are left to settle, and when the key it freed may go next (0: none)."""

    admitted: int
    released: Released
    reap_due: bool = False
    level_up: bool = False
    sent: int = 0
    settling: bool = False
    next_at: float = 0.0
    duplicate_of: str = ""  # the ended page's body was first this URL's (Ending.digest)


@dataclass(frozen=True)
class Outgoing:
    """A link waiting in a shard's outbox, to be admitted on its shard (another shard's host,
    or a link sent again one deeper when its page was found shorter): entries
    "shard priority depth verdict source via url" ('-': no verdict, no source, no via)."""

    shard: int
    priority: int
    depth: int
    verdict: str | None
    url: str
    source: str = ""  # 'sitemap' for a sitemap's URL (its record says so)
    via: str = ""  # a redirect's target: the JSON list of the redirects that led to it

    @classmethod
    def parse(cls, raw: bytes) -> Outgoing:
        # the URL last, whatever it holds (a JSON list of redirects has no space)
        shard, priority, depth, verdict, source, via, url = raw.decode().split(" ", 6)
        return cls(
            int(shard), int(priority), int(depth), None if verdict == "-" else verdict, url,
            "" if source == "-" else source, "" if via == "-" else via,
        )  # fmt: skip

    def encode(self) -> str:
        return (
            f"{self.shard} {self.priority} {self.depth} {self.verdict or '-'} "
            f"{self.source or '-'} {self.via or '-'} {self.url}"
        )


@dataclass(frozen=True)
class Child:
    """A child as the finish step takes it (lua/finish.lua): four arguments of its tail,
    its verdict ('-': none), its politeness key, its host and its URL."""

    verdict: str | None
    key: str
    host: str
    url: str

    def encode(self) -> tuple[str, str, str, str]:
        return (self.verdict or "-", self.key, self.host, self.url)


@dataclass(frozen=True)
class KeptLink:
    """A page's link as the finish step keeps it with the page's held-back record, to be
    sent again one deeper if the page is found shorter (lua/depth.lua): "shard verdict url"
    ('-': no verdict; the URL last, whatever it holds)."""

    shard: int
    verdict: str | None
    url: str

    def encode(self) -> str:
        return f"{self.shard} {self.verdict or '-'} {self.url}"


@dataclass(frozen=True)
class Readmitted:
    """A URL due for a revisit as lua/readmit.lua takes it: "priority depth key url" (the URL
    last, whatever it holds)."""

    priority: int
    depth: int
    key: str
    url: str

    def encode(self) -> str:
        return f"{self.priority} {self.depth} {self.key} {self.url}"


def pairs(flat: list[bytes]) -> Released:
    """The released URLs a script returns, url, entry, url, entry..."""
    return [
        (url.decode(), InFlight.parse(raw)) for url, raw in zip(flat[::2], flat[1::2], strict=True)
    ]


@dataclass(frozen=True)
class PaceArgs:
    """A crawl's pace as every frontier script takes it (`pace`, read by lua/frontier.lua):
    the base delay, slots per key, delay_factor, max_backoff_delay, the seconds a released
    URL's slot waits for its job, whether the throttle adapts, and the seconds ahead of its
    key's turn a URL may be released."""

    delay: float
    concurrency: int
    factor: float
    cap: float
    grace: float
    adaptive: bool
    lead: float

    def encode(self) -> str:
        return (
            f"{self.delay!r} {self.concurrency} {self.factor!r} {self.cap!r} {self.grace!r} "
            f"{int(self.adaptive)} {self.lead!r}"
        )


@dataclass(frozen=True)
class HostPace:
    """A politeness key's pace as lua/pacing.lua keeps it in `hosts` and as `status` and
    `rqcrawl hosts` show it: when its next request may start, the smoothed fetch time, the
    back-off's extra delay, its base delay (-1: the setting), and the delay in force and why
    ('setting', 'crawl-delay', 'back-off', 'delay_factor') as the script computed them when
    it last set `ready` (its in_force, the one formula: the display cannot disagree). A key
    last saved by an older version has no delay nor why (0.0, "") until a request ends."""

    ready: float = 0.0
    fetch_s: float = 0.0
    backoff: float = 0.0
    base: float = -1.0
    delay: float = 0.0
    why: str = ""

    @classmethod
    def parse(cls, raw: bytes | str | None) -> HostPace:
        """ "ready fetch backoff base delay why" (None: a key with no request yet)."""
        if raw is None:
            return cls()
        ready, fetch, backoff, base, *rest = (
            raw.decode() if isinstance(raw, bytes) else raw
        ).split(" ")
        delay, why = rest or ("0", "")
        return cls(float(ready), float(fetch), float(backoff), float(base), float(delay), why)


@dataclass(frozen=True)
class LevelArgs:
    """A crawl's levels as every frontier script takes it (`levels`, read by
    lua/frontier.lua): exact depth, only the level's URLs released (budgets), max_ahead,
    over several shards, max_depth, and this shard's index."""

    exact: bool
    strict: bool
    max_ahead: int
    sharded: bool
    max_depth: int
    shard: int

    def encode(self) -> str:
        return (
            f"{int(self.exact)} {int(self.strict)} {self.max_ahead} {int(self.sharded)} "
            f"{self.max_depth} {self.shard}"
        )

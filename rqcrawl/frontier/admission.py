"""How URLs enter a crawl, as CrawlState changes it: seeds, a page's links (ending the page
in the same step, scripts.FINISH), sitemaps, requisites, revisits and other shards' links,
through the Bloom filter, the budgets and the levels of exact depth (lua/levels.lua,
lua/depth.lua). The rule of which links are sent here at all is rqcrawl.frontier.rules'
(its docstring says which half of link admission runs where)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from rqcrawl.defaults import (
    OTHERS_EVERY,
    OUTBOX_LOCK,
    PAGE_BLOCK,
    REAP_EVERY,
    REAP_TRY_EVERY,
    SHARE_FLOOR,
)
from rqcrawl.frontier import keys, scripts
from rqcrawl.frontier.bloom import batches
from rqcrawl.frontier.messages import (
    Child,
    Children,
    Ended,
    Ending,
    KeptLink,
    Outgoing,
    Readmitted,
    Released,
    Slot,
    pairs,
)
from rqcrawl.frontier.records import skip_template
from rqcrawl.frontier.shards import connect
from rqcrawl.frontier.sitemaps import target
from rqcrawl.parse.urls import host_of

# Redis work per child besides its k bit operations (a budget check, its queue and its key's
# schedule, or the look-ups of a known child), in the bit operations of
# bloom.MAX_POSITIONS: sizes admission batches.
CHILD_COST = 6
NEEDS_PAGES = 2  # what scripts.FINISH returns first when this shard must take pages


@dataclass(frozen=True)
class LevelView:
    """What the level coordinator reads of one shard (rqcrawl.frontier.levels): its level,
    the least depth it has pending (None: none), its in-flight, waiting, outbox and held-back
    counts, and `version`, which changes with every admission and every URL given back, so
    two equal views mean nothing moved."""

    level: int
    lowest: int | None
    in_flight: int
    held: int
    outbox: int
    held_back: int
    version: tuple[int, int, int]
    halted: bool


class Admission:
    """How URLs enter the crawl and end (CrawlState's part): seeds, links, sitemaps,
    requisites, revisits and other shards' links, through the Bloom filter, the budgets and
    the levels."""

    reap_tried_at = float("-inf")  # when this process's finish last tried the recovery lock

    def seed_step(self, urls: list[str], priority: int = 0) -> tuple[int, Released]:
        """Admit `urls` at depth 0 and `priority` (budgets apply, trap rules do not) and
        release what is due; returns how many were new to the crawl, and the released
        URLs."""
        self.redis.hsetnx(self.keys.counters, keys.STARTED_AT, repr(time.time()))
        ended = self._end("", Ending({}, None, [(None, u) for u in urls], 0, priority))
        return ended.admitted, ended.released

    def admit_listed(self, children: Children, depth: int, priority: int, source: str) -> Ended:
        """Admit `children` at `depth` and `priority` like a page's links without ending any
        URL: a sitemap's URLs, noted as coming from `source`."""
        return self._end("", Ending({}, None, children, depth, priority), source)

    def hold_sitemaps(
        self, entries: Iterable[tuple[str, str]], priority: int, cap: int
    ) -> tuple[int, Released]:
        """Hold sitemap entries (site, entry) at depth 0 (scripts.HOLD_SITEMAPS: once each,
        at most `cap` per site) and release what is due; returns how many the cap refused,
        and the released URLs."""
        triples = [part for site, e in entries for part in (site, self.key_of(e), e)]
        _, capped, *released = scripts.HOLD_SITEMAPS(
            self.redis, tail_args=triples, sitemaps=self.keys.sitemaps, cap=cap,
            priority=priority, **self.frontier_names(),
        )  # fmt: skip
        return capped, pairs(released)

    def hold_requisites_step(self, entries: list[str], depth: int, priority: int) -> Released:
        """Hold requisite entries at `depth` and `priority`, each once per crawl
        (scripts.HOLD_REQUISITES), and release what is due. With shards, those of another
        shard's hosts are not held (counted as cut by the caller): their host's gate lives
        there."""
        mine = [e for e in entries if self.shard_of(e) == self.index]
        if not mine:
            return []
        key_entries = [part for e in mine for part in (self.key_of(e), e)]
        _, *released = scripts.HOLD_REQUISITES(
            self.redis, tail_keys=self.bloom.script_keys,
            tail_args=[*key_entries, *self.bloom.flat_positions(mine)], depth=depth,
            priority=priority, n=len(mine), shard_bits=self.bloom.shard_bits,
            k=self.bloom.hashes, size=self.bloom.size, **self.frontier_names(),
        )  # fmt: skip
        return pairs(released)

    def expect_robots_sitemaps(self, sites: Iterable[str], priority: int) -> None:
        """Mark seed `sites` whose robots.txt's sitemaps are to be read (at `priority`), by
        the job that fetches it (Frontier.sitemaps_named); a site marked before keeps its."""
        with self.redis.pipeline(transaction=False) as pipe:
            for site in sites:
                pipe.hsetnx(self.keys.sitemaps, f"robots|{site}", priority)
            pipe.execute()

    def take_robots_sitemaps(self, site: str) -> int | None:
        """The priority of `site`'s mark (expect_robots_sitemaps), taken (deleted, in one
        transaction: once); None when the site has none (not a seed site, or taken). Other
        sites leave nothing behind."""
        with self.redis.pipeline() as pipe:
            pipe.hget(self.keys.sitemaps, f"robots|{site}")
            pipe.hdel(self.keys.sitemaps, f"robots|{site}")
            mark, taken = pipe.execute()
        return int(mark) if taken else None

    def take_sitemap_urls(self, site: str, n: int, cap: int) -> int:
        """How many of `n` more sitemap URLs `site` may still give (at most `cap` admitted
        in all): reserved now, the unadmitted given back by `return_sitemap_urls`."""
        total = self.redis.hincrby(self.keys.sitemaps, f"urls|{site}", n)
        taken = max(0, n - max(0, total - cap))
        if taken < n:
            self.return_sitemap_urls(site, n - taken)
        return taken

    def return_sitemap_urls(self, site: str, n: int) -> None:
        """Give back `n` URLs of `site`'s sitemap cap: taken but not admitted (known ones,
        refused ones, or past the cap), so that a sitemap read again costs nothing."""
        if n:
            self.redis.hincrby(self.keys.sitemaps, f"urls|{site}", -n)

    def finish_step(self, url: str, ending: Ending) -> Ended:
        """End `url` for good with what `ending` writes (a refused child is recorded once as
        skipped)."""
        return self._end(url, ending)

    def inherited(self, priority: int) -> int:
        """The priority of a page's links: `priority_share` of the page's, rounded toward 0
        (so a seed's priority fades with the clicks from it unless the share is 1)."""
        return int(priority * self.cfg.priority_share)

    def _end(self, done: str, ending: Ending, source: str = "") -> Ended:
        """End `done` (unless '') and admit the children of `ending`, in batches of bounded
        Redis time, the URL ending with the last one (see the module docstring). Links to
        other shards' hosts go to the outbox with the last one."""
        depth = ending.child_depth
        children = [c for c in ending.children if not self.known.sent_at(c[1], depth)]
        children, foreign = self._split(children, ending, source)
        parts = list(batches(children, self.bloom.hashes + CHILD_COST)) or [[]]
        admitted, released, sent = 0, [], 0
        for part in parts[:-1]:  # (the last call, which writes the record, checks the digest)
            only = replace(ending, counts={}, record=None, slot=None, links=None, cut=(),
                           digest=b"")  # fmt: skip
            ended = self._finish_call(done, False, only, part, [], source)
            if ended is None:  # a stale job: the URL ended meanwhile, its links are not ours
                return Ended(admitted, released)
            admitted, released = admitted + ended.admitted, released + ended.released
            sent += ended.sent
        last = self._finish_call(done, True, ending, parts[-1], foreign, source)
        if last is None:
            return Ended(admitted, released)
        return replace(last, admitted=admitted + last.admitted,
                       released=released + last.released, sent=sent + last.sent)  # fmt: skip

    def _split(
        self, children: Children, ending: Ending, source: str
    ) -> tuple[Children, list[Outgoing]]:
        """The children of this shard's hosts, and the others for the outbox."""
        if self.shards is None:
            return children, []
        local, foreign = [], []
        for verdict, url in children:
            shard = self.shard_of(url)
            if shard == self.index:
                local.append((verdict, url))
            else:
                depth, priority = ending.child_depth, ending.child_priority
                foreign.append(Outgoing(shard, priority, depth, verdict, url, source, ending.via))
        return local, foreign

    def shard_of(self, url: str) -> int:
        """The shard of the host of `url` (placed by its politeness key)."""
        host = host_of(target(url))
        return self.shards.index_of(host, self.gate_key(host)) if self.shards else self.index

    def _links(self, links: Children | None) -> str:
        """A page's links as the finish step keeps them with a held-back record: a JSON list
        of "shard verdict url" ('' for none)."""
        if not links:
            return ""
        return json.dumps([KeptLink(self.shard_of(u), v, u).encode() for v, u in links])

    def _finish_call(
        self,
        done: str,
        final: bool,
        ending: Ending,
        children: Children,
        foreign: list[Outgoing],
        source: str,
    ) -> Ended | None:
        """One run of scripts.FINISH; None if `done` had already ended (a stale job)."""
        while True:
            reply = self._finish_script(done, final, ending, children, foreign, source)
            if reply[0] != NEEDS_PAGES:
                break
            self.take_pages(reply[1])  # (then: how many it needs)
        ok, admitted, reap_due, level_up, sent, settling, next_at, dup, *released = reply
        if not ok:  # the script stopped before the Bloom filter (the URL had ended)
            return None
        if self.remembers and not dup:  # (a duplicate's links were not admitted)
            links = [*(u for _, u in children), *(o.url for o in foreign)]
            self.known.note(links, ending.child_depth)
        return Ended(
            admitted, pairs(released), bool(reap_due), bool(level_up), sent, bool(settling),
            float(next_at), dup.decode(),
        )  # fmt: skip

    def _finish_script(
        self,
        done: str,
        final: bool,
        ending: Ending,
        children: Children,
        foreign: list[Outgoing],
        source: str,
    ) -> list:
        """One run of scripts.FINISH, its reply as is."""
        k, record, urls = self.keys, ending.record, [u for _, u in children]
        tail: list = []
        for verdict, u in children:
            host = host_of(target(u))
            tail += Child(verdict, self.gate_key(host), host, u).encode()
        return scripts.FINISH(
            self.redis,
            tail_keys=self.bloom.script_keys,
            tail_args=[*tail, *self.bloom.flat_positions(urls)],
            reap_lock=k.reap_lock, host_pages=k.host_pages, revisiting=k.revisiting,
            sitemapped=k.sitemapped, via=k.via, digests=k.digests, done=done, final=int(final),
            digest=ending.digest,
            marks=ending.marks(),
            increments=" ".join(f"{name} {n}" for name, n in ending.counts.items() if n),
            record=json.dumps(record, separators=(",", ":")) if record else "",
            rec_depth=record["depth"] if record else -1,
            child_depth=ending.child_depth,
            child_priority=ending.child_priority,
            source=source,
            child_via=ending.via,
            links=self._links(ending.links) if final else "",
            cut=self._links(ending.cut) if final else "",
            slot=(ending.slot or Slot(self.key_of(done))).encode() if final and done else "",
            shard_bits=self.bloom.shard_bits,
            k=self.bloom.hashes,
            reap_every=self._reap_try() if final and done else 0,
            max_pages=self.cfg.max_pages,
            max_host_pages=self.cfg.max_pages_per_host,
            max_host_share=repr(self.cfg.max_host_share),
            share_floor=SHARE_FLOOR,
            skip_record=skip_template(ending.child_depth, source),
            skip_prefix=keys.SKIPPED,
            n=len(children),
            size=self.bloom.size,
            foreign=json.dumps([o.encode() for o in foreign]) if foreign else "",
            others=self.admitted_elsewhere(),
            **self.frontier_names(),
        )  # fmt: skip

    def _reap_try(self) -> int:
        """REAP_EVERY: this finish tries the recovery pass's lock; or 0 (it does not) when
        this process tried less than REAP_TRY_EVERY ago (the lock is free once a REAP_EVERY:
        trying it at each end was a write a page)."""
        now = time.monotonic()
        if now - self.reap_tried_at < REAP_TRY_EVERY:
            return 0
        self.reap_tried_at = now
        return REAP_EVERY

    def take_pages(self, need: int) -> None:
        """Take at least `need` pages of max_pages from the crawl's first shard (a block
        when it has enough left) for this shard to admit; when it has fewer, note that it
        has none left, so that this shard admits what it holds and then refuses. Not
        atomic across the two servers: a process killed in between loses its block (the
        crawl then admits fewer, never more, than max_pages)."""
        home = self.redis if self.index == 0 else connect(self.cfg.shards[0])
        given = scripts.GRANT_PAGES(
            home, counters=self.keys.counters, need=need, block=PAGE_BLOCK,
            shards=len(self.cfg.shards), max_pages=self.cfg.max_pages,
        )  # fmt: skip
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hincrby(self.keys.counters, keys.PAGES_ALLOWED, given)
            if given < need:
                pipe.hset(self.keys.counters, keys.PAGES_OUT, 1)
            pipe.execute()

    def admitted_elsewhere(self) -> int:
        """The URLs the other shards of the crawl admitted, as read at most OTHERS_EVERY
        ago (0 unless max_host_share applies over shards): a host's share is of the whole
        crawl's admitted URLs."""
        if self.shards is None or not self.cfg.max_host_share:
            return 0
        read_at, others = self.others_read
        if time.monotonic() - read_at < OTHERS_EVERY:
            return others
        counts = [
            connect(url).hget(self.keys.counters, keys.ADMITTED)
            for i, url in enumerate(self.cfg.shards)
            if i != self.index
        ]
        others = sum(int(n or 0) for n in counts)
        self.others_read = (time.monotonic(), others)
        return others

    def readmit(self, due: Iterable[tuple[str, int, int]]) -> tuple[int, Released]:
        """Put URLs due for a revisit (url, depth, priority) back in their keys' queues,
        bypassing the Bloom filter, except those already waiting for their revisit or in
        flight, and release what is due; returns how many were readmitted, and the released
        URLs."""
        entries = [Readmitted(p, d, self.key_of(url), url).encode() for url, d, p in due]
        added, *released = scripts.READMIT(
            self.redis, tail_args=entries, revisiting=self.keys.revisiting,
            **self.frontier_names(),
        )  # fmt: skip
        return added, pairs(released)

    def admit(self, links: list[Outgoing]) -> Ended:
        """Admit links from the outbox (another shard's, or this one's links sent again one
        deeper) as if found here: the Bloom filter makes a second admission a no-op, and
        lowers a known URL found shorter."""
        ended = Ended(0, [])
        by_origin: dict[tuple[int, int, str, str], Children] = {}
        for o in links:
            origin = (o.depth, o.priority, o.source, o.via)
            by_origin.setdefault(origin, []).append((o.verdict, o.url))
        for (depth, priority, source, via), children in by_origin.items():
            step = self._end("", Ending({}, None, children, depth, priority, via), source)
            ended = Ended(ended.admitted + step.admitted, ended.released + step.released)
        return ended

    def read_outbox(self, token: str, limit: int) -> list[Outgoing] | None:
        """Take the outbox's drain lock as `token` and read its first `limit` links; None
        when another drain holds the lock."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(self.keys.outbox_lock, token, nx=True, ex=OUTBOX_LOCK)
            pipe.lrange(self.keys.outbox, 0, limit - 1)
            locked, raw = pipe.execute()
        return [Outgoing.parse(r) for r in raw] if locked else None

    def trim_outbox(self, token: str, n: int) -> int | None:
        """Drop the `n` links read under `token` (all admitted) and free the lock, if the
        lock is still `token`'s: the links left in the outbox then; None (the lock stays)
        otherwise (see scripts.TRIM_OUTBOX)."""
        k = self.keys
        trimmed = scripts.TRIM_OUTBOX(
            self.redis, outbox=k.outbox, lock=k.outbox_lock, pending=k.pending,
            token=token, n=n,
        )  # fmt: skip
        return int(trimmed) - 1 if trimmed else None

    def level_view(self) -> LevelView:
        """This shard as the level coordinator sees it, in one round trip."""
        k = self.keys
        with self.redis.pipeline(transaction=False) as pipe:
            fields = (keys.LEVEL, keys.ADMITTED, keys.PUT_BACK, keys.PAUSED_AT, keys.HELD)
            pipe.hmget(k.counters, *fields)
            pipe.hgetall(k.pending)
            pipe.hlen(k.inflight)
            pipe.llen(k.outbox)
            pipe.hlen(k.spec)
            (level, admitted, put_back, paused, held), pending, flying, outbox, back = (
                pipe.execute()
            )
        depths = [int(d) for d, n in pending.items() if int(n) > 0]
        version = (int(admitted or 0), int(put_back or 0), sum(int(n) for n in pending.values()))
        return LevelView(
            int(level or 0), min(depths, default=None), flying, int(held or 0), outbox, back,
            version, paused is not None,
        )  # fmt: skip

    def advance_step(self, level: int) -> tuple[bool, Released]:
        """Raise this shard's level to `level` (scripts.ADVANCE) and go on settling: whether
        records are left to settle, and the released URLs."""
        _, settling, *released = scripts.ADVANCE(self.redis, level=level, **self.frontier_names())
        return bool(settling), pairs(released)

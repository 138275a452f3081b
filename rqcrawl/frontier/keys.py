"""The names of everything a crawl keeps in Redis: its keys and the fields of its counters.

This is the only place that spells them (with the Lua of rqcrawl.frontier.scripts, which receives
the
keys by name); rqcrawl.frontier.state changes the state they name. Every key of a crawl carries the
crawl's hash tag, so that one crawl lives in one Redis Cluster slot and `purge` can find
exactly its own keys.
"""

from __future__ import annotations

import hashlib
import re

QUEUE_NAME = "crawl"  # the RQ queue of every crawl's jobs
RENDER_QUEUE = "crawl-render"  # the RQ queue of pages a browser renders (rqcrawl.render.browser)
CRAWLS = "rqcrawl:crawls"  # set of crawl names known to this Redis

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def valid_crawl_name(name: str) -> bool:
    """Names go inside key names and RQ job ids, which allow only letters, digits, _ and -.
    (fullmatch: `$` would let a final newline through.)"""
    return bool(_NAME.fullmatch(name))


class CrawlKeys:
    """The Redis keys of one crawl, `rqcrawl:{crawl}:part`."""

    def __init__(self, crawl: str):
        self.crawl = crawl
        self.prefix = f"rqcrawl:{{{crawl}}}:"  # every key of the crawl starts with it
        self.config = self._key("config")  # string: the crawl's settings (JSON)
        self.counters = self._key("counters")  # hash: the fields below
        self.host_pages = self._key("host_pages")  # hash: host -> admitted, "kind|host" -> n
        # Admitted URLs wait in one sorted set per politeness key (a host, or "ip:ADDR"): the
        # key's name is `qprefix` + key (see lua/frontier.lua for all of the below)
        self.qprefix = self._key("q", "")
        self.qkeys = self._key("qkeys")  # set: the keys that have URLs waiting
        self.ready = self._key("ready")  # zset: key -> when its next request may start
        self.blocked = self._key("blocked")  # set: keys whose first URL waits for the level
        self.pending = self._key("pending")  # hash: depth -> URLs not yet ended at it
        self.spec = self._key("spec")  # hash: url -> depth of a held-back record
        self.sprefix = self._key("spec", "")  # + depth: hash url -> held-back record (JSON)
        self.lowered = self._key("lowered")  # hash: url -> depth of an in-flight URL found
        # shorter
        self.parked = self._key("parked")  # hash: url -> key of a URL waiting in `later`
        self.lprefix = self._key("leases", "")  # + key: zset url -> expiry of a slot in use
        # (or of a waiting robots.txt hop's, scripts.HOP_TURN)
        self.inflight = self._key("inflight")  # hash: url -> messages.InFlight
        self.later = self._key("later")  # zset: in-flight URLs parked until their score
        self.leased = self._key("leased")  # zset: url -> lease expiry of the job holding it
        self.items = self._key("items")  # stream: one record per ended URL
        # hash: follower -> JSON {file, offset} of the batch it writes (frontier.delivery)
        self.followers = self._key("followers")
        self.delivered = self._key("delivered")  # hash: follower -> records it delivered
        # + follower: a lock with a TTL held by the running follower of that name (its token
        # "host:pid:random"), so that a second one on the same output is refused
        self.fprefix = self._key("following", "")
        self.reap_lock = self._key("reap")  # string with a TTL: a recovery pass ran lately
        self.bloom = self._key("bloom")  # prefix of the Bloom filter's shards (`:0`, `:1`...)
        self.hosts = self._key("hosts")  # hash: key -> politeness "ready fetch backoff base"
        self.robots = self._key("robots")  # hash: site -> robots.txt verdict (JSON)
        self.forked = self._key("forked")  # string with a TTL: a forking worker ran a job
        self.waker = self._key("waker")  # string with a TTL: a waker job is queued or running
        self.revisiting = self._key("revisiting")  # set: URLs readmitted until they end
        self.pump_lock = self._key("pump")  # string with a TTL: a pump ran lately
        self.outbox = self._key("outbox")  # list of messages.Outgoing: links to other shards
        self.outbox_lock = self._key("outbox_lock")  # string with a TTL: the drain's token
        self.synced = self._key("synced")  # string with a TTL: see CrawlState.replicated
        self.sitemapped = self._key("sitemapped")  # set: URLs a sitemap admitted, until they end
        # hash: url -> JSON list of the redirects that led to it (rqcrawl.fetch.hops), until it ends
        self.via = self._key("via")
        # hash: sitemap document URL -> 1 (held once), "docs|site" and "urls|site" -> how many
        # documents were held and page URLs admitted for the site (rqcrawl.frontier.sitemaps' caps)
        self.sitemaps = self._key("sitemaps")
        # hash: a fetched page's body digest (SHA-1, 20 bytes) -> the first URL that had it
        # (detect_duplicates: rqcrawl.frontier.messages.Ending)
        self.digests = self._key("digests")

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def host_leases(self, key: str) -> str:
        """zset: the slots in use of politeness key `key` (URL, or a waiting robots.txt hop's
        holder -> lease expiry)."""
        return self.lprefix + key

    def robots_fetcher(self, site: str) -> str:
        """string with a TTL: the job fetching the site's robots.txt (one at a time)."""
        return self._key("robots_claim", site)

    def retry_reason(self, url: str) -> str:
        """string with a TTL: why a URL waits for its next attempt (an error, a Retry-After),
        for `rqcrawl inspect`; it expires soon after the attempt is due."""
        return self._key("why", hashlib.sha1(url.encode("utf-8")).hexdigest()[:20])


# Fields of a crawl's counters hash. Time fields hold epoch seconds.
STARTED_AT = "started_at"  # set once when first seeded: the crawl's identity
LAST_AT = "last_at"  # when a URL last ended
LAST_CLAIM_AT = "last_claim_at"  # when a job of the crawl last started
PAUSED_AT = "paused_at"  # set while halted (also when cancelled)
CANCELLED_AT = "cancelled_at"
PURGING_AT = "purging_at"  # set on every shard before a purge deletes any (control.purge)
LEVEL = "level"  # the settled level: no URL of depth <= it + 1 can be found shorter
SETTLED = "settled"  # the deepest depth whose held-back records were all emitted
HELD = "held"  # admitted URLs waiting in their keys' queues
LOWERED = "lowered"  # depths lowered when a shorter path turned up (exact depth)
SHARD = "shard"  # this Redis's index among the crawl's shards (rqcrawl.frontier.shards)
ADMITTED = "admitted"
# max_pages over shards (state.CrawlState.take_pages): the first shard's count of pages granted
# to every shard, a shard's own grants, and its note that the first shard has none left.
PAGES_GRANTED = "pages_granted"
PAGES_ALLOWED = "pages_allowed"
PAGES_OUT = "pages_out"
OUTBOXED = "outboxed"  # links a shard sent to other shards through its outbox
FETCHED = "fetched"
FAILED = "failed"
RETRIES = "retries"
RECOVERED = "recovered"  # URLs requeued after their worker died
DROPPED = "dropped"  # URLs dropped by a cancel
PUT_BACK = "put_back"  # URLs given back unfetched while paused
REVISITS = "revisits"  # URLs readmitted from the task table for a revisit
HOOK_ERRORS = "hook_errors"
SITEMAPS = "sitemaps"  # sitemap documents read
SITEMAP_URLS = "sitemap_urls"  # page URLs found in sitemaps (before dedup and budgets)
SITEMAP_LASTMOD = "sitemap_lastmod"  # known URLs made due early by a sitemap's <lastmod>
REQUISITES = "requisites"  # requisites admitted (rqcrawl.frontier.requisites), once each
REQUISITES_ARCHIVED = "requisites_archived"  # requisites fetched and archived
REQUISITE_BYTES = "requisite_bytes"  # body bytes of the archived requisites
REQUISITES_CUT = "requisites_cut"  # requisites past max_requisites_per_page, not fetched
BYTES = "bytes"  # body bytes of fetched pages
RECORD_BYTES = "record_bytes"  # bytes of records appended to the records stream, ever
TRIMMED_BYTES = "trimmed_bytes"  # bytes of those trimmed from it once delivered
OUTLINKS = "outlinks"  # links found on fetched pages (before rules, scope and budgets)
SEED_PAGES = "seed_pages"  # pages fetched at depth 0 (seeds)
SEED_OUTLINKS = "seed_outlinks"  # links found on them
LATENCY_MS = "latency_ms"  # sum of fetch durations

# Families of fields, "prefix:name"
SKIPPED = "skipped:"  # URLs refused or not for us, by reason
LINKS = "links:"  # links dropped before admission, by rule
FAILED_BY = "failed:"  # failed URLs, by reason
RATE = "rate:"  # fetched pages per RATE_BUCKET seconds, by bucket number
LATENCY_LE = "latency_le:"  # fetches per latency bucket, by upper bound
SITEMAP_PROBLEMS = "sitemap_problems:"  # sitemap documents not read, or cut, by reason
REQUISITE_PROBLEMS = "requisite_problems:"  # requisites not archived, by reason


def skipped(reason: str) -> str:
    return SKIPPED + reason


def links_dropped(rule: str) -> str:
    return LINKS + rule


def sitemap_problem(reason: str) -> str:
    return SITEMAP_PROBLEMS + reason


def requisite_problem(reason: str) -> str:
    return REQUISITE_PROBLEMS + reason


def failed_by(reason: str) -> str:
    return FAILED_BY + reason


HOST_SKIPPED = "skipped"  # with FETCHED and FAILED, the kinds counted per host
# Also per host, for its pace in `status` and `hosts` (stats.host_pace): the URLs that ended
# after a request, their requests beyond one a URL (retried attempts: a URL's first request
# costs no write of its own) and the time those took in ms (timeouts and failed requests
# included; an earlier attempt counts as long as the last).
HOST_TIMED = "timed"
HOST_RETRIED = "retried"
HOST_BUSY_MS = "busy_ms"


def per_host(kind: str, host: str) -> str:
    """A field of `host_pages`: the host's FETCHED, FAILED, HOST_SKIPPED, HOST_TIMED,
    HOST_RETRIED or HOST_BUSY_MS count."""
    return f"{kind}|{host}"

"""How a crawl behaved toward the hosts of `rqcrawl bench --web`, judged from their access
logs alone (webserver.Entry), as a site owner would: the rule checks and the politeness floor.

The checks (each PASS, or FAIL with the offending log lines):

- robots.txt first: no page request to a host before a robots.txt answer it may crawl by
  (2xx or 4xx, after its redirects; RFC 9309: a 5xx, a 429 or no answer means wait);
- nothing Disallowed: no request for a URL its host's robots.txt disallows to the request's
  User-Agent (redirect hops and refresh targets included);
- pace, robots.txt hops included: on a host without Crawl-delay, each request starts at least
  `delay` after the previous one ended; robots.txt's redirect hops count as requests, and only
  the request right after robots.txt's final answer may follow at once (robots.txt takes no
  turn of the pace, rqcrawl.fetch.politeness);
- Crawl-delay: the same on hosts with a Crawl-delay, at max(delay, Crawl-delay);
- Retry-After: a host's next request starts at least Retry-After after the answer that asked;
- nofollow: no request of a page linked only through nofollow (rel or meta);
- one fetch per logical page: at most one 2xx/3xx answer per page, session and tracking
  parameters stripped (webhosts.logical_page).

The politeness floor is the least time any polite crawler needs for the slowest host alone,
with the requests this crawl made to it: per host, the sum of its answers' own durations
(arrival to last byte at the server: its latency and transfer; nothing for a request it never
answered) and of the waits its pace asks between two of them (max(delay, Crawl-delay), or the
Retry-After of the answer before when longer; none after a robots.txt request), the largest
over the hosts. It leaves out everything else: the time to discover a host's pages through
other hosts, start-up, scheduling, timeouts on hanging requests. A crawl's wall time over the
floor says what the crawler adds to what the slowest host's politeness demands.

The floor with back-off is the same, except that the waits follow the adaptive throttle that
a host pushing back is owed (rqcrawl's documented rule, docs/howto/politeness.md): a 429 or
503 (or any Retry-After) at least doubles the host's extra delay (to 2 x its pace at least),
each success halves it until it falls below the pace; and a host whose robots.txt never gave
a usable answer (2xx or 4xx) is owed `patience` seconds (rqcrawl's robots_patience_idle: RFC
9309's complete disallow while robots.txt is unreachable, asked again meanwhile, its pages
failed after once nothing else is left). A crawler that slows down for a host that asks it
to cannot beat this one; the plain floor assumes it does not slow down at all.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from protego import Protego

from .webhosts import NOFOLLOWED, Host, is_robots, logical_page
from .webserver import Entry

TOLERANCE = 0.005  # seconds: the server's clock reads around its own socket writes
SHOWN = 5  # offending lines printed per check
BACKOFF_MIN = 0.25  # the least extra delay of a host that pushed back, and the cap (defaults:
BACKOFF_CAP = 120.0  # rqcrawl's max_backoff_delay), as the frontier's free_slot applies them


@dataclass
class Check:
    """One rule's verdict and the log lines that break it."""

    name: str
    offending: list[str]
    applies: int  # requests or pairs the rule looked at

    @property
    def passed(self) -> bool:
        return not self.offending

    def lines(self) -> list[str]:
        verdict = "PASS" if self.passed else f"FAIL ({len(self.offending)})"
        out = [f"{verdict:>11}  {self.name} ({self.applies} checked)"]
        out += [f"{'':13}{line}" for line in self.offending[:SHOWN]]
        if len(self.offending) > SHOWN:
            out.append(f"{'':13}... and {len(self.offending) - SHOWN} more")
        return out


class Judge:
    """The checks and the floor of one crawl's log over `hosts`, times shown from `t0`."""

    def __init__(
        self, hosts: list[Host], log: list[Entry], delay: float, t0: float, patience: float = 0.0
    ):
        self.hosts = hosts
        self.delay, self.patience = delay, patience
        self.t0 = t0
        self.by_host: dict[int, list[Entry]] = defaultdict(list)
        for entry in sorted(log, key=lambda e: e.start):
            self.by_host[entry.host].append(entry)
        self.rules = {h.index: Protego.parse(h.robots_body() or "") for h in hosts}

    def show(self, e: Entry, note: str = "") -> str:
        """An offending request as a log line: times from the crawl's start."""
        host = self.hosts[e.host].origin.removeprefix("http://")
        status = e.status if e.status is not None else "no answer"
        end = f"{e.end - self.t0:.3f}" if e.end else "-"
        text = f"+{e.start - self.t0:.3f}..{end} {host} GET {e.target} -> {status}"
        return text + (f" ({note})" if note else "")

    def checks(self) -> list[Check]:
        return [
            self.robots_first(), self.disallowed(), self.pace(crawl_delay=False),
            self.pace(crawl_delay=True), self.retry_after(), self.nofollow(), self.once(),
        ]  # fmt: skip

    def pages(self, index: int) -> list[Entry]:
        return [e for e in self.by_host[index] if not is_robots(logical_page(e.target))]

    def robots_first(self) -> Check:
        bad, n = [], 0
        for index, entries in self.by_host.items():
            usable_at = min(
                (e.end for e in entries if is_robots(e.target) and _usable(e.status)),
                default=float("inf"),
            )
            for e in self.pages(index):
                n += 1
                if e.start < usable_at:
                    bad.append(self.show(e, "before any usable robots.txt answer"))
        return Check("robots.txt first", bad, n)

    def disallowed(self) -> Check:
        bad, n = [], 0
        for index, _ in self.by_host.items():
            origin = self.hosts[index].origin
            for e in self.pages(index):
                n += 1
                if not self.rules[index].can_fetch(origin + e.target, e.user_agent):
                    bad.append(self.show(e, f"Disallowed for {e.user_agent[:30]!r}"))
        return Check("nothing Disallowed", bad, n)

    def pace(self, crawl_delay: bool) -> Check:
        """Gaps between a host's requests (robots.txt hops included) on the hosts with (or
        without) a Crawl-delay."""
        bad, n = [], 0
        for index, entries in self.by_host.items():
            host = self.hosts[index]
            if bool(host.crawl_delay()) != crawl_delay:
                continue
            wanted = max(self.delay, host.crawl_delay())
            for before, after in zip(entries, entries[1:], strict=False):
                if is_robots(before.target) and before.status not in (301, 302):
                    continue  # robots.txt's final answer takes no turn
                n += 1
                gap = after.start - (before.end or before.start)
                if gap < wanted - TOLERANCE:
                    bad.append(
                        self.show(after, f"{gap:.3f} s after the previous, wants {wanted:g}")
                    )
        name = "Crawl-delay" if crawl_delay else "pace, robots.txt hops included"
        return Check(name, bad, n)

    def retry_after(self) -> Check:
        bad, n = [], 0
        for entries in self.by_host.values():
            for before, after in zip(entries, entries[1:], strict=False):
                if before.retry_after is None:
                    continue
                n += 1
                gap = after.start - before.end
                if gap < before.retry_after - TOLERANCE:
                    bad.append(
                        self.show(after, f"{gap:.3f} s after Retry-After {before.retry_after:g}")
                    )
        return Check("Retry-After", bad, n)

    def nofollow(self) -> Check:
        bad = [
            self.show(e, "linked only through nofollow")
            for index in self.by_host
            for e in self.pages(index)
            if logical_page(e.target) in NOFOLLOWED
        ]
        return Check("nofollow", bad, sum(len(self.pages(i)) for i in self.by_host))

    def once(self) -> Check:
        bad, n = [], 0
        for index in self.by_host:
            fetched: dict[str, list[Entry]] = defaultdict(list)
            for e in self.pages(index):
                if e.status is not None and 200 <= e.status < 400:
                    fetched[logical_page(e.target)].append(e)
            n += len(fetched)
            for page, entries in fetched.items():
                if len(entries) > 1:
                    bad += [self.show(e, f"{len(entries)} fetches of {page}") for e in entries]
        return Check("one fetch per logical page", bad, n)

    def floor(self, backoff: bool = False) -> tuple[float, int]:
        """The politeness floor in seconds and the host that sets it (see the module's doc),
        with the back-off owed to hosts that push back when `backoff`."""
        return max(((self.host_floor(i, backoff), i) for i in self.by_host), default=(0.0, -1))

    def host_floor(self, index: int, backoff: bool = False) -> float:
        """One host's requests, answered at their own durations and spaced at its pace (and
        the back-off its answers call for, when `backoff`)."""
        entries = self.by_host[index]
        pace = max(self.delay, self.hosts[index].crawl_delay())
        total = extra = 0.0
        for i, e in enumerate(entries):
            if e.status is not None:
                total += e.end - e.start
            if backoff and not is_robots(e.target):
                extra = _backoff(extra, pace, e.status, e.retry_after)
            if i + 1 < len(entries) and not is_robots(e.target):
                total += max(pace, extra, e.retry_after or 0.0)
        if backoff and not any(_usable_robots(e) for e in entries):
            total = max(total, self.patience)
        return total

    def unvisited(self) -> list[int]:
        """The hosts none of whose pages was answered 2xx: the hosts the crawl lost (or, like
        a robots.txt that answers 5xx for good, had to leave)."""
        return [
            h.index
            for h in self.hosts
            if not any(e.status and 200 <= e.status < 300 for e in self.pages(h.index))
        ]

    def last_hosts(self, count: int) -> list[tuple[int, float, float, float]]:
        """The `count` hosts whose last answer came last: (host, first request, last answer,
        the host's own floor), times from t0: what the crawl's end waited for."""
        spans = [
            (i, es[0].start - self.t0, max(e.end or e.start for e in es) - self.t0)
            for i, es in self.by_host.items()
        ]
        spans.sort(key=lambda span: -span[2])
        return [(i, first, last, self.host_floor(i)) for i, first, last in spans[:count]]


def _backoff(extra: float, pace: float, status: int | None, retry_after: float | None) -> float:
    """The extra delay after an answer: doubled (at least 2 x the pace, at least the
    Retry-After) when the host pushes back, halved after a success, gone below the pace."""
    least = max(pace, BACKOFF_MIN)
    if status in (429, 503) or retry_after:
        return min(BACKOFF_CAP, max(2 * max(extra, least), retry_after or 0.0))
    if status is not None and status < 400 and extra:
        extra /= 2
        return extra if extra >= least else 0.0
    return extra


def _usable(status: int | None) -> bool:
    """A robots.txt answer a crawler may crawl by: 2xx, or 4xx other than 429."""
    return status is not None and (200 <= status < 300 or (400 <= status < 500 and status != 429))


def _usable_robots(e: Entry) -> bool:
    """A robots.txt answer that settles the site's rules: rules (2xx) or none (4xx)."""
    return (
        is_robots(e.target) and e.status is not None and 200 <= e.status < 500 and (e.status != 429)
    )

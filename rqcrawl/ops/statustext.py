"""A crawl's status (stats.status) as text: `rqcrawl status`, `list` and the progress line."""

from __future__ import annotations

import time

from rqcrawl.defaults import RECENT
from rqcrawl.ops.stats import OVER


def bloom_line(bloom: dict) -> str:
    """The filter in use and how full it is (rqcrawl.frontier.bloom)."""
    rate = f"est. false-positive rate {bloom['estimated_false_positive_rate']:.3g}"
    if bloom["kind"] == "native":
        return (
            f"native (BF.*): {bloom['estimated_items']:,} URLs of capacity "
            f"{bloom['capacity']:,} in {bloom['filters']} filter(s), {bloom['bytes']:,} bytes, "
            + rate
        )
    return f"lua: fill {bloom['fill_ratio']:.6f}, {rate}"


def render(s: dict) -> str:
    """Human-readable status, one fact per line."""
    dropped = ", ".join(f"{k} {v}" for k, v in sorted(s["links_dropped"].items())) or "none"
    return "\n".join(
        [
            f"crawl      {s['crawl']}: {s['state']}"
            + (f" (over {s['shards']} shards)" if s["shards"] > 1 else "")
            + (f" ({s['dropped']} URLs dropped)" if s["state"] == "cancelled" else "")
            + (f" ({next_visit(s)})" if s["state"] == "idle" else ""),
            *revisit_lines(s),
            f"admitted   {s['admitted']}",
            f"fetched    {s['fetched']} ({s['bytes']:,} bytes)",
            f"failed     {s['failed']}" + (f" ({reasons(s)})" if s["failed"] else ""),
            f"skipped    {s['skipped_total']} ({skip_reasons(s) or 'none'})",
            f"retries    {s['retries']} (+{s['recovered']} jobs recovered from dead workers)",
            f"in flight  {s['in_flight']} (queued, scheduled, running or deferred; "
            f"{s['deferred']} deferred for politeness)",
            *depth_lines(s),
            f"links      dropped: {dropped}",
            f"sitemaps   {sitemap_line(s['sitemaps'])}",
            f"hook       {s['hook_errors']} error(s)",
            f"speed      {s['pages_per_s']} pages/s over {s['elapsed_s']} s, "
            f"{s['recent_pages_per_s']} pages/s in "
            + (f"its last {RECENT} s" if s["state"] in OVER else f"the last {RECENT} s"),
            f"eta        {duration(s['eta_s'])}"
            + (" for the URLs admitted so far" if s["eta_s"] is not None else ""),
            f"bloom      {bloom_line(s['bloom'])}",
            *host_table(s),
            *robots_lines(s),
            *(f"WARNING    {w}" for w in s["warnings"]),
        ]
    )


def sitemap_line(maps: dict) -> str:
    problems = ", ".join(f"{k} {v}" for k, v in sorted(maps["problems"].items())) or "none"
    due = (
        f", {maps['lastmod_due']} revisits brought forward by <lastmod>"
        if maps["lastmod_due"]
        else ""
    )
    return f"{maps['read']} read, {maps['urls']} URLs listed{due}; not read: {problems}"


def depth_lines(s: dict) -> list[str]:
    """Waiting URLs and the depth: the settled level and the records held back until it
    moves on (exact depth), or first-found depth."""
    if s["exact_depth"]:
        return [
            f"held       {s['held']} (admitted, waiting for their host's turn)",
            f"level      {level_line(s)}; {s['held_back']} record(s) held back until it moves on",
        ]
    return [
        f"held       {s['held']} (admitted, waiting for their host's turn)",
        f"depth      first found, up to max depth {s['max_depth']}",
    ]


def level_line(s: dict) -> str:
    """The settled level L in words: the pages of depth < L have ended, so every URL of
    depth <= L + 1 (no deeper than max depth) is known at its shortest depth
    (rqcrawl.frontier.levels); once nothing is left, every depth is done."""
    level, deepest = s["level"], s["max_depth"]
    if s["state"] in ("finished", "idle"):
        return f"every depth done, 0 to max depth {deepest}"
    doing = "cancelled at" if s["state"] == "cancelled" else "being crawled:"
    return (
        f"{doing} depth {level} of 0-{deepest} (the pages above it have ended; every URL "
        f"to depth {min(level + 1, deepest)} is at its shortest depth)"
    )


def depth_progress(s: dict) -> str:
    """The depth part of a progress line: the level being crawled, when there are levels."""
    if s["exact_depth"]:
        return f"depth {s['level']}/{s['max_depth']}"
    return f"max depth {s['max_depth']}"


def next_visit(s: dict) -> str:
    at = s["next_visit_at"]
    if at is None:
        return "no visit scheduled"
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))
    return f"next visit at {when}, in {duration(max(0.0, at - time.time()))}"


def revisit_lines(s: dict) -> list[str]:
    if not s["revisit_s"]:
        return []
    if s["table_error"]:
        return [f"revisits   every {duration(s['revisit_s'])}; {s['table_error']}"]
    due = s["due"]
    return [
        f"revisits   every {duration(s['revisit_s'])} (adaptive); {s['known']} URLs known, "
        f"{s['revisits']} revisits so far",
        f"due        {due['now']} now, {due['hour']} within an hour, {due['day']} within a day",
    ]


def reasons(s: dict) -> str:
    """`http_404 3, timeout 1`: the failures by reason, most frequent first."""
    found = sorted(s["failed_by_reason"].items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{k} {v}" for k, v in found)


def skip_reasons(s: dict) -> str:
    """`robots_disallowed 1, redirected 2`: the skipped URLs by reason ("" if none)."""
    return ", ".join(f"{k} {v}" for k, v in sorted(s["skipped"].items()))


def skip_summary(s: dict) -> str:
    """`3 skipped (redirected 2, robots_disallowed 1)`: how many, and why."""
    why = skip_reasons(s)
    return f"{s['skipped_total']} skipped" + (f" ({why})" if why else "")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown: the crawl cannot move (see the warning)"
    minutes, sec = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{sec:02d}s" if hours else f"{minutes}m{sec:02d}s"


def host_table(s: dict) -> list[str]:
    """The hosts with the most time left (status's `hosts`), one aligned row each."""
    if not s["hosts"]:
        return []
    header = (
        "HOST", "ADMITTED", "FETCHED", "FAILED", "IN FLIGHT", "HELD", "RUNNING", "NEXT IN", "ETA"
    )  # fmt: skip
    rows = [header] + [
        (
            h["host"], str(h["admitted"]), str(h["fetched"]), str(h["failed"]),
            str(h["in_flight"]), str(h["held"]), str(h["running"]), f"{h['next_in_s']:.1f}s",
            duration(h["eta_s"]),
        )
        for h in s["hosts"]
    ]  # fmt: skip
    more = s["host_count"] - len(s["hosts"])
    title = f"hosts      {s['host_count']}" + (f" ({more} not shown)" if more > 0 else "")
    return [title, *("           " + line for line in aligned(rows))]


def robots_lines(s: dict) -> list[str]:
    """What the crawl waits for besides its hosts' pace: robots.txt files that do not
    answer, and until when at the latest."""
    return [
        f"robots.txt {w['site']} unavailable for {w['down_s']:.0f} s ({w['asks']} asks, "
        f"{w['error']}): asked again in {w['next_ask_in_s']:.0f} s; its pages fail at the "
        f"first failed ask after {w['gives_up_in_s']:.0f} s, after "
        f"{w['idle_gives_up_in_s']:.0f} s once they are all the crawl has left"
        for w in s["robots_waits"]
    ]


def aligned(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def summary(s: dict) -> str:
    """One line per refresh of `rqcrawl status --watch` when the output is not a terminal."""
    return (
        f"{s['crawl']}  {s['state']}  {s['fetched']}/{s['admitted']} fetched/admitted  "
        f"{s['pages_per_s']} pages/s ({s['recent_pages_per_s']} recent)  {s['failed']} failed  "
        f"{s['in_flight']} in flight  {s['held']} held  eta {duration(s['eta_s'])}"
    )


def table(rows: list[dict]) -> str:
    """`rqcrawl list`: one aligned row per crawl."""
    header = ("CRAWL", "STATE", "FETCHED/ADMITTED", "PAGES/S", "FAILED")
    cells = [header] + [
        (
            s["crawl"],
            s["state"],
            f"{s['fetched']}/{s['admitted']}",
            str(s["pages_per_s"]),
            f"{s['failed']} ({reasons(s)})" if s["failed"] else "0",
        )
        for s in rows
    ]
    return "\n".join(aligned(cells))

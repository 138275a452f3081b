"""Change detection end to end: a loopback site crawled with --revisit and --warc by a real
worker. Pages with an ETag or a Last-Modified answer 304 to the revisit's conditional GET, a
page whose only change is a timestamp is changed (a near duplicate: its similarity is high),
a page rewritten (with a link to a new
page) is changed, a page answering 404 is gone, a page failing with 500 is revisited after
twice its interval, a body at two URLs is recorded as a duplicate, unchanged revisits are
WARC revisit records, and the change feed gives what changed."""

from __future__ import annotations

import base64
import hashlib
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from helpers import read_jsonl, rqcrawl, seed_local, wait_until
from servers import HTTPSite, reply
from sqlalchemy import select
from test_warc import records as warc_records
from test_warc import warc_files

from rqcrawl import api
from rqcrawl.defaults import PUMP_EVERY
from rqcrawl.fetch.warc import IDENTICAL_PROFILE, NOT_MODIFIED_PROFILE
from rqcrawl.frontier import tasks
from rqcrawl.frontier.tasks import TASKS
from rqcrawl.workers.runner import LocalWorkers

ETAG = '"v1"'
LAST_MODIFIED = "Mon, 23 Nov 2026 12:00:00 GMT"
INDEX = b"".join(
    b'<a href="/%s">%s</a>' % (p, p)
    for p in (b"etag", b"lm", b"stamp", b"edit", b"dup1", b"dup2", b"gone", b"fail")
)
ARTICLE = (
    "<html><title>harbour</title><p>Updated {stamp}.</p><p>The harbour authority met to "
    "discuss the new breakwater. Engineers presented three designs, each balancing the cost "
    "of concrete against the height of the winter waves that reach the inner basin.</p></html>"
)
COPY = b'<html><p>the same text at two addresses</p><a href="/dupchild">c</a></html>'
PAGES = {"/", "/etag", "/lm", "/stamp", "/edit", "/dup1", "/dup2", "/child", "/dupchild"}
PAGES |= {"/gone", "/fail"}
INTERVAL = 2.0  # revisit_min = revisit_max: every page's interval


class Site:
    """The pages of PAGES; remembers the conditional headers each request sent."""

    def __init__(self) -> None:
        self.visits: dict[str, int] = defaultdict(int)
        self.conditional: dict[str, list[tuple]] = defaultdict(list)

    def handle(self, req) -> None:
        path, headers = req.path, req.headers
        self.visits[path] += 1
        n = self.visits[path]
        self.conditional[path].append(
            (headers.get("If-None-Match"), headers.get("If-Modified-Since"))
        )
        if path == "/etag":
            if headers.get("If-None-Match") == ETAG:
                reply(req, 304, b"", headers={"ETag": ETAG})
            else:
                body = b'<html><a href="/child">child</a> tagged</html>'
                reply(req, 200, body, headers={"ETag": ETAG})
        elif path == "/lm":
            if headers.get("If-Modified-Since") == LAST_MODIFIED:
                reply(req, 304, b"")
            else:
                reply(req, 200, b"<html>dated</html>", headers={"Last-Modified": LAST_MODIFIED})
        elif path == "/stamp":
            stamp = datetime(2026, 11, 23, 17, 0, tzinfo=UTC) + timedelta(seconds=n * 61)
            reply(req, 200, ARTICLE.format(stamp=stamp.isoformat()).encode())
        elif path == "/edit":
            words = "the first draft" if n == 1 else 'a wholly rewritten <a href="/fresh">story</a>'
            reply(req, 200, f"<html><p>{words}</p></html>".encode())
        elif path == "/gone" and n == 1:
            reply(req, 200, b"<html>here for now</html>")
        elif path == "/fail":
            reply(req, 500, b"broken")
        elif path in ("/dup1", "/dup2"):
            reply(req, 200, COPY)
        elif path in ("/", "/child", "/dupchild", "/fresh"):
            reply(req, 200, b"<html>" + (INDEX if path == "/" else b"leaf") + b"</html>")
        else:
            reply(req, 404, b"not found")


@pytest.mark.timeout(120)
def test_304s_timestamps_edits_duplicates_warc_revisits_and_the_change_feed(
    redis_url, conn, tmp_path
):
    settings = tmp_path / "revisit.toml"
    # No retries: every request of /fail is one failed visit.
    settings.write_text(f"revisit_min = {INTERVAL}\nrevisit_max = {INTERVAL}\nretries = 0\n")
    site, warc_dir = Site(), tmp_path / "warc"
    db = f"sqlite:///{tmp_path / 'tasks.db'}"

    def revisited_all() -> bool:
        second = {r["url"] for r in api.records(conn, "chg") if (r["visit"] or 0) >= 2}
        found = {r["url"] for r in api.records(conn, "chg") if r["visit"] == 1}
        second_visits = {u.removeprefix(http.base) for u in second} >= PAGES
        return second_visits and http.base + "/fresh" in found

    with HTTPSite(site.handle, max_requests=500, max_seconds=110) as http:
        seed_local(
            redis_url, http.base + "/", "chg", 2, "--revisit", "2s", "--db", db,
            "--config", str(settings), "--warc", str(warc_dir),
        )  # fmt: skip
        with LocalWorkers(redis_url, 1, log_dir=tmp_path):
            wait_until(revisited_all, 90, "a second visit of every page")
            rqcrawl(redis_url, "cancel", "chg")

    out = tmp_path / "all.jsonl"
    rqcrawl(redis_url, "export", "chg", "-o", str(out))
    by_path: dict[str, list[dict]] = defaultdict(list)
    for row in read_jsonl(out):
        by_path[row["url"].removeprefix(http.base)].append(row)
    first = {path: rows[0] for path, rows in by_path.items()}
    second = {path: rows[1] for path, rows in by_path.items() if len(rows) > 1}

    # Conditional GET: validators sent on the revisit only, a 304 unchanged, no body.
    for path, sent in (("/etag", (ETAG, None)), ("/lm", (None, LAST_MODIFIED))):
        assert site.conditional[path][:2] == [(None, None), sent]
        assert (second[path]["status"], second[path]["not_modified"]) == (304, True)
        assert (second[path]["change"], second[path]["bytes"]) == ("unchanged", None)
    assert {p: r["status"] for p, r in second.items() if r["not_modified"]} == {
        "/etag": 304,
        "/lm": 304,
    }
    assert site.conditional["/stamp"][1] == (None, None)  # it sent no validator
    assert len(by_path["/child"]) >= 2  # linked from /etag, revisited on its own schedule
    assert {r["depth"] for r in by_path["/child"]} == {2}

    # The second visit labels every page exactly: the failing page has no change to tell.
    assert {p: second[p]["change"] for p in PAGES} == dict.fromkeys(PAGES, "unchanged") | {
        "/edit": "changed",
        "/stamp": "changed",
        "/gone": "gone",
        "/fail": None,
    }
    assert [r["change"] for r in by_path["/fresh"]][:1] == ["new"]  # linked from the rewrite
    assert {(r["outcome"], r["status"]) for r in by_path["/fail"]} == {("failed", 500)}

    # The failing page's second visit waited 2x its interval; the table schedules the next
    # one 2**failures x the interval after its last visit.
    failed_at = [t for t, p in http.log if p == "/fail"]
    assert 2 * INTERVAL <= failed_at[1] - failed_at[0] < 2 * INTERVAL + PUMP_EVERY + 1.5
    with tasks.engine(db).connect() as table:
        row = table.execute(select(TASKS).where(TASKS.c.url == http.base + "/fail")).one()
    assert row.interval_s == INTERVAL and row.failures == row.visits >= 2
    last = failed_at[row.visits - 1]
    if row.state == "queued":  # taken by a pump since: next_visit is then its lease's end
        waited = (row.queued_at - last) / INTERVAL
        assert 2**row.failures <= waited < 2**row.failures + (PUMP_EVERY + 1.5) / INTERVAL
    else:
        waited = (row.next_visit - last) / INTERVAL
        assert 2**row.failures <= waited < 2**row.failures + 0.5, waited

    # Change detection: the digest decides; the similarity tells a timestamp from a rewrite.
    assert [r["change"] for r in by_path["/stamp"][:2]] == ["new", "changed"]
    assert not second["/stamp"]["not_modified"] and second["/stamp"]["similarity"] >= 0.95
    assert [r["change"] for r in by_path["/edit"][:2]] == ["new", "changed"]
    assert second["/edit"]["similarity"] < 0.95 and first["/edit"]["similarity"] is None

    # Content dedup: the later of the two URLs is a duplicate of the earlier, its link is
    # admitted once (with the first).
    dups = {p: first[p]["duplicate_of"] for p in ("/dup1", "/dup2")}
    original = next(p for p, d in dups.items() if d is None)
    copy = ({"/dup1", "/dup2"} - {original}).pop()
    assert dups[copy] == http.base + original
    assert first[copy]["outlinks"] == 1 and first[original]["outlinks"] == 1
    dupchild = [r["visit"] for r in by_path["/dupchild"]]
    assert dupchild == list(range(1, len(dupchild) + 1))  # one URL, recorded once a visit

    # WARC: unchanged revisits are revisit records, changed pages full responses.
    kinds: dict[str, list[tuple]] = defaultdict(list)
    for path in warc_files(warc_dir):
        for rec_type, uri, _, _, warc in warc_records(path):
            if rec_type in ("response", "revisit"):
                profile = warc.get_header("WARC-Profile")
                digest = warc.get_header("WARC-Payload-Digest")
                kinds[uri.removeprefix(http.base)].append((rec_type, profile, digest))
    assert kinds["/etag"][1][:2] == ("revisit", NOT_MODIFIED_PROFILE)
    assert kinds["/lm"][1][:2] == ("revisit", NOT_MODIFIED_PROFILE)
    body = b"<html>" + INDEX + b"</html>"
    sha1 = "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()
    assert kinds["/"][:2] == [("response", None, sha1), ("revisit", IDENTICAL_PROFILE, sha1)]
    assert [k[0] for k in kinds["/stamp"][:2]] == ["response", "response"]
    assert [k[0] for k in kinds["/edit"][:2]] == ["response", "response"]

    # The change feed.
    feed = tmp_path / "feed.jsonl"
    rqcrawl(redis_url, "export", "chg", "-o", str(feed), "--change", "changed,gone")
    changes = {(r["url"].removeprefix(http.base), r["change"]) for r in read_jsonl(feed)}
    assert changes == {("/edit", "changed"), ("/stamp", "changed"), ("/gone", "gone")}
    rqcrawl(redis_url, "export", "chg", "-o", str(feed), "--change", "new", "--since", "1h")
    news = {r["url"].removeprefix(http.base) for r in read_jsonl(feed)}
    assert news == PAGES - {"/fail"} | {"/fresh"}
    later = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    shown = rqcrawl(redis_url, "export", "chg", "-o", str(feed), "--since", later)
    assert "0 row(s)" in shown.stderr and read_jsonl(feed) == []
    bad = rqcrawl(redis_url, "export", "chg", "-o", str(feed), "--change", "moved", check=False)
    assert bad.returncode != 0 and "unknown change 'moved'" in bad.stderr

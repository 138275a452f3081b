"""Sitemaps as a discovery source, end to end on real servers: a site whose robots.txt names a
gzip sitemap index of two sitemaps listing pages that no page links to; the same site with
--no-sitemaps; and hostile sitemaps (a gzip bomb, an oversized one, an index naming itself
and 10,000 sitemaps, malformed XML, an entity-expansion document), judged on the servers'
own request logs."""

from __future__ import annotations

import gzip
import time
from urllib.parse import urlsplit

import pytest
from helpers import read_jsonl, rqcrawl, seed_local, status, wait_finished, wait_until
from rq import Queue
from servers import HTTPSite, reply

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import sitemaps
from rqcrawl.frontier.dispatch import JOB_FUNC, SITEMAP_FUNC
from rqcrawl.workers.runner import LocalWorkers

OUTSIDE = "http://127.0.0.9:9"  # another host: outside the crawl's scope


def urlset(*locs: str, priority: str | None = None) -> bytes:
    extra = f"<priority>{priority}</priority>" if priority else ""
    items = "".join(f"<url><loc>{loc}</loc>{extra}</url>" for loc in locs)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}</urlset>'
    ).encode()


def index(*locs: str) -> bytes:
    items = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}'
        "</sitemapindex>"
    ).encode()


def page(*hrefs: str) -> bytes:
    links = "".join(f'<a href="{h}">x</a>' for h in hrefs)
    return f"<html><head><title>t</title></head><body>{links}</body></html>".encode()


class SitemapSite:
    """A seed page linking to /linked.html, a robots.txt naming a gzip index (and a sitemap
    of another host), the index naming two sitemaps (XML, plain text) and one that robots.txt
    disallows; the sitemaps list orphan pages, a disallowed page and one of another host."""

    def __init__(self) -> None:
        self.base = ""  # set once the server has its port

    def documents(self) -> dict[str, tuple[bytes, str]]:
        b = self.base
        return {
            "/robots.txt": (
                f"User-agent: *\nDisallow: /private/\nSitemap: {b}/index.xml.gz\n"
                f"Sitemap: {OUTSIDE}/elsewhere.xml\n".encode(),
                "text/plain",
            ),
            "/index.xml.gz": (
                gzip.compress(index(f"{b}/a.xml", f"{b}/b.txt", f"{b}/private/c.xml")),
                "application/gzip",
            ),
            "/a.xml": (
                urlset(
                    f"{b}/orphan1.html",
                    f"{b}/private/secret.html",
                    f"{OUTSIDE}/x.html",
                    priority="0.9",
                ),
                "application/xml",
            ),  # fmt: skip
            "/b.txt": (f"{b}/orphan2.html\n\n{b}/orphan3.html\n".encode(), "text/plain"),
            "/": (page("/linked.html"), "text/html"),
            "/linked.html": (page(), "text/html"),
            "/orphan1.html": (page(), "text/html"),
            "/orphan2.html": (page(), "text/html"),
            "/orphan3.html": (page(), "text/html"),
        }

    def handle(self, req) -> None:
        found = self.documents().get(req.path)
        if found is None:
            reply(req, 404, b"not found")
        else:
            reply(req, 200, found[0], found[1])


def export(redis_url: str, crawl: str, tmp_path) -> dict[str, dict]:
    out = tmp_path / f"{crawl}.jsonl"
    rqcrawl(redis_url, "export", crawl, "-o", str(out))
    return {urlsplit(r["url"]).path: r for r in read_jsonl(out)}


def crawl_site(
    redis_url: str, crawl: str, site: SitemapSite | HostileSite, *flags: str, logs=None
) -> HTTPSite:
    with HTTPSite(site.handle, host="127.0.0.2") as http:
        site.base = http.base
        seed_local(redis_url, http.base + "/", crawl, 3, "--sitemaps", "--sitemap-probe", *flags)
        with LocalWorkers(redis_url, 2, log_dir=logs):
            wait_finished(redis_url, crawl)
    return http


def test_sitemap_pages_are_crawled_at_depth_1_and_recorded_as_such(redis_url, tmp_path):
    http = crawl_site(redis_url, "maps", SitemapSite())
    records = export(redis_url, "maps", tmp_path)
    for orphan in ("/orphan1.html", "/orphan2.html", "/orphan3.html"):
        assert http.hits[orphan] == 1
        assert records[orphan]["outcome"] == "fetched"
        assert records[orphan]["depth"] == 1
        assert records[orphan]["source"] == "sitemap"
    assert records["/linked.html"]["source"] is None  # a link: found on the seed
    assert records["/"]["source"] is None
    # each document read once; the implicit /sitemap.xml's 404 costs one request
    for doc in ("/robots.txt", "/index.xml.gz", "/a.xml", "/b.txt", "/sitemap.xml"):
        assert http.hits[doc] == 1, doc
    # robots.txt refuses a listed page and a sitemap: neither is requested
    assert records["/private/secret.html"]["outcome"] == "robots_disallowed"
    assert records["/private/secret.html"]["source"] == "sitemap"
    assert not {"/private/secret.html", "/private/c.xml"} & set(http.hits)
    assert "/sitemap.xml" not in records  # sitemap documents are not pages of the crawl
    assert sum(http.hits.values()) == 10  # the 9 documents above and the seed's link
    maps = status(redis_url, "maps")["sitemaps"]
    # read: the index, a.xml, b.txt (the 404 is no problem); robots.txt's other host's
    # sitemap and the disallowed one are counted, not requested
    assert maps == {"read": 3, "urls": 4, "lastmod_due": 0,  # (a crawl with revisits only)
                    "problems": {"out_of_scope": 1, "robots": 1}}  # fmt: skip


def test_sitemap_urls_count_against_the_budgets(redis_url, tmp_path):
    http = crawl_site(redis_url, "budget", SitemapSite(), "--max-pages", "4")
    records = export(redis_url, "budget", tmp_path)
    refused = {path: r for path, r in records.items() if r["outcome"] == "max_pages"}
    assert len(refused) == 2, records  # the seed and 3 of its 5 links and sitemap URLs
    assert not set(refused) & set(http.hits)
    assert all(r["source"] == "sitemap" for p, r in refused.items() if p != "/linked.html")


def test_no_sitemaps_requests_none_of_them(redis_url, tmp_path):
    http = crawl_site(redis_url, "nomaps", SitemapSite(), "--no-sitemaps")
    assert set(http.hits) == {"/robots.txt", "/", "/linked.html"}
    assert set(export(redis_url, "nomaps", tmp_path)) == {"/", "/linked.html"}


def test_sitemaps_false_in_a_settings_file_turns_them_off(tmp_path):
    settings = tmp_path / "s.toml"
    settings.write_text("sitemaps = false\nmax_sitemaps_per_host = 3\n")
    cfg = CrawlConfig.from_toml(settings)
    assert (cfg.sitemaps, cfg.max_sitemaps_per_host) == (False, 3)


BOMB = gzip.compress(b"<" * 50_000_000)  # 50 MB of '<' in about 50 KB
CAP = 1_000_000  # --config max_sitemap_bytes for the hostile crawl
ENTITIES = (
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
    b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
    b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    b"<url><loc>http://x/&lol3;</loc></url></urlset>"
)


class HostileSite:
    """/sitemap.xml: an index naming itself, a gzip bomb, an oversized sitemap, malformed XML,
    an entity-expansion document, a good sitemap and 10,000 more sitemaps."""

    def __init__(self) -> None:
        self.base = ""

    def handle(self, req) -> None:
        b, path = self.base, req.path
        if path == "/sitemap.xml":
            many = [f"{b}/many/{i}.xml" for i in range(10_000)]
            body = index(f"{b}/sitemap.xml", f"{b}/bomb.xml.gz", f"{b}/big.xml",
                         f"{b}/broken.xml", f"{b}/lol.xml", f"{b}/good.xml", *many)  # fmt: skip
            reply(req, 200, body, "application/xml")
        elif path == "/bomb.xml.gz":
            reply(req, 200, BOMB, "application/gzip")
        elif path == "/big.xml":
            reply(req, 200, urlset(*(f"{b}/big/{i}.html" for i in range(40_000))), "text/xml")
        elif path == "/broken.xml":
            reply(req, 200, b"<urlset><url><loc>http://x/</loc></url", "text/xml")
        elif path == "/lol.xml":
            reply(req, 200, ENTITIES, "text/xml")
        elif path == "/good.xml":
            reply(req, 200, urlset(f"{b}/fine.html"), "text/xml")
        elif path in ("/", "/fine.html") or path.startswith("/many/"):
            reply(req, 200, page() if not path.startswith("/many/") else urlset(), "text/html")
        else:
            reply(req, 404, b"not found")


def test_hostile_sitemaps_are_capped_and_the_crawl_finishes(redis_url, tmp_path):
    settings = tmp_path / "caps.toml"
    settings.write_text(f"max_sitemap_bytes = {CAP}\nmax_sitemaps_per_host = 8\n")
    site = HostileSite()
    logs = tmp_path / "workers"
    flags = ("--no-robots", "--config", str(settings))
    http = crawl_site(redis_url, "hostile", site, *flags, logs=logs)
    # the index and the 7 documents after it: the cap of 8 per site, whatever it names
    docs = [p for p in http.hits if p.endswith((".xml", ".gz"))]
    assert len(docs) == 8, docs
    assert all(n == 1 for n in http.hits.values())  # nothing requested twice (itself neither)
    assert http.hits["/fine.html"] == 1  # the good sitemap next to the hostile ones
    assert not any(p.startswith("/big/") for p in http.hits)  # over the byte cap: not read
    maps = status(redis_url, "hostile")["sitemaps"]
    # bomb and big: too large; broken and lol: malformed (a DTD is refused, never expanded);
    # the index, good and the two many/ read; of the index's 10,006 names, 7 were held and
    # one is the index itself (held already: no problem)
    assert maps["problems"] == {"too_large": 2, "malformed": 2, "not_held": 9_998}, maps
    assert (maps["read"], maps["urls"]) == (4, 1)
    lines = [line for f in logs.iterdir() for line in f.read_text().splitlines()]
    logged = [line for line in lines if "crawl hostile: sitemap " in line]
    assert len(logged) == 4, logged  # one line per document not read, no traceback
    assert not any("Traceback" in line for line in lines)


@pytest.mark.parametrize(
    "text, offset", [(None, 0), ("0.5", 0), ("1.0", 5), ("0.0", -5), ("0.8", 3), ("7", 0),
                     ("nan", 0), ("high", 0)],
)  # fmt: skip
def test_sitemap_priority_maps_to_an_offset_of_our_integer_priority(text, offset):
    assert sitemaps.priority_offset(text) == offset


def test_a_sitemap_that_fails_for_now_is_retried_like_a_page(redis_url, tmp_path):
    answers = iter([503])

    def handle(req) -> None:
        if req.path == "/sitemap.xml":
            status_code = next(answers, 200)
            reply(req, status_code, urlset(f"http://{req.headers['Host']}/late.html"), "text/xml")
        else:
            reply(req, 200 if req.path in ("/", "/late.html") else 404, page())

    with HTTPSite(handle, host="127.0.0.2") as http:
        flags = (
            "--sitemaps",
            "--sitemap-probe",
            "--no-robots",
            "--retries",
            "1",
            "--retry-base",
            "0.1",
        )
        seed_local(redis_url, http.base + "/", "later", 2, *flags)
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "later")
    assert http.hits["/sitemap.xml"] == 2 and http.hits["/late.html"] == 1
    assert export(redis_url, "later", tmp_path)["/late.html"]["source"] == "sitemap"


class ChangingSitemap:
    """A site found only through its /sitemap.xml: the first read lists /a and /b (an old
    <lastmod>); later reads also list /c, and give /a a <lastmod> of the moment (changed
    since its visit) while /b keeps its old one."""

    def __init__(self) -> None:
        self.base, self.reads = "", 0

    def handle(self, req) -> None:
        if req.path == "/sitemap.xml":
            self.reads += 1
            now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() + 0.5))
            a = "2020-01-01" if self.reads == 1 else now
            items = f"<url><loc>{self.base}/a</loc><lastmod>{a}</lastmod></url>"
            items += f"<url><loc>{self.base}/b</loc><lastmod>2020-01-01</lastmod></url>"
            items += f"<url><loc>{self.base}/c</loc></url>" if self.reads > 1 else ""
            body = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}</urlset>'
            reply(req, 200, body.encode(), "application/xml")
        elif req.path in ("/", "/a", "/b", "/c"):
            reply(req, 200, page())
        else:
            reply(req, 404, b"not found")


@pytest.mark.timeout(90)
def test_with_revisits_sitemaps_are_read_again_and_lastmod_brings_a_revisit_forward(
    redis_url, tmp_path
):
    """Pages every 60 s, the sitemap every 2 s: its second read brings /c in and makes /a
    (changed since its visit, says <lastmod>) due at once, long before its 60 s; /b (an old
    <lastmod>) waits for its own time."""
    settings = tmp_path / "revisit.toml"
    settings.write_text("sitemap_revisit = 2\nrevisit_min = 60\nrevisit_max = 60\n")
    site = ChangingSitemap()
    db = f"sqlite:///{tmp_path / 'tasks.db'}"
    with HTTPSite(site.handle, host="127.0.0.2", max_requests=200, max_seconds=80) as http:
        site.base = http.base
        seed_local(redis_url, http.base + "/", "lm", 1, "--sitemaps", "--sitemap-probe",
                   "--no-robots", "--revisit", "60s", "--db", db,
                   "--config", str(settings))  # fmt: skip
        with LocalWorkers(redis_url, 2):
            wait_until(lambda: http.hits["/a"] >= 2 and http.hits["/c"] == 1, 40,
                       "/a revisited and /c fetched")  # fmt: skip
            s = status(redis_url, "lm")
        # (every later read says /a changed again at that moment: it is brought forward again)
        first_a, second_a = [t for t, p in http.log if p == "/a"][:2]
    assert http.hits["/b"] == 1 and http.hits["/"] == 1  # not due for 60 s
    assert second_a - first_a < 20  # brought forward, not its 60 s
    assert s["sitemaps"]["lastmod_due"] >= 1 and s["sitemaps"]["read"] >= 2
    records = export(redis_url, "lm", tmp_path)
    assert records["/c"]["source"] == "sitemap" and records["/c"]["depth"] == 1


def test_lastmod_is_read_as_w3c_datetime_and_junk_or_the_future_is_ignored():
    assert sitemaps.lastmod_time("2026-11-23") == 1795392000.0
    assert sitemaps.lastmod_time("2026-11") == sitemaps.lastmod_time("2026-11-01")
    assert sitemaps.lastmod_time("2026-11-23T18:00:00+01:00") == 1795392000.0 + 17 * 3600
    assert sitemaps.lastmod_time("2026-11-23T18:00Z") == 1795392000.0 + 18 * 3600
    now = 1795392000.0
    assert sitemaps.lastmod_time("2026-11-25", now) is None  # two days ahead
    assert all(sitemaps.lastmod_time(t) is None for t in ("", "yesterday", "2026-13-01"))


class AppendedSite:
    """/sitemap.xml is a sitemap in two gzip members (written, then appended to): the second
    member lists /second.html. robots.txt names /big.xml.gz: two members, each under the
    byte cap, together over it."""

    def __init__(self) -> None:
        self.base = ""

    def handle(self, req) -> None:
        b, path = self.base, req.path
        if path == "/sitemap.xml":
            whole = urlset(f"{b}/first.html", f"{b}/second.html")
            cut = whole.index(b"<url><loc>" + f"{b}/second.html".encode())
            reply(req, 200, gzip.compress(whole[:cut]) + gzip.compress(whole[cut:]), "text/xml")
        elif path == "/robots.txt":
            reply(req, 200, f"User-agent: *\nSitemap: {b}/big.xml.gz\n".encode(), "text/plain")
        elif path == "/big.xml.gz":
            half = b" " * (CAP * 3 // 5)
            body = gzip.compress(urlset(f"{b}/big.html") + half) + gzip.compress(half)
            reply(req, 200, body, "application/gzip")
        elif path in ("/", "/first.html", "/second.html", "/big.html"):
            reply(req, 200, page(), "text/html")
        else:
            reply(req, 404, b"not found")


def test_every_member_of_a_gzip_sitemap_is_read_within_the_byte_cap(redis_url, tmp_path):
    settings = tmp_path / "caps.toml"
    settings.write_text(f"max_sitemap_bytes = {CAP}\n")
    site = AppendedSite()
    with HTTPSite(site.handle, host="127.0.0.2") as http:
        site.base = http.base
        seed_local(
            redis_url, http.base + "/", "appended", 3, "--sitemaps", "--sitemap-probe",
            "--config", str(settings),
        )  # fmt: skip
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "appended")
    records = export(redis_url, "appended", tmp_path)
    assert records["/second.html"]["outcome"] == "fetched"  # listed in the second member
    assert records["/second.html"]["source"] == "sitemap"
    assert http.hits["/first.html"] == http.hits["/second.html"] == 1
    maps = status(redis_url, "appended")["sitemaps"]
    assert (maps["read"], maps["urls"], maps["problems"]) == (1, 2, {"too_large": 1})
    assert "/big.html" not in http.hits  # listed in the first member of a document too large


def test_a_sitemap_entry_has_its_own_job_function(redis_url, conn):
    """A sitemap document is read by crawl_sitemap, not by the page job: the dashboard and
    the worker tell the two apart by their RQ function."""
    seed_local(
        redis_url, "http://127.0.0.2:9/", "own", 1, "--sitemaps", "--sitemap-probe",
        "--host-concurrency", "2",
    )  # fmt: skip
    jobs = {job.args[1]: job.func_name for job in Queue("crawl", connection=conn).get_jobs()}
    assert jobs == {
        "http://127.0.0.2:9/": JOB_FUNC,
        sitemaps.entry(sitemaps.root("http://127.0.0.2:9")): SITEMAP_FUNC,
    }


def test_by_default_a_site_is_not_probed_its_robots_sitemaps_and_given_ones_are_read(
    redis_url, tmp_path
):
    """Decision (b) of issue 35: no /sitemap.xml request unless asked; the Sitemap: lines of
    robots.txt are read with no request of their own, and --sitemap adds one."""

    def handle(req) -> None:
        if req.path == "/robots.txt":
            reply(req, 200, b"User-agent: *\nAllow: /\nSitemap: /maps/a.xml\n", "text/plain")
        elif req.path in ("/maps/a.xml", "/maps/b.xml", "/sitemap.xml"):
            page = {"/maps/a.xml": "/from-robots", "/maps/b.xml": "/given"}.get(req.path, "/x")
            body = f"<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'><url><loc>{page}</loc></url></urlset>"
            reply(req, 200, body.encode(), "application/xml")
        elif req.path in ("/", "/from-robots", "/given", "/x"):
            reply(req, 200, b"<html><title>p</title></html>")
        else:
            reply(req, 404, b"no")

    with HTTPSite(handle, host="127.0.0.2") as http:
        seed_local(
            redis_url, http.base + "/", "noprobe", 2, "--sitemaps", "--sitemap",
            http.base + "/maps/b.xml",
        )  # fmt: skip
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "noprobe")
    assert "/sitemap.xml" not in http.hits and "/x" not in http.hits
    assert http.hits["/maps/a.xml"] == http.hits["/maps/b.xml"] == 1
    assert http.hits["/from-robots"] == http.hits["/given"] == 1
    assert http.hits["/robots.txt"] == 1

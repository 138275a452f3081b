"""WARC archive: records written for real HTTP responses, files per worker, rotation by size,
and whole crawls (`rqcrawl crawl --warc`, `rqcrawl seed --warc` with forking workers) read
back with warcio."""

from __future__ import annotations

import gzip
import re
import subprocess
from pathlib import Path

import pytest
from helpers import BIN, rqcrawl, seed_local, wait_finished, worker_names
from servers import HTTPSite, reply
from test_cli import assert_one_line_error
from testsite import Site
from warcio.archiveiterator import ArchiveIterator

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.http import FetchError, fetch
from rqcrawl.fetch.warc import WarcFiles
from rqcrawl.workers.runner import LocalWorkers

CFG = CrawlConfig.from_dict({"allow_private": True})
HTML = b"<html><title>t</title><body>" + b"hello " * 200 + b"</body></html>"


def handle(req):
    if req.path == "/plain":
        reply(req, 200, HTML)
    elif req.path == "/gzipped":
        reply(req, 200, gzip.compress(HTML), headers={"Content-Encoding": "gzip"})
    elif req.path == "/moved":
        reply(req, 301, b"", headers={"Location": "/plain"})
    elif req.path == "/image.png":
        reply(req, 200, b"\x89PNG" + b"\0" * 100, "image/png")
    else:
        reply(req, 404, b"not here")


def records(path: Path) -> list:
    """(type, uri, http headers, payload, warc headers) of every record in one file."""
    out = []
    with open(path, "rb") as fh:
        for r in ArchiveIterator(fh):
            out.append((r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), r.http_headers,
                        r.content_stream().read(), r.rec_headers))  # fmt: skip
    return out


def warc_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.warc.gz"))


def test_each_response_and_its_request_are_archived(tmp_path):
    files = WarcFiles(tmp_path, "c1", "w1", 10**9)
    with HTTPSite(handle, max_requests=20) as http:
        fetch(http.base + "/gzipped", CFG, lambda hop: None, archive=files.write)
        fetch(http.base + "/moved", CFG, lambda hop: None, archive=files.write)
        fetch(http.base + "/image.png", CFG, lambda hop: None, archive=files.write)
        with pytest.raises(FetchError):
            fetch(http.base + "/nothing", CFG, lambda hop: None, archive=files.write)
    [path] = warc_files(tmp_path)
    assert re.fullmatch(r"c1-\d{14}-00000-.+-w1\.warc\.gz", path.name)
    recs = records(path)
    assert recs[0][0] == "warcinfo"
    responses = [r for r in recs if r[0] == "response"]
    requests_ = [r for r in recs if r[0] == "request"]
    uris = ["/gzipped", "/moved", "/plain", "/image.png", "/nothing"]
    assert [r[1] for r in responses] == [http.base + u for u in uris]
    assert [r[1] for r in requests_] == [http.base + u for u in uris]
    assert [r[2].get_statuscode() for r in responses] == ["200", "301", "200", "200", "404"]
    for _, uri, head, _, _ in requests_:
        assert head.protocol == "GET" and uri.endswith(head.statusline.split()[0])
        assert head.get_header("Host") == f"127.0.0.1:{http.port}"

    gz = responses[0]
    assert gz[3] == HTML  # stored decoded...
    assert gz[2].get_header("Content-Encoding") is None  # ...and said so
    assert gz[2].get_header("Content-Length") == str(len(HTML))
    assert gz[4].get_header("WARC-Truncated") is None
    moved, image, missing = responses[1], responses[3], responses[4]
    assert moved[2].get_header("Location") == "/plain"
    for _, _, _, payload, warc_head in (moved, image, missing):  # bodies not downloaded
        assert payload == b""
        assert warc_head.get_header("WARC-Truncated") == "unspecified"
    assert image[2].get_header("Content-Type") == "image/png"
    assert subprocess.run([str(BIN / "warcio"), "check", str(path)]).returncode == 0


def test_later_processes_of_a_worker_continue_its_file(tmp_path):
    """A forking `rq worker` runs each job in a new process: they share the worker's file."""

    def fetch_once(crawl: str, worker: str) -> None:
        files = WarcFiles(tmp_path, crawl, worker, 10**9)  # as a new process would
        fetch(http.base + "/plain", CFG, lambda hop: None, archive=files.write)

    with HTTPSite(handle, max_requests=20) as http:
        for _ in range(3):
            fetch_once("c", "w1")
        fetch_once("c", "w2")
        fetch_once("c-2", "w1")  # another crawl whose name starts like this one's
    found = {}
    for path in warc_files(tmp_path):
        crawl = "c-2" if path.name.startswith("c-2-") else "c"
        worker = path.name.rsplit("-", 1)[1].removesuffix(".warc.gz")
        found[crawl, worker] = [r[0] for r in records(path)]
    assert found == {
        ("c", "w1"): ["warcinfo"] + ["response", "request"] * 3,
        ("c", "w2"): ["warcinfo", "response", "request"],
        ("c-2", "w1"): ["warcinfo", "response", "request"],
    }


def test_files_rotate_by_size_and_all_read_back(tmp_path):
    files = WarcFiles(tmp_path, "c", "w1", 1)  # any record fills a file
    with HTTPSite(handle, max_requests=20) as http:
        for _ in range(6):
            fetch(http.base + "/plain", CFG, lambda hop: None, archive=files.write)
    paths = warc_files(tmp_path)
    assert [p.name.split("-")[2] for p in paths] == [f"{n:05d}" for n in range(6)]
    payloads = []
    for path in paths:
        recs = records(path)
        assert recs[0][0] == "warcinfo"
        payloads += [r[3] for r in recs if r[0] == "response"]
    assert payloads == [HTML] * 6


def served(site: Site, base: str, paths) -> dict[str, bytes]:
    """URL -> the body the site served there."""
    return {base + p: site.render(site.page_of(p), base) for p in paths}


def responses_by_uri(paths: list[Path]) -> dict[str, list[tuple[str, bytes]]]:
    out: dict[str, list[tuple[str, bytes]]] = {}
    for path in paths:
        for rec_type, uri, head, payload, _ in records(path):
            if rec_type == "response":
                out.setdefault(uri, []).append((head.get_statuscode(), payload))
    return out


def test_crawl_with_warc_archives_every_page(redis_url, tmp_path):
    site = Site(pages=20)
    warc_dir = tmp_path / "warc"
    with HTTPSite(site.handle, max_requests=200) as http:
        rqcrawl(
            redis_url, "crawl", http.base + "/p0.html", "--max-depth", "2", "--crawl", "w",
            "--allow-private", "--delay", "0", "--no-sitemaps", "--warc", str(warc_dir),
            "-o", str(tmp_path / "out.jsonl"),
        )  # fmt: skip
    assert http.hits.pop("/robots.txt") == 1  # read by the robots gate, not archived
    paths = warc_files(warc_dir)
    assert 1 <= len(paths) <= 2  # one per local worker that got work
    archived = responses_by_uri(paths)
    pages = [p for p in http.hits if site.page_of(p) is not None]
    assert {uri: [("200", body)] for uri, body in served(site, http.base, pages).items()} == {
        uri: got for uri, got in archived.items() if "/missing" not in uri
    }
    assert all(got == [("404", b"")] for uri, got in archived.items() if "/missing" in uri)
    assert len(archived) == len(http.hits)
    check = subprocess.run([str(BIN / "warcio"), "check", *map(str, paths)])
    assert check.returncode == 0


def test_seeded_crawl_rotates_files_per_worker(redis_url, conn, tmp_path):
    site = Site(pages=30)
    warc_dir = tmp_path / "warc"
    settings = tmp_path / "crawl.toml"
    settings.write_text("[crawl]\nwarc_max_bytes = 4000\n")
    with HTTPSite(site.handle, max_requests=300) as http:
        seed_local(redis_url, http.base + "/p0.html", "rot", 2,
                   "--warc", str(warc_dir), "--config", str(settings))  # fmt: skip
        with LocalWorkers(redis_url, 2, worker_class=None, log_dir=tmp_path) as workers:
            names = worker_names(conn, workers)
            wait_finished(redis_url, "rot")
    assert http.hits.pop("/robots.txt") == 1
    paths = warc_files(warc_dir)
    owners = [next(w for w in names if p.name.endswith(f"-{w}.warc.gz")) for p in paths]
    assert set(owners) == set(names)
    assert len(paths) >= 6  # about 25 pages of 1.2 KB, 4000 bytes a file
    for path in paths:
        assert records(path)[0][0] == "warcinfo"
    archived = responses_by_uri(paths)
    fetched = served(site, http.base, [p for p in http.hits if site.page_of(p) is not None])
    assert {uri: archived[uri] for uri in fetched} == {u: [("200", b)] for u, b in fetched.items()}
    assert len(archived) == len(http.hits)


def test_crawl_with_an_unusable_warc_dir_is_a_one_line_error(redis_url, tmp_path):
    (tmp_path / "file").write_text("not a directory")
    proc = rqcrawl(
        redis_url, "crawl", "http://example.org/", "--warc", str(tmp_path / "file" / "warc"),
        "-o", str(tmp_path / "out.jsonl"), check=False,
    )  # fmt: skip
    assert_one_line_error(proc, "cannot create", "Not a directory")
    assert not (tmp_path / "out.jsonl").exists()

"""WACZ export (`rqcrawl export NAME --format wacz`): a documentation site (tests/test_content.py's)
crawled with WARC on and `--content text`, exported, checked by py-wacz's own `wacz validate`,
then read as a zip: the pages list, the CDXJ index against the WARC files' records, the
datapackage's hashes. And the refusals, each in one line."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import emptied
from helpers import BIN, read_jsonl, rqcrawl, wait_until
from servers import HTTPSite, reply
from test_cli import assert_one_line_error
from test_content import CHAPTERS, body_of, docs_site
from warcio.archiveiterator import ArchiveIterator


@dataclass
class Export:
    wacz: Path
    warc_dir: Path
    records: list[dict]
    damaged: subprocess.CompletedProcess  # the export of a WARC file that holds no WARC
    damaged_name: str
    no_warc: subprocess.CompletedProcess  # the export pointed at a directory without any
    cut: subprocess.CompletedProcess  # the export of WARC files whose last record is cut
    cut_wacz: Path
    cut_name: str


@pytest.fixture(scope="module")
def exported(tmp_path_factory, redis_server) -> Export:
    """The docs site crawled as `docs` with WARC and text, its WACZ, and two failed exports
    (each test empties Redis, so every export runs here)."""
    tmp = tmp_path_factory.mktemp("wacz")
    warc_dir, out = tmp / "warc", tmp / "out.jsonl"
    redis_url = next(emptied(redis_server))
    with HTTPSite(docs_site, max_requests=50) as http:
        rqcrawl(
            redis_url, "crawl", http.base + "/", "--crawl", "docs", "--max-depth", "2",
            "--allow-private", "--delay", "0", "--workers", "1", "--content", "text",
            "--warc", str(warc_dir), "-o", str(out),
        )  # fmt: skip
    wacz = tmp / "crawl.wacz"
    proc = rqcrawl(
        redis_url, "export", "docs", "--format", "wacz", "-o", str(wacz), "--records", str(out)
    )
    assert "Traceback" not in proc.stderr
    # the records left Redis with crawl -o: without their file, one line says where they are
    unlisted = rqcrawl(redis_url, "export", "docs", "-o", str(tmp / "x.wacz"), check=False)
    assert unlisted.returncode != 0 and "--records FILE" in unlisted.stderr
    assert len(unlisted.stderr.strip().splitlines()) == 1
    ignored = rqcrawl(redis_url, "export", "docs", "-o", str(tmp / "x.csv"), "--records",
                      str(out), check=False)  # fmt: skip
    assert ignored.returncode == 2 and "--records is read by --format wacz only" in ignored.stderr
    damaged = tmp / "damaged"
    damaged.mkdir()
    first = sorted(warc_dir.glob("*.warc.gz"))[0]
    (damaged / first.name).write_bytes(b"<html>a proxy's error page, saved as the WARC</html>")
    bad = rqcrawl(
        redis_url, "export", "docs", "-o", str(tmp / "bad.wacz"), "--warc", str(damaged),
        "--records", str(out), check=False,
    )  # fmt: skip
    empty = tmp / "empty"
    empty.mkdir()
    no_warc = rqcrawl(
        redis_url, "export", "docs", "-o", str(tmp / "none.wacz"), "--warc", str(empty),
        check=False,
    )  # fmt: skip
    cut_dir = tmp / "cut"  # a worker killed while writing: its last record cut short
    shutil.copytree(warc_dir, cut_dir)
    last = sorted(cut_dir.glob("*.warc.gz"))[-1]
    last.write_bytes(last.read_bytes()[:-50])  # within the last gzip member (one record)
    cut = rqcrawl(redis_url, "export", "docs", "-o", str(tmp / "cut.wacz"), "--warc",
                  str(cut_dir), "--records", str(out), check=False)  # fmt: skip
    return Export(
        wacz, warc_dir, read_jsonl(out), bad, first.name, no_warc, cut, tmp / "cut.wacz",
        last.name,
    )  # fmt: skip


def validate(wacz: Path) -> subprocess.CompletedProcess:
    """py-wacz's own check of a package."""
    return subprocess.run(
        [str(BIN / "wacz"), "validate", "-f", str(wacz)], capture_output=True, text=True
    )


def test_py_wacz_validates_the_export(exported):
    proc = validate(exported.wacz)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the passed WACZ is valid" in proc.stdout


def test_pages_list_every_fetched_html_page_with_its_title_and_text(exported):
    wacz, records = exported.wacz, exported.records
    with zipfile.ZipFile(wacz) as z:
        header, *pages = [json.loads(line) for line in z.read("pages/pages.jsonl").splitlines()]
    assert header["format"] == "json-pages-1.0" and header["hasText"] is True
    fetched = {r["final_url"]: r for r in records if r["outcome"] == "fetched"}
    assert len(fetched) == len(CHAPTERS) + 1  # the chapters and / (the install page)
    assert sorted(p["url"] for p in pages) == sorted(fetched)
    for page in pages:
        record = fetched[page["url"]]
        assert page["title"] == record["title"]
        assert page["text"] == record["content"]["text"]
        chapter = page["url"].rsplit("/", 1)[1].removesuffix(".html") or "install"
        assert body_of(chapter) in page["text"]
        assert "Navigate" not in page["text"]
        assert page["ts"].endswith("Z") and page["ts"][:10] == record["fetched_at"][:10]
    data = next(r for r in records if r["url"].endswith("/docs/data"))
    assert data["outcome"] == "not_html" and data["url"] not in {p["url"] for p in pages}


def test_the_index_has_a_line_per_response_record(exported):
    wacz, warc_dir = exported.wacz, exported.warc_dir
    responses = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type in ("response", "revisit"):
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    responses.append((uri, record.http_headers.get_statuscode(), path.name))
    with zipfile.ZipFile(wacz) as z:
        cdx = z.read("indexes/index.cdx.gz")
        stored = {i.filename: i.compress_type for i in z.infolist()}
    lines = gzip.decompress(cdx).decode().splitlines()
    entries = [json.loads(line.split(" ", 2)[2]) for line in lines]
    assert sorted((e["url"], e["status"], e["filename"]) for e in entries) == sorted(responses)
    assert lines == sorted(lines)  # replay tools binary-search it
    assert any(u.endswith("/docs/data") for u, _, _ in responses)  # headers-only, indexed too
    for entry in entries:  # each offset points at its record in the file under archive/
        assert stored[f"archive/{entry['filename']}"] == zipfile.ZIP_STORED
    assert stored["indexes/index.cdx.gz"] == zipfile.ZIP_STORED  # read by offset too


def test_the_index_is_zipnum_with_a_line_per_block(exported):
    """WACZ 1.1.1's index: gzip members of sorted CDXJ lines, each found by index.idx (its
    first key, offset, length, SHA-256), the form py-wacz writes and pywb merges."""
    with zipfile.ZipFile(exported.wacz) as z:
        cdx, idx = z.read("indexes/index.cdx.gz"), z.read("indexes/index.idx").decode()
        package = json.loads(z.read("datapackage.json"))
    meta, *blocks = idx.splitlines()
    assert json.loads(meta.split(" ", 2)[2]) == {
        "format": "cdxj-gzip-1.0",
        "filename": "index.cdx.gz",
    }
    assert blocks
    end = 0
    for block in blocks:
        key, data = block.rsplit(" {", 1)
        where = json.loads("{" + data)
        assert where["offset"] == end
        member = cdx[end : end + where["length"]]
        assert where["digest"] == "sha256:" + hashlib.sha256(member).hexdigest()
        assert gzip.decompress(member).decode().startswith(key + " ")
        end += where["length"]
    assert end == len(cdx)
    assert package["profile"] == "data-package" and package["wacz_version"] == "1.1.1"
    assert "home" not in package  # 1.2's, not part of 1.1.1


def test_the_datapackage_lists_every_file_with_its_hash(exported):
    wacz, warc_dir = exported.wacz, exported.warc_dir
    with zipfile.ZipFile(wacz) as z:
        names = set(z.namelist())
        package_bytes = z.read("datapackage.json")
        package = json.loads(package_bytes)
        digest = json.loads(z.read("datapackage-digest.json"))
        contents = {n: z.read(n) for n in names}
    listed = {r["path"]: r for r in package["resources"]}
    assert set(listed) == names - {"datapackage.json", "datapackage-digest.json"}
    assert {f"archive/{p.name}" for p in warc_dir.glob("*.warc.gz")} <= set(listed)
    assert {"indexes/index.cdx.gz", "indexes/index.idx", "pages/pages.jsonl"} <= set(listed)
    for path, resource in listed.items():
        assert resource["hash"] == "sha256:" + hashlib.sha256(contents[path]).hexdigest()
        assert resource["bytes"] == len(contents[path])
    assert digest == {
        "path": "datapackage.json",
        "hash": "sha256:" + hashlib.sha256(package_bytes).hexdigest(),
    }
    assert package["title"] == "docs" and package["mainPageURL"].endswith("/")
    assert package["mainPageDate"].endswith("Z")


def test_a_damaged_warc_file_is_a_one_line_error_naming_it(exported):
    assert_one_line_error(exported.damaged, "cannot index", exported.damaged_name)
    assert not (exported.wacz.parent / "bad.wacz").exists()
    assert [p.name for p in exported.wacz.parent.iterdir() if p.name.startswith("tmp")] == []


def test_a_crawl_without_warc_files_is_a_one_line_error(exported):
    assert_one_line_error(exported.no_warc, "no WARC files of it in")


def test_a_record_cut_short_is_left_out_and_said(exported):
    """Before, the cut WARC file went in as it was: the export said only "page(s) not in
    the WARC files" and `wacz validate` failed on it with an EOFError."""
    proc = exported.cut
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and exported.cut_name in warnings[0], proc.stderr
    assert "cut short, its last " in warnings[0] and "bytes left out" in warnings[0]
    checked = validate(exported.cut_wacz)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with zipfile.ZipFile(exported.cut_wacz) as z:
        stored = z.read(f"archive/{exported.cut_name}")
    original = (exported.warc_dir / exported.cut_name).read_bytes()
    assert 0 < len(stored) < len(original) - 50 and original.startswith(stored)
    with zipfile.ZipFile(exported.wacz) as whole, zipfile.ZipFile(exported.cut_wacz) as cut:
        lines = gzip.decompress(whole.read("indexes/index.cdx.gz")).splitlines()
        kept = gzip.decompress(cut.read("indexes/index.cdx.gz")).splitlines()
    assert set(kept) <= set(lines) and len(lines) - len(kept) <= 1  # the cut record's line


def embedded_crawl(tmp: Path, base: str, *extra: str) -> subprocess.Popen:
    """`rqcrawl crawl BASE/ -o tmp/out.jsonl --wacz tmp/crawl.wacz` on its embedded Redis
    (no Redis URL in its environment: the one that stops with it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RQ_REDIS_URL", "REDIS_URL")}
    return subprocess.Popen(
        [str(BIN / "rqcrawl"), "crawl", base + "/", "-o", str(tmp / "out.jsonl"),
         "--wacz", str(tmp / "crawl.wacz"), "--allow-private", "--delay", "0",
         "--workers", "1", "--no-sitemaps", "--data-dir", str(tmp / "data"), *extra],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def pages_of(wacz: Path) -> list[str]:
    with zipfile.ZipFile(wacz) as z:
        return [json.loads(line)["url"] for line in z.read("pages/pages.jsonl").splitlines()[1:]]


def test_crawl_wacz_packs_the_crawl_when_it_ends(tmp_path):
    """One command: the crawl on its own Redis, then its package, with no Redis left to
    ask (`export` after `crawl -o` had none). The WARC files go beside the package."""
    with HTTPSite(docs_site, max_requests=50) as http:
        proc = embedded_crawl(tmp_path, http.base, "--max-depth", "2")
        _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0 and "Traceback" not in err, err
    wacz = tmp_path / "crawl.wacz"
    assert f"{wacz}: {len(CHAPTERS) + 1} page(s)" in err
    assert list((tmp_path / "crawl-warc").glob("*.warc.gz"))
    assert len(pages_of(wacz)) == len(CHAPTERS) + 1
    check = subprocess.run([str(BIN / "wacz"), "validate", "-f", str(wacz)], capture_output=True)
    assert check.returncode == 0, check.stdout


def test_a_crawl_stopped_halfway_is_packed_with_its_pages_so_far(tmp_path):
    """Ctrl-C while a page is being served: the workers finish it, the follower delivers
    the records, and the package holds what was fetched; the same command resumes."""
    served, release = threading.Event(), threading.Event()

    def handle(req):
        if req.path == "/":
            reply(req, 200, b"<title>home</title><a href='/slow'>s</a><a href='/next'>n</a>")
        elif req.path == "/slow":
            served.set()
            release.wait(60)
            reply(req, 200, b"<title>slow</title>")
        else:
            reply(req, 200, b"<title>next</title>")

    with HTTPSite(handle, max_requests=50) as http:
        proc = embedded_crawl(tmp_path, http.base, "--threads", "1")
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        try:
            assert served.wait(120), "no request for /slow"
            proc.send_signal(signal.SIGINT)
            wait_until(lambda: any("interrupted" in line for line in lines), 60, "the stop")
        finally:
            release.set()
        proc.wait(120)
        reader.join(10)
    err = "".join(lines)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert "stopped; run the same command again" in err and "(the pages so far)" in err
    assert http.base + "/" in pages_of(tmp_path / "crawl.wacz")

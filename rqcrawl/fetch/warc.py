"""WARC archive of the responses a worker receives (`warc_dir`), readable by standard tools.

Each worker writes its own gzipped WARC/1.0 files, named
`{crawl}-{YYYYmmddHHMMSS}-{serial}-{host}-{worker}.warc.gz`, and starts the next serial once
a file is over `warc_max_bytes`. Files are keyed by the RQ worker's name rather than the
process id because a forking `rq worker` runs each job in a new child: its jobs append, one
at a time, to the worker's current file instead of leaving one file per URL. Every record is
a complete gzip member flushed to disk, so the files of a finished crawl read back while the
workers are still running (only a worker killed in the middle of a write leaves a damaged
last record).

What is archived: for every HTTP response received (each redirect hop and error responses
too), a `response` record and the `request` record that asked for it. Bodies are stored as
rqcrawl read them, after any Content-Encoding was decoded and chunked transfer undone, so
those two headers are removed and Content-Length states the stored length. Bodies rqcrawl
does not download (non-HTML pages, redirects, error responses) are archived as headers only,
marked `WARC-Truncated: unspecified`; responses whose body failed to download or was cut
(over the size cap, too slow, connection lost) and robots.txt files (read by the robots
gate, not by the page fetch) are not archived.

Revisits (crawls with `revisit`): a page that did not change since the URL's last visit is a
`revisit` record (headers only) instead of a `response`: profile `server-not-modified` for a
304 answered to a conditional GET, `identical-payload-digest` (with the body's
WARC-Payload-Digest) for a body whose SHA-1 is the last visit's. WARC-Refers-To-Target-URI is
the URL itself; WARC-Refers-To-Date is left out (the table keeps no date of the capture).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.clients.base import HttpResponse
from rqcrawl.fetch.http import Archive, no_archive
from rqcrawl.lru import LRU
from rqcrawl.parse.changes import Prior

if TYPE_CHECKING:  # warcio only for crawls that archive (a tenth of a stock job's imports)
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

# Headers that describe bytes on the wire which the archived body no longer has.
_WIRE_HEADERS = {"content-encoding", "transfer-encoding", "content-length"}
_PROFILE = "http://netpreserve.org/warc/1.0/revisit/"
NOT_MODIFIED_PROFILE = _PROFILE + "server-not-modified"
IDENTICAL_PROFILE = _PROFILE + "identical-payload-digest"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


class WarcFiles:
    """The WARC files one worker process writes for one crawl, rotated by size; its slots
    (threads) share them, one record pair at a time."""

    def __init__(self, directory: Path, crawl: str, worker: str, max_bytes: int):
        self.directory = directory
        self.crawl = crawl
        self.owner = f"{_safe(socket.gethostname())}-{_safe(worker)}"
        self.max_bytes = max_bytes
        self._name = re.compile(
            re.escape(crawl) + r"-\d{14}-(\d{5})-" + re.escape(self.owner) + r"\.warc\.gz"
        )
        self._file: io.BufferedWriter | None = None
        self._writer: WARCWriter | None = None
        self._lock = threading.Lock()

    def write(self, resp: HttpResponse, body: bytes | None, last_digest: str | None = None) -> None:
        """Archive `resp` (and its request) with `body`, or its headers only when None; as a
        revisit when it is a 304 or its body's SHA-1 is `last_digest` (the last visit's)."""
        with self._lock:
            writer = self._writer or self._open()
            writer.write_request_response_pair(
                _request_record(writer, resp), _record(writer, resp, body, last_digest)
            )
            self._rotate()

    def write_conversion(self, url: str, html: str) -> None:
        """Archive the DOM a browser rendered from the response of `url` (rqcrawl.render.browser),
        as a `conversion` record: what the page became, beside what the server sent."""
        payload = html.encode("utf-8")
        with self._lock:
            writer = self._writer or self._open()
            record = writer.create_warc_record(
                url, "conversion", payload=io.BytesIO(payload), length=len(payload),
                warc_content_type="text/html; charset=utf-8",
                warc_headers_dict={"WARC-Refers-To-Target-URI": url},
            )  # fmt: skip
            writer.write_record(record)
            self._rotate()

    def close(self) -> None:
        with self._lock:
            self._close()

    def _rotate(self) -> None:
        if self._file.tell() >= self.max_bytes:
            self._close()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = self._writer = None

    def _open(self) -> WARCWriter:
        path, fresh = self._current_path()
        self._file = open(path, "ab")
        from warcio.warcwriter import WARCWriter

        self._writer = WARCWriter(self._file, gzip=True)
        if fresh:
            info = {
                "software": f"rqcrawl/{version('rqcrawl')}",
                "format": "WARC File Format 1.0",
                "hostname": socket.gethostname(),
                "crawl": self.crawl,
                "description": "responses as rqcrawl read them, see rqcrawl/fetch/warc.py",
            }
            self._writer.write_record(self._writer.create_warcinfo_record(path.name, info))
        return self._writer

    def _current_path(self) -> tuple[Path, bool]:
        """This worker's newest file if it has room, else a new one (and True)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        mine = sorted(
            (int(m.group(1)), p)
            for p in self.directory.iterdir()
            if (m := self._name.fullmatch(p.name))
        )
        if mine and mine[-1][1].stat().st_size < self.max_bytes:
            return mine[-1][1], False
        serial = mine[-1][0] + 1 if mine else 0
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        return self.directory / f"{self.crawl}-{stamp}-{serial:05d}-{self.owner}.warc.gz", True


def _record(writer: WARCWriter, resp: HttpResponse, body: bytes | None, last: str | None):
    """The response's record: a revisit when it repeats the last visit, else a response."""
    if resp.status == 304:
        return _revisit_record(writer, resp, {"WARC-Profile": NOT_MODIFIED_PROFILE})
    sha1 = hashlib.sha1(body).digest() if body is not None and last else None
    if sha1 is not None and sha1.hex() == last:
        return _revisit_record(
            writer, resp,
            {"WARC-Profile": IDENTICAL_PROFILE,
             "WARC-Payload-Digest": "sha1:" + base64.b32encode(sha1).decode()},
        )  # fmt: skip
    return _response_record(writer, resp, body)


def _revisit_record(writer: WARCWriter, resp: HttpResponse, headers: dict):
    headers["WARC-Refers-To-Target-URI"] = resp.url
    return writer.create_warc_record(
        resp.url, "revisit", http_headers=_http_headers(resp, []), warc_headers_dict=headers
    )


def _response_record(writer: WARCWriter, resp: HttpResponse, body: bytes | None):
    extra, length = {}, []
    if body is None:
        extra["WARC-Truncated"] = "unspecified"
        declared = resp.headers.get("content-length")
        if declared is not None:
            length.append(("Content-Length", declared))
    else:
        length.append(("Content-Length", str(len(body))))
    return writer.create_warc_record(
        resp.url,
        "response",
        payload=io.BytesIO(body or b""),
        length=len(body or b""),
        http_headers=_http_headers(resp, length),
        warc_headers_dict=extra,
    )


def _http_headers(resp: HttpResponse, length: list[tuple[str, str]]) -> StatusAndHeaders:
    """The response's status line and headers as received, but for those of the wire (see
    the module docstring), with `length` as its Content-Length, if any."""
    headers = [(k, v) for k, v in resp.headers.lines if k.lower() not in _WIRE_HEADERS]
    from warcio.statusandheaders import StatusAndHeaders

    return StatusAndHeaders(
        f"{resp.status} {resp.reason}".strip(), headers + length, protocol=resp.http_version
    )


def _request_record(writer: WARCWriter, resp: HttpResponse):
    req = resp.request
    parts = urlsplit(req.url)
    path = parts.path or "/"
    path += f"?{parts.query}" if parts.query else ""
    headers = [("Host", parts.netloc), *req.headers.items()]
    from warcio.statusandheaders import StatusAndHeaders

    status = StatusAndHeaders(f"{req.method} {path} HTTP/1.1", headers, is_http_request=True)
    return writer.create_warc_record(
        req.url, "request", payload=io.BytesIO(b""), length=0, http_headers=status
    )


FILES_KEPT = 32  # (crawl, worker) pairs whose WARC file a process keeps open
_open_files: LRU[tuple[str, str, str], WarcFiles] = LRU(FILES_KEPT, on_evict=WarcFiles.close)


def archive(
    crawl: str, cfg: CrawlConfig, worker: str | None, prior: Prior | None = None
) -> Archive:
    """Where `worker`'s responses of `crawl` go: its WARC files when the crawl has
    `warc_dir` (a path on the worker's own machine, relative to its working directory).
    With the `prior` visit of the URL, an unchanged response is a revisit record."""
    if not cfg.warc_dir:
        return no_archive
    files = _files(crawl, cfg, worker)
    if prior is None or prior.digest is None:
        return files.write
    return functools.partial(files.write, last_digest=prior.digest)


def conversion(crawl: str, cfg: CrawlConfig, worker: str | None) -> Callable[[str, str], None]:
    """Where `worker`'s rendered pages of `crawl` go (WarcFiles.write_conversion); the crawl
    has `warc_dir`."""
    return _files(crawl, cfg, worker).write_conversion


def _files(crawl: str, cfg: CrawlConfig, worker: str | None) -> WarcFiles:
    key = (crawl, cfg.warc_dir, worker or "")
    return _open_files.get(key) or _open_files.put(
        key, WarcFiles(Path(cfg.warc_dir), crawl, worker or f"pid{os.getpid()}", cfg.warc_max_bytes)
    )


def crawl_files(directory: str | os.PathLike, crawl: str) -> list[Path]:
    """The WARC files of `crawl` in `directory` (every worker's, by the names WarcFiles gives
    them), in name order; none if the directory does not exist."""
    name = re.compile(re.escape(crawl) + r"-\d{14}-\d{5}-[A-Za-z0-9_.-]+\.warc\.gz")
    folder = Path(directory)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if name.fullmatch(p.name) and p.is_file())


def forget(crawl: str) -> None:
    """Close the WARC files of `crawl` (purged, its name now used by another crawl)."""
    _open_files.pop_where(lambda key: key[0] == crawl)

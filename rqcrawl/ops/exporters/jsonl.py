"""JSON lines: one record per line, the user's fields as one object (`fields`), every control
character a JSON escape (rqcrawl.untrusted.inert_json)."""

from __future__ import annotations

from collections.abc import Iterable

from rqcrawl.ops.exporters.base import Exporter
from rqcrawl.untrusted import inert_json


class JsonLinesExporter(Exporter):
    extension = ".jsonl"

    def write(self, records: Iterable[dict]) -> int:
        lines = [inert_json(r) + "\n" for r in records]
        self.out.writelines(lines)
        return len(lines)

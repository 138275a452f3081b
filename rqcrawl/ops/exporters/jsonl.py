"""JSON lines: one record per line, the user's fields as one object (`fields`)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from rqcrawl.ops.exporters.base import Exporter


class JsonLinesExporter(Exporter):
    extension = ".jsonl"

    def write(self, records: Iterable[dict]) -> int:
        lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in records]
        self.out.writelines(lines)
        return len(lines)

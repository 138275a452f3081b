"""Parquet (needs the `parquet` extra, pyarrow): one typed column per field of FIELDS, the
counts as integers, the flags as booleans, the rest as text; `fields`, `content` and `via`
as JSON text, since their shape differs from page to page and a Parquet schema is fixed.

A Parquet file is readable only once its footer is written: records are safe on `close`,
not on `flush` (a follower acknowledges them when it closes or rotates the file).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from rqcrawl.frontier.records import FIELDS, FLAGS, FLOATS, INTEGERS
from rqcrawl.ops.exporters.base import Exporter

JSON_COLUMNS = ["fields", "content"]


class ParquetExporter(Exporter):
    extension = ".parquet"
    binary = True
    durable_on_flush = False

    writer = None

    def write(self, records: Iterable[dict]) -> int:
        rows = [self._row(r) for r in records]
        if rows:
            if self.writer is None:
                self._open()
            self.writer.write_table(pa.Table.from_pylist(rows, schema=self.schema))
        return len(rows)

    def _open(self) -> None:
        def kind(name: str) -> pa.DataType:
            if name in INTEGERS:
                return pa.int64()
            return pa.float64() if name in FLOATS else pa.bool_() if name in FLAGS else pa.string()

        self.schema = pa.schema([(n, kind(n)) for n in FIELDS + JSON_COLUMNS])
        self.writer = pq.ParquetWriter(self.out, self.schema)

    @staticmethod
    def _row(record: dict) -> dict:
        row = {}
        for name in FIELDS + JSON_COLUMNS:
            value = record.get(name)
            typed = name in INTEGERS or name in FLOATS or name in FLAGS
            text = value is None or typed or isinstance(value, str)
            row[name] = value if text else json.dumps(value, ensure_ascii=False)
        return row

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        super().close()

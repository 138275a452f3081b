"""What every exporter is: a writer of records to one open file, in one format.

An exporter is made for one file (a follower's rotation makes a new one per file), is given
records in batches and says when what it was given is safe on disk: `durable_on_flush`
exporters (JSON lines, CSV) after `flush`, the others (Parquet, whose footer is written last)
only after `close`. A follower acknowledges records to Redis only once they are durable.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence
from typing import IO, ClassVar


class Exporter:
    """Records to one file. Subclasses set `extension`, `binary`, `durable_on_flush` and
    implement `write`; `flush` and `close` cover a plain stream."""

    extension: ClassVar[str] = ""  # a file name's ending, dot included (".jsonl")
    binary: ClassVar[bool] = False  # the file is opened in binary mode
    durable_on_flush: ClassVar[bool] = True  # see the module's docstring
    wants_field_names: ClassVar[bool] = False  # an export reads the user fields' names first

    def __init__(
        self,
        out: IO,
        field_names: Sequence[str] | None = None,
        raw_csv: bool = False,
        append: bool = False,
    ) -> None:
        """`out`: the open file, at its end. `field_names`: the user fields' names when known
        before the first record (an export reads them first; a follower cannot). `raw_csv`:
        the CSV exporter's cells as recorded (see csv.safe_cell). `append`: the file already
        holds records of this format (a CSV file its header)."""
        self.out = out
        self.field_names = field_names
        self.raw_csv = raw_csv
        self.append = append

    def write(self, records: Iterable[dict]) -> int:
        """Write records; returns how many."""
        raise NotImplementedError

    def flush(self) -> None:
        """Push what was written to the disk (fsync where the stream has a file)."""
        self.out.flush()
        try:
            os.fsync(self.out.fileno())
        except (OSError, io.UnsupportedOperation):  # a pipe, a terminal, a StringIO
            pass

    def close(self) -> None:
        """Finish the file (a format's footer) and make it durable; the caller closes `out`."""
        self.flush()

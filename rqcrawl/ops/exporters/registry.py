"""The exporter of a format name, from the `exporters` setting: name -> "module:Class"."""

from __future__ import annotations

from collections.abc import Mapping

from rqcrawl.extras import MissingExtra, extra_for
from rqcrawl.loading import load_class
from rqcrawl.ops.exporters.base import Exporter

# The formats every crawl has; the `exporters` setting adds others (or replaces one).
BUILTIN = {
    "jsonl": "rqcrawl.ops.exporters.jsonl:JsonLinesExporter",
    "csv": "rqcrawl.ops.exporters.csv:CsvExporter",
    "parquet": "rqcrawl.ops.exporters.parquet:ParquetExporter",  # the `parquet` extra
}


def formats(added: Mapping[str, str] = ()) -> dict[str, str]:
    """Every format: the built-in ones and a crawl's `exporters` setting."""
    return {**BUILTIN, **dict(added)}


class UnknownFormat(ValueError):
    """A format the setting does not name, or whose class cannot be loaded."""


def exporter_class(exporters: Mapping[str, str], fmt: str) -> type[Exporter]:
    """The class named for `fmt`; UnknownFormat (one line) when there is none, its module is
    missing (pyarrow for Parquet: the `parquet` extra) or it is no Exporter."""
    path = exporters.get(fmt)
    if path is None:
        raise UnknownFormat(f"unknown export format {fmt!r}: use one of {', '.join(exporters)}")
    try:
        with extra_for(f"export format {fmt!r}"):
            return load_class(path, Exporter)
    except MissingExtra as exc:
        raise UnknownFormat(str(exc)) from None
    except (ImportError, AttributeError) as exc:
        raise UnknownFormat(f"export format {fmt!r} ({path}) cannot be loaded: {exc}") from None
    except TypeError:
        raise UnknownFormat(f"export format {fmt!r}: {path} is not an Exporter") from None


def format_of(exporters: Mapping[str, str], path: str) -> str:
    """The format a file name asks for by its extension (`.csv`), else JSON lines. A format
    that cannot be loaded is passed over, unless the name asks for it by its own name
    (`pages.parquet` without the parquet extra): that is UnknownFormat, not JSON lines in a
    file named .parquet."""
    for fmt in exporters:
        try:
            if path.endswith(exporter_class(exporters, fmt).extension):
                return fmt
        except UnknownFormat:
            if path.endswith(f".{fmt}"):
                raise
            continue
    return "jsonl"

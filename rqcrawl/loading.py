"""Code named by a setting (a hook, an HTTP client, an exporter) as "module:Class": imported
as the workers import it, and checked to be a subclass of what the setting asks for."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TypeVar

T = TypeVar("T")


def load_class(path: str, base: type[T]) -> type[T]:
    """The class at `path` ("module:Class"). Raises ImportError (one line, whatever the
    module raised while importing) or AttributeError when it cannot be found, TypeError when
    it is not a subclass of `base`."""
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ImportError(f"{path!r} is not module:Class")
    try:
        imported = importlib.import_module(module)
    except ImportError:
        raise
    except Exception as exc:  # noqa: BLE001 - a module can fail to import in any way
        raise ImportError(f"importing {module!r} raised {_first_line(exc)}") from None
    found = getattr(imported, attr)
    if not (isinstance(found, type) and issubclass(found, base)):
        raise TypeError(f"{path} is not a {base.__name__}")
    return found


def on_worker_path() -> None:
    """Put the working directory on the import path, as `rq worker` does for its jobs: a
    check made when a crawl is seeded then finds the modules the workers will."""
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())


def _first_line(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__

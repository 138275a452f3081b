"""A class named by a setting as "module:Class" (an HTTP client, an exporter): imported, and
checked to be a subclass of what the setting asks for."""

from __future__ import annotations

import importlib
from typing import TypeVar

T = TypeVar("T")


def load_class(path: str, base: type[T]) -> type[T]:
    """The class at `path` ("module:Class"). Raises ImportError or AttributeError when it
    cannot be found, TypeError when it is not a subclass of `base`."""
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ImportError(f"{path!r} is not module:Class")
    found = getattr(importlib.import_module(module), attr)
    if not (isinstance(found, type) and issubclass(found, base)):
        raise TypeError(f"{path} is not a {base.__name__}")
    return found

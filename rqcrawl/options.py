"""Keyword arguments taken into a parameter object: a function that takes many options by
name (the Python API's, a command's) keeps its call signature and works on one object."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def taken(options: type[T], given: dict[str, Any]) -> T:
    """The dataclass `options` of the fields of it in `given`, taken out of `given` (what
    is left is the caller's to use)."""
    return options(**{f.name: given.pop(f.name) for f in fields(options) if f.name in given})


def gathered(options: type, into: str) -> Callable[[Callable], Callable]:
    """A decorator: the keyword arguments the function gets that are fields of the dataclass
    `options` come to it as one argument `into` (a click command's options, say; put it
    below their decorators)."""

    def decorate(function: Callable) -> Callable:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if into in kwargs:  # it would be replaced silently
                raise TypeError(f"{function.__name__}() takes {into!r} from its fields only")
            kwargs[into] = taken(options, kwargs)
            return function(*args, **kwargs)

        return wrapper

    return decorate

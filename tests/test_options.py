"""Keyword arguments taken into a parameter object (rqcrawl.options): the API's and the
commands' many options reach their function as one object, the rest as they were."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rqcrawl.options import gathered, taken


@dataclass(frozen=True)
class Where:
    url: str | None = None
    data_dir: str = ".rqcrawl"


def test_taken_takes_its_fields_out_of_the_arguments_and_leaves_the_rest():
    given = {"url": "redis://h", "delay": 0.5, "retries": None}
    assert taken(Where, given) == Where("redis://h", ".rqcrawl")
    assert given == {"delay": 0.5, "retries": None}


def test_gathered_hands_its_fields_as_one_argument_and_no_field_twice():
    @gathered(Where, "where")
    def command(name: str, where: Where, **flags) -> tuple:
        return name, where, flags

    assert command("c", url=None, data_dir="d", max_depth=2) == (
        "c",
        Where(None, "d"),
        {"max_depth": 2},
    )
    assert command.__name__ == "command"  # (click names a command after its function)
    with pytest.raises(TypeError):
        command("c", where=Where())  # given twice

"""The user's hook: loading it by path, calling it, and surviving whatever it does."""

from __future__ import annotations

import itertools
import sys
import textwrap

import pytest
from parsel import Selector

from rqcrawl.parse import hooks
from rqcrawl.parse.hooks import HookError, HookPage

_names = itertools.count()

HOOKS = """
def good(page):
    return {"fields": {"h1": page.selector.css("h1::text").get(), "n": len(page.text)},
            "links": ["next.html", "/abs?b=2&a=1", "mailto:x@example.org"]}

def nothing(page):
    return None

def boom(page):
    return 1 / 0

def wrong_type(page):
    return ["not", "a", "dict"]

def wrong_key(page):
    return {"field": {}}

def not_json(page):
    return {"fields": {"x": object()}}

def bad_links(page):
    return {"links": "next.html"}

def malformed_links(page):
    return {"fields": {"x": 1}, "links": ["http://[bad/", "ok.html", "http://a b/"]}

value = 42
"""


@pytest.fixture
def module(tmp_path, monkeypatch):
    """A fresh hook module (a new name each time: loaded hooks are cached per process)."""
    name = f"userhooks{next(_names)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(HOOKS))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def page(text: str = "<h1>Hello</h1>") -> HookPage:
    return HookPage(
        url="http://example.com/d/p.html",
        final_url="http://example.com/d/q.html",
        status=200,
        headers={"content-type": "text/html"},
        text=text,
        selector=Selector(text=text),
        depth=1,
    )


def test_fields_and_links_resolved_against_the_final_url(module):
    result = hooks.run(f"{module}:good", page())
    assert result.error is None
    assert result.fields == {"h1": "Hello", "n": 14}
    assert result.links == ["http://example.com/d/next.html", "http://example.com/abs?a=1&b=2"]
    assert result.bad_links == 1


def test_malformed_links_of_a_hook_are_counted_and_the_rest_kept(module):
    result = hooks.run(f"{module}:malformed_links", page())
    assert result.error is None and result.fields == {"x": 1}
    assert result.links == ["http://example.com/d/ok.html"]
    assert result.bad_links == 2


def test_dotted_path_form(module):
    assert hooks.run(f"{module}.good", page()).fields["h1"] == "Hello"


def test_none_means_nothing_to_add(module):
    result = hooks.run(f"{module}:nothing", page())
    assert (result.fields, result.links, result.error) == ({}, [], None)


def test_a_hook_that_raises_gives_an_error_not_an_exception(module):
    result = hooks.run(f"{module}:boom", page())
    assert result.error == "hook raised ZeroDivisionError: division by zero"
    assert (result.fields, result.links) == ({}, [])


@pytest.mark.parametrize(
    ("func", "message"),
    [
        ("wrong_type", "must return None or a dict"),
        ("wrong_key", "must return None or a dict"),
        ("not_json", "'fields' must be JSON values"),
        ("bad_links", "'links' must be a list of strings"),
    ],
)
def test_a_bad_return_value_is_an_error(module, func, message):
    assert message in hooks.run(f"{module}:{func}", page()).error


def test_missing_module_or_function_is_a_one_line_error(module):
    with pytest.raises(HookError, match="cannot import hook module 'no_such_module_xyz'"):
        hooks.check("no_such_module_xyz:f")
    with pytest.raises(HookError, match="has no function 'missing'"):
        hooks.check(f"{module}:missing")
    with pytest.raises(HookError, match="has no function 'value'"):
        hooks.check(f"{module}:value")
    result = hooks.run("no_such_module_xyz:f", page())
    assert result.error.startswith("cannot import hook module")


def test_a_module_that_fails_to_import_is_a_hook_error(tmp_path, monkeypatch):
    (tmp_path / "brokenhook.py").write_text("raise RuntimeError('no config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(HookError, match="RuntimeError: no config"):
        hooks.check("brokenhook:f")


def test_no_hook_is_fine():
    path = list(sys.path)
    hooks.check("")  # no error, and nothing to import: the import path is left alone
    assert sys.path == path


def test_hooks_are_imported_once(module):
    assert hooks.load(f"{module}:good") is hooks.load(f"{module}:good")

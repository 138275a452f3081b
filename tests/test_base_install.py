"""The base install: `pip install rqcrawl` without extras runs every command that needs none,
and an optional part asked for without its extra is one line naming it. The extras' packages
are installed in the test venv, so these tests hide them (tests/without_extras) from the
processes they start: .ci/run also runs the README's first command in a venv without them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import BIN, ROOT

from rqcrawl.extras import EXTRAS

# The modules whose role is an optional part: each imports its extra's package at the top.
OPTIONAL_MODULES = {
    "rqcrawl.render.browser": "playwright",
    "rqcrawl.fetch.clients.httpx_client": "httpx",
    "rqcrawl.ops.exporters.parquet": "pyarrow",
    "rqcrawl.bench.spider": "scrapy",
    "rqcrawl.bench.politespider": "scrapy",
    "rqcrawl.bench.politecrawlee": "crawlee",
    "rqcrawl.bench.rendered": "playwright",
}


def without_extras(env: dict[str, str] | None = None) -> dict[str, str]:
    """An environment in which Python cannot import any extra's package."""
    env = dict(os.environ if env is None else env)
    path = [str(ROOT / "tests" / "without_extras"), env.get("PYTHONPATH", "")]
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, path)),
            "RQCRAWL_BLOCKED": ",".join(EXTRAS)}  # fmt: skip


IMPORT_ALL = """
import importlib, pkgutil, rqcrawl
for found in pkgutil.walk_packages(rqcrawl.__path__, "rqcrawl."):
    try:
        importlib.import_module(found.name)
    except ModuleNotFoundError as exc:
        print(found.name, exc.name.partition(".")[0])
"""


def test_only_the_optional_parts_import_an_extra():
    """Every module a base command may load imports with the extras' packages hidden; the
    few that fail are the optional parts themselves, each for its own extra."""
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL], env=without_extras(), capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    failing = dict(line.split() for line in done.stdout.splitlines())
    assert set(failing) == set(OPTIONAL_MODULES), failing
    for module, package in failing.items():
        assert EXTRAS[package] == EXTRAS[OPTIONAL_MODULES[module]], (module, package)


def test_the_blocker_hides_an_installed_extra():
    """The check above can fail: playwright is installed here, and hidden."""
    code = "import playwright"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
    hidden = subprocess.run(
        [sys.executable, "-c", code], env=without_extras(), capture_output=True, timeout=60
    )
    assert hidden.returncode == 1 and b"ModuleNotFoundError" in hidden.stderr


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["--render-workers", "1", "-o", "pages.jsonl"], "render"),
        (["-o", "pages.parquet"], "parquet"),
    ],
)
def test_an_optional_part_without_its_extra_is_one_line(tmp_path, args, extra):
    """Said before anything starts: no Redis, no seed, nothing to clean up."""
    done = subprocess.run(
        [str(BIN / "rqcrawl"), "crawl", "http://127.0.0.1:9/", "--allow-private", *args,
         "--data-dir", str(tmp_path / "data")],
        cwd=tmp_path, env=without_extras(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("Error: ")
    assert line.endswith(f"needs the {extra} extra: pip install 'rqcrawl[{extra}]'")
    assert not (tmp_path / "data").exists()

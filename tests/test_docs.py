"""The docs: the README as a landing page whose first crawl works offline as written, the
reference pages generated from the code and current, the examples run, the site builds."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

from helpers import BIN, ROOT, read_jsonl
from test_base_install import without_extras

from rqcrawl.config import CrawlConfig
from rqcrawl.demo import DemoSite

README = ROOT / "README.md"
EXAMPLES = ROOT / "docs" / "examples"


def generator():
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_reference_pages_are_generated_from_the_current_code(capsys):
    assert generator().main(["--check"]) == 0, capsys.readouterr().out


def test_every_setting_is_in_the_settings_reference():
    page = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    missing = [f.name for f in fields(CrawlConfig) if f"`{f.name}`" not in page]
    assert not missing


def test_the_settings_reference_groups_every_setting_of_the_defaults_file():
    groups = generator().setting_groups((ROOT / "conf" / "default.toml").read_text())
    named = [name for group in groups for name, _ in group.settings]
    assert sorted(named) == sorted(f.name for f in fields(CrawlConfig))


def test_the_docs_site_builds_strict(tmp_path):
    done = subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "settings" / "index.html").exists()


def test_readme_is_a_landing_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    assert "rq worker crawl" in README.read_text() and "rqcrawl seed" in README.read_text()


def first_commands() -> list[str]:
    """The README's first code block's commands (comments left out)."""
    block = re.search(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)[1]
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    assert first_commands()[1] in ci


def test_readme_first_crawl_works_offline_as_written(tmp_path):
    """The crawl part of the README's first command, at default settings, with this venv as
    a base install (no extra's package can be imported by it or its workers)."""
    crawl = first_commands()[0].split("&&")[-1].strip().replace(".venv/bin/", f"{BIN}/")
    env = without_extras({**os.environ, "TMPDIR": str(tmp_path)})  # the demo's data: TMPDIR
    done = subprocess.run(
        crawl.split(), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    logs = Path(re.search(r"logs in (\S+)", done.stderr)[1])  # still there once it ended,
    assert sorted(p.name for p in logs.iterdir()) == ["1.log", "2.log"]
    assert [p.name for p in logs.parent.iterdir()] == ["workers"]  # its Redis data gone
    rows = read_jsonl(tmp_path / "pages.jsonl")
    records = {r["url"].split("/", 3)[-1]: r for r in rows}  # by path: both homes are ""
    assert records["private/draft.html"]["outcome"] == "robots_disallowed"
    assert records["orphan.html"]["source"] == "sitemap"
    assert records["guide/missing.html"]["reason"] == "http_404"
    assert records["archive/2026.html"]["depth"] == 3
    assert "archive/2025.html" not in records  # four clicks deep: past --max-depth 3
    assert sum(r["outcome"] == "fetched" for r in rows) == 14


def test_python_api_example_runs(tmp_path):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "api_crawl.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "16 rows written"
    assert re.match(r"http_404 http://127\.0\.0\.1:\d+/guide/missing\.html", done.stdout)


def test_python_records_example_runs(tmp_path):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "api_records.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "14 pages fetched"
    assert re.search(r"http://127\.0\.0\.1:\d+/ [1-9]\d* characters of markdown", done.stdout)


def test_extraction_example_with_its_hook(tmp_path):
    site = DemoSite().start()
    try:
        done = subprocess.run(
            [
                str(BIN / "rqcrawl"), "crawl", *site.urls, "-o", str(tmp_path / "out.jsonl"),
                "--config", str(EXAMPLES / "extraction.toml"), "--allow-private",
                "--delay", "0", "--max-depth", "1", "--data-dir", str(tmp_path / "data"),
            ],
            cwd=EXAMPLES, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    finally:
        site.stop()
    assert done.returncode == 0, done.stderr
    home = next(r for r in read_jsonl(tmp_path / "out.jsonl") if r["title"] == "Demo docs")
    assert home["fields"]["heading"] == "Demo docs"
    assert home["fields"]["list_items"] == 4
    assert len(home["fields"]["links"]) == 4
    assert not any(r.get("hook_error") for r in read_jsonl(tmp_path / "out.jsonl"))

"""End to end: fields by CSS and XPath, link rules and a hook, through real workers to the
JSON lines and CSV exports."""

from __future__ import annotations

import csv
import json

from helpers import read_jsonl, rqcrawl, seed_local, wait_finished
from servers import HTTPSite, reply
from test_cli import assert_one_line_error

from rqcrawl.workers.runner import LocalWorkers

PAGES = {
    "/": '<h1>Home</h1><span class="price">3</span><span class="price">5</span>'
    '<a href="/a.html">a</a><a href="/boom.html">boom</a>'
    '<a href="/private/secret.html">denied by regex</a><a href="/report.pdf">pdf</a>'
    '<a href="/img/photo.JPG">jpg</a><a href="{other}/via-other-host.html">denied domain</a>',
    "/a.html": "<h1>Page A</h1>",
    "/boom.html": "<h1>Boom</h1>",
    "/hooked.html": "<h1>Found by the hook</h1>",
}
DENIED = {"/private/secret.html", "/report.pdf", "/img/photo.JPG", "/via-other-host.html"}

HOOK = """
def on_page(page):
    if page.url.endswith("/boom.html"):
        raise ValueError("cannot handle " + page.url)
    links = ["/hooked.html"] if page.url.endswith("/") else []
    return {"fields": {"size": len(page.text), "status": page.status}, "links": links}
"""


def body(path: str, port: int) -> str:
    """The page at `path`; its `other` link is the same server named localhost."""
    return f"<html><body>{PAGES[path].format(other=f'http://localhost:{port}')}</body></html>"


def handle(req):
    if req.path in PAGES:
        port = int(req.headers["Host"].rsplit(":", 1)[1])
        reply(req, 200, body(req.path, port).encode(), "text/html; charset=utf-8")
    else:
        reply(req, 404, b"not found")


def test_fields_link_rules_and_hook_reach_the_exports(redis_url, tmp_path, monkeypatch):
    (tmp_path / "sitehook.py").write_text(HOOK)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # for `rqcrawl seed` and the workers
    with HTTPSite(handle, max_requests=100) as http:
        settings = tmp_path / "crawl.toml"
        settings.write_text(
            "[crawl]\n"
            f'scope_hosts = ["127.0.0.1:{http.port}", "localhost:{http.port}"]\n'
            'link_deny = ["/private/"]\n'
            'link_deny_domains = ["localhost"]\n'
            'hook = "sitehook:on_page"\n'
            "[crawl.fields]\n"
            'heading = { css = "h1::text" }\n'
            "prices = { xpath = \"//span[@class='price']/text()\", all = true }\n"
        )
        seed_local(redis_url, http.base + "/", "fields", 2, "--config", str(settings))
        with LocalWorkers(redis_url, 2, worker_class=None, log_dir=tmp_path):
            final = wait_finished(redis_url, "fields")

    assert not DENIED & set(http.hits)
    assert set(http.hits) == {"/robots.txt", "/", "/a.html", "/boom.html", "/hooked.html"}
    dropped = {k: v for k, v in final["links_dropped"].items() if v}
    assert dropped == {"denied_url": 1, "denied_extension": 2, "denied_domain": 1}, dropped
    assert final["hook_errors"] == 1

    out = tmp_path / "pages.jsonl"
    rqcrawl(redis_url, "export", "fields", "-o", str(out))
    rows = {r["url"].removeprefix(http.base): r for r in read_jsonl(out)}
    home = rows["/"]
    assert home["fields"] == {
        "heading": "Home",
        "prices": ["3", "5"],
        "size": len(body("/", http.port)),
        "status": 200,
    }
    assert home["hook_error"] is None
    assert home["outlinks"] == 7  # six on the page, one from the hook
    assert rows["/a.html"]["fields"]["heading"] == "Page A"
    assert rows["/a.html"]["fields"]["prices"] == []
    assert rows["/hooked.html"]["fields"]["heading"] == "Found by the hook"
    assert rows["/hooked.html"]["depth"] == 1
    boom = rows["/boom.html"]
    assert boom["outcome"] == "fetched"
    assert boom["hook_error"] == "hook raised ValueError: cannot handle " + http.base + "/boom.html"
    assert boom["fields"] == {"heading": "Boom", "prices": []}  # selectors still ran

    csv_out = tmp_path / "pages.csv"
    rqcrawl(redis_url, "export", "fields", "-o", str(csv_out))
    with open(csv_out, newline="") as fh:
        reader = csv.DictReader(fh)
        table = {r["url"].removeprefix(http.base): r for r in reader}
    assert reader.fieldnames[-4:] == [
        "fields.heading",
        "fields.prices",
        "fields.size",
        "fields.status",
    ]
    assert table["/"]["fields.heading"] == "Home"
    assert json.loads(table["/"]["fields.prices"]) == ["3", "5"]
    assert table["/"]["fields.status"] == "200"
    assert table["/boom.html"]["fields.size"] == ""
    assert table["/boom.html"]["hook_error"].startswith("hook raised ValueError")


def test_bad_selector_regex_or_hook_is_a_one_line_error_at_seed(redis_url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # hooks are looked up in the working directory, like rq's
    (tmp_path / "failinghook.py").write_text("import no_such_dependency_xyz\n")
    cases = {
        '[crawl.fields]\nh = { css = "h1::txt" }\n': ("'fields.h'", "invalid css selector"),
        '[crawl.fields]\nh = { xpath = "//h1[" }\n': ("'fields.h'", "invalid xpath selector"),
        'link_deny = ["(unclosed"]\n': ("'link_deny'", "bad regular expression"),
        'hook = "no_such_module_xyz:f"\n': ("cannot import hook module 'no_such_module_xyz'",),
        'hook = "failinghook:f"\n': ("ModuleNotFoundError", "no_such_dependency_xyz"),
        'hook = "not a path"\n': ("'hook'", "package.module:function"),
    }
    for n, (text, words) in enumerate(cases.items()):
        settings = tmp_path / f"bad{n}.toml"
        settings.write_text(text)
        for command in ("seed", "crawl"):
            args = [command, "http://example.org/", "--config", str(settings), "--crawl", "x"]
            if command == "crawl":
                args += ["-o", str(tmp_path / "out.jsonl")]
            proc = rqcrawl(redis_url, *args, check=False)
            assert_one_line_error(proc, *words)
    assert rqcrawl(redis_url, "status", "x", check=False).returncode != 0  # nothing seeded

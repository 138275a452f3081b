"""The benchmark's site: deterministic, pages of the claimed size and link count, every page
reachable, served over keep-alive HTTP by the forked server."""

from __future__ import annotations

import http.client
from collections import deque

from rqcrawl.bench.site import (
    SiteServer,
    SiteSpec,
    link_targets,
    lookup,
    page_path,
    render,
    render_hosts,
)
from rqcrawl.parse.extract import parse

SPEC = SiteSpec(pages=300)
ORIGIN = "http://127.0.0.1:8000"


def test_the_site_is_the_same_every_time():
    assert render(SPEC, ORIGIN) == render(SPEC, ORIGIN)
    assert render(SPEC, ORIGIN) != render(SiteSpec(pages=300, seed=2), ORIGIN)


def test_pages_have_the_claimed_size_and_links():
    pages = render(SPEC, ORIGIN)
    assert len(pages) == SPEC.pages
    assert all(SPEC.min_bytes <= len(body) <= SPEC.max_bytes for body in pages.values())
    for path in ("/p0.html", "/d/p4.html", "/item?id=5&v=1"):
        page = parse(pages[path].decode(), ORIGIN + path)
        assert len(page.links) + page.bad_links <= SPEC.links
        assert page.bad_links == 3  # mailto:, javascript:, tel: (the other host is a URL)
        assert len(page.links) >= SPEC.links - 4 - 8  # some random targets repeat


def test_every_page_is_reachable_from_the_first():
    targets = link_targets(SPEC)
    seen, todo = {0}, deque([0])
    while todo:
        for j in targets[todo.popleft()]:
            if j not in seen:
                seen.add(j)
                todo.append(j)
    assert seen == set(range(SPEC.pages))


def test_over_several_hosts_each_page_is_on_one_host_and_its_links_reach_the_others():
    origins = [f"http://127.0.0.{h}:8000" for h in (1, 2, 3)]
    parts = render_hosts(SPEC, origins)
    assert [set(p) for p in parts] == [
        {page_path(i) for i in range(SPEC.pages) if i % 3 == h} for h in range(3)
    ]
    assert render_hosts(SPEC, [ORIGIN]) == [render(SPEC, ORIGIN)]
    links = parse(parts[0]["/p0.html"].decode(), origins[0] + "/p0.html").links
    for i in (1, 2, 3):  # tree children of page 0 on every host, each at its host's origin
        assert origins[i % 3] + page_path(i) in links


def test_item_pages_accept_their_parameters_in_any_order():
    pages = render(SPEC, ORIGIN)
    assert lookup(pages, "/item?v=1&id=5") == pages[page_path(5)]
    assert lookup(pages, "/item?id=6&v=1") is None  # page 6 lives at /p6.html
    assert lookup(pages, "/nowhere") is None


def test_the_server_answers_many_requests_on_one_connection():
    server = SiteServer(SPEC, procs=2).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        expected = render(SPEC, server.origin)
        for path in ("/p0.html", "/d/p1.html", "/item?v=1&id=2"):
            conn.request("GET", path)
            resp = conn.getresponse()
            assert resp.status == 200
            assert resp.read() == lookup(expected, path)
        conn.request("GET", "/missing")
        resp = conn.getresponse()
        assert resp.status == 404
        resp.read()
        conn.close()
    finally:
        server.stop()

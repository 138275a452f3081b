"""Seed priorities end to end: two sites seeded at different priorities into one crawl whose
window lets one URL through at a time; the sites' own request logs show the higher-priority
seed's pages fetched first within each level."""

from __future__ import annotations

from helpers import seed_local, wait_finished
from servers import HTTPSite
from testsite import Site

from rqcrawl.parse.urls import host_of
from rqcrawl.workers.runner import LocalWorkers


def level_one_times(http: HTTPSite) -> list[float]:
    """When the site's depth-1 pages were requested (everything but its seed /p0.html)."""
    return [at for at, path in http.log if path != "/p0.html"]


def test_the_higher_priority_seeds_pages_are_requested_first(redis_url, tmp_path):
    with (
        HTTPSite(Site(pages=12).handle, host="127.0.0.2") as low,
        HTTPSite(Site(pages=12).handle, host="127.0.0.3") as high,
    ):
        settings = tmp_path / "one.toml"  # one URL released at a time: the crawl's own order
        hosts = ", ".join(f'"{host_of(site.base)}"' for site in (low, high))
        settings.write_text(f"window = 1\nscope_hosts = [{hosts}]\n")
        common = ("--no-robots", "--config", str(settings))
        seed_local(redis_url, low.base + "/p0.html", "prio", 1, *common)
        seed_local(redis_url, high.base + "/p0.html", "prio", 1, "--priority", "4", *common)
        with LocalWorkers(redis_url, 2):
            final = wait_finished(redis_url, "prio")
    assert final["admitted"] == len(low.hits) + len(high.hits)
    assert max(level_one_times(high)) < min(level_one_times(low))

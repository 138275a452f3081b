"""The Crawlee side of `rqcrawl bench --web N --crawlee` and `--one-page`: Crawlee for Python's
ParselCrawler following every link of the seeds' hosts, with the options a polite Crawlee user
picks: its robots.txt option on (`respect_robots_txt_file`), and its per-host limit, the
ThrottlingRequestManager over the seeds' hosts (robots.txt's Crawl-delay and a 429's back-off
per host: Crawlee for Python has no per-host delay of its own), a depth limit; its
concurrency, HTTP client, user agent, retries and link extraction as they come. Storage in
memory (nothing left on disk). Run as its own process:
`python -m rqcrawl.bench.politecrawlee ITEMS_JSONL --max-depth 3 SEED...`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from urllib.parse import urlsplit

from crawlee import service_locator
from crawlee.crawlers import ParselCrawler, ParselCrawlingContext
from crawlee.request_loaders import ThrottlingRequestManager
from crawlee.storage_clients import MemoryStorageClient
from crawlee.storages import RequestQueue


async def crawl(seeds: list[str], items: str, max_depth: int) -> None:
    """Crawl from `seeds` to `max_depth`, one JSON line per page in `items`."""
    service_locator.set_storage_client(MemoryStorageClient())
    queue = await RequestQueue.open()
    hosts = sorted({urlsplit(seed).hostname or "" for seed in seeds})
    manager = ThrottlingRequestManager(
        queue, domains=hosts, request_manager_opener=RequestQueue.open
    )
    crawler = ParselCrawler(
        request_manager=manager,
        respect_robots_txt_file=True,
        max_crawl_depth=max_depth,
        configure_logging=False,
    )
    with open(items, "w", encoding="utf-8") as out:

        @crawler.router.default_handler
        async def page(context: ParselCrawlingContext) -> None:
            row = {"url": context.request.url, "status": context.http_response.status_code}
            out.write(json.dumps(row) + "\n")
            await context.enqueue_links(strategy="all")  # the web's hosts link to each other

        await crawler.run(seeds)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("items")
    parser.add_argument("--max-depth", type=int, default=3)
    parser.add_argument("seeds", nargs="+")
    args = parser.parse_args()
    asyncio.run(crawl(args.seeds, args.items, args.max_depth))


if __name__ == "__main__":
    main()

"""The Scrapy side of `rqcrawl bench --web N --scrapy`: a spider that follows every link of
the seeds' hosts, with the settings a polite Scrapy user picks (robots.txt obeyed, one
request at a time per host, a 1 s delay as rqcrawl's default, not randomised, depth limit),
Scrapy's user agent and link extraction as they come. Run as its own process:
`python -m rqcrawl.bench.politespider ITEMS_JSONL --max-depth 3 SEED...`; `--delay 0` is
Scrapy's default DOWNLOAD_DELAY (`bench --one-page`: Scrapy at its defaults, robots.txt obeyed
as its project template sets it).
"""

from __future__ import annotations

import argparse

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor

from rqcrawl.config import CrawlConfig

POLITE = {
    "ROBOTSTXT_OBEY": True,
    "DOWNLOAD_DELAY": CrawlConfig().delay,
    "DOWNLOAD_DELAY_JITTER": 0,  # Scrapy >= 2.14; RANDOMIZE_DOWNLOAD_DELAY before
    "RANDOMIZE_DOWNLOAD_DELAY": False,
    "CONCURRENT_REQUESTS": 16,  # Scrapy's default
    "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
    "HTTPERROR_ALLOW_ALL": True,
    "LOG_LEVEL": "ERROR",
    "TELNETCONSOLE_ENABLED": False,
}


class PoliteSpider(scrapy.Spider):
    name = "polite"

    def __init__(self, seeds: list[str], **kwargs):
        super().__init__(**kwargs)
        self.start_urls = seeds
        # No allowed_domains: Scrapy's offsite check does not take the hosts' ports (every
        # host here has one), and the web links nowhere else.
        self.links = LinkExtractor()

    def parse(self, response):
        yield {"url": response.url, "status": response.status}
        if hasattr(response, "text"):
            for link in self.links.extract_links(response):
                yield response.follow(link, callback=self.parse)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("items")
    parser.add_argument("--max-depth", type=int, default=3)
    parser.add_argument("--delay", type=float, default=POLITE["DOWNLOAD_DELAY"])
    parser.add_argument("seeds", nargs="+")
    args = parser.parse_args()
    settings = POLITE | {
        "DOWNLOAD_DELAY": args.delay,
        "DEPTH_LIMIT": args.max_depth,
        "FEEDS": {args.items: {"format": "jsonlines"}},
    }
    process = CrawlerProcess(settings)
    process.crawl(PoliteSpider, seeds=args.seeds)
    process.start()


if __name__ == "__main__":
    main()

"""The Scrapy side of `rqcrawl bench`: a spider doing what an rqcrawl job does (follow every
crawlable in-scope link once, record url, status, title and link count per page), run as its
own process: `python -m rqcrawl.bench.spider START_URL RESULT_JSON --concurrency 16`.

It writes its own measurements to RESULT_JSON: pages, the wall time from the spider's opening
to its last page (as rqcrawl's is from the seed to its last page), and the CPU time from
opening to closing and peak RSS of the process (from `resource`), so that Python's and
Scrapy's start-up count for neither crawler.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from urllib.parse import urlsplit

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class BenchSpider(scrapy.Spider):
    name = "bench"

    def __init__(self, start_url: str, result_path: str, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start_url]
        self.allowed_domains = [urlsplit(start_url).hostname]
        self.result_path = result_path
        self.pages = 0

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.opened, signal=signals.spider_opened)
        crawler.signals.connect(spider.closed_, signal=signals.spider_closed)
        return spider

    def opened(self, spider) -> None:
        self.t0, self.cpu0 = time.monotonic(), cpu_seconds()
        self.last = self.t0

    def closed_(self, spider, reason) -> None:
        result = {
            "pages": self.pages,
            "wall_s": self.last - self.t0,
            "cpu_s": cpu_seconds() - self.cpu0,
            "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "reason": reason,
        }
        with open(self.result_path, "w") as fh:
            json.dump(result, fh)

    def parse(self, response):
        self.pages += 1
        hrefs = response.css("a::attr(href), area::attr(href)").getall()
        yield {
            "url": response.url,
            "status": response.status,
            "title": response.css("title::text").get(),
            "outlinks": len(hrefs),
        }
        for h in hrefs:
            url = response.urljoin(h)
            if url.startswith(("http://", "https://")):
                yield scrapy.Request(url, callback=self.parse)
        self.last = time.monotonic()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("start_url")
    parser.add_argument("result")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--items", default="/dev/null", help="JSON lines feed of the pages")
    args = parser.parse_args()
    process = CrawlerProcess(
        {
            "CONCURRENT_REQUESTS": args.concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,  # one host: per-domain cap too
            "DOWNLOAD_DELAY": 0,  # Scrapy's default, like the disabled rqcrawl politeness
            "ROBOTSTXT_OBEY": False,
            "DEPTH_LIMIT": 0,
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
            "FEEDS": {args.items: {"format": "jsonlines"}},
        }
    )
    process.crawl(BenchSpider, start_url=args.start_url, result_path=args.result)
    process.start()


if __name__ == "__main__":
    main()

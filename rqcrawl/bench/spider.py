"""The Scrapy side of `rqcrawl bench`: a spider doing what an rqcrawl job does (follow every
crawlable in-scope link once, a page's links deduplicated without fragments, not to the file
types rqcrawl denies by default, Scrapy's IGNORED_EXTENSIONS; record url, status, title and
link count per answer, links only from HTML), run as its own process:
`python -m rqcrawl.bench.spider START_URL RESULT_JSON --concurrency 16`.
The settings (see main) are rqcrawl's in the bench: the same per-host concurrency cap, no
delay, no robots.txt, the same depth limit and user agent, no cache and no autothrottle.

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
from urllib.parse import urldefrag, urlsplit

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.http import HtmlResponse

from rqcrawl.config import DENIED_EXTENSIONS

DENIED_SUFFIXES = tuple("." + e for e in DENIED_EXTENSIONS)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class BenchSpider(scrapy.Spider):
    name = "bench"

    def __init__(self, start_url: str, result_path: str, **kwargs):
        super().__init__(**kwargs)
        self.start_url = start_url
        self.allowed_domains = [urlsplit(start_url).hostname]
        self.result_path = result_path
        self.pages = 0

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.opened, signal=signals.spider_opened)
        crawler.signals.connect(spider.closed_, signal=signals.spider_closed)
        return spider

    async def start(self):  # Scrapy 2.13 and later; start_requests before
        for request in self.start_requests():
            yield request

    def start_requests(self):
        """The seed as a link: a link back to it is a duplicate, as for rqcrawl (Scrapy's
        requests of start_urls skip the duplicate filter, and would fetch it twice)."""
        yield scrapy.Request(self.start_url, callback=self.parse)

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
        html = isinstance(response, HtmlResponse)  # rqcrawl parses only HTML too
        hrefs = response.css("a::attr(href), area::attr(href)").getall() if html else []
        yield {
            "url": response.url,
            "status": response.status,
            "title": response.css("title::text").get() if html else None,
            "outlinks": len(hrefs),
        }
        # each link once, without its fragment, as an rqcrawl job queues a page's links:
        # a page may link to one page hundreds of times (an index), and a Request each
        # would bill Scrapy for the dupefilter's work on all of them
        for url in dict.fromkeys(urldefrag(response.urljoin(h))[0] for h in hrefs):
            if url.startswith(("http://", "https://")) and not denied(url):
                yield scrapy.Request(url, callback=self.parse)
        self.last = time.monotonic()


def denied(url: str) -> bool:
    """A link to a file type rqcrawl does not follow by default (link_deny_extensions)."""
    return urlsplit(url).path.lower().endswith(DENIED_SUFFIXES)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("start_url")
    parser.add_argument("result")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--depth-limit", type=int, default=0, help="0: none")
    parser.add_argument("--user-agent", help="default: Scrapy's")
    parser.add_argument("--items", default="/dev/null", help="JSON lines feed of the pages")
    args = parser.parse_args()
    process = CrawlerProcess(
        {
            "CONCURRENT_REQUESTS": args.concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,  # one host: per-domain cap too
            "DOWNLOAD_DELAY": 0,  # Scrapy's default, like the disabled rqcrawl politeness
            "AUTOTHROTTLE_ENABLED": False,  # Scrapy's default: rqcrawl's delay_factor is 0
            "HTTPCACHE_ENABLED": False,  # Scrapy's default: every page from the server
            "ROBOTSTXT_OBEY": False,
            "DEPTH_LIMIT": args.depth_limit,
            "HTTPERROR_ALLOW_ALL": True,  # a 404 is an answer, as it is a record for rqcrawl
            "LOG_LEVEL": "WARNING",  # the workers' --quiet
            "TELNETCONSOLE_ENABLED": False,
            "FEEDS": {args.items: {"format": "jsonlines"}},
            **({"USER_AGENT": args.user_agent} if args.user_agent else {}),
        }
    )
    process.crawl(BenchSpider, start_url=args.start_url, result_path=args.result)
    process.start()


if __name__ == "__main__":
    main()

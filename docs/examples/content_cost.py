"""Time rqcrawl.parse.content per page of the benchmark site (docs/benchmarks.md):

python docs/examples/content_cost.py
"""

import statistics
import time

from rqcrawl.bench.site import SiteSpec, render
from rqcrawl.config import CrawlConfig
from rqcrawl.parse.content import page_content
from rqcrawl.parse.extract import decode, parse

ORIGIN = "http://127.0.0.1:8000"
LIMITS = CrawlConfig()  # the default content_max_bytes
pages = [(p, b) for p, b in render(SiteSpec(), ORIGIN).items() if b.lstrip().startswith(b"<")]
pages = pages[:200]
size_kb = statistics.mean(len(b) for _, b in pages) / 1000
for kinds in (["html"], ["text"], ["text", "markdown"]):
    times = []
    for path, body in pages:
        text = decode(body, "text/html")
        page = parse(text, ORIGIN + path)
        started = time.perf_counter()
        page_content(text, page, ORIGIN + path, kinds, LIMITS.content_max_bytes, 60)
        times.append(time.perf_counter() - started)
    median, mean = statistics.median(times) * 1000, statistics.mean(times) * 1000
    print(
        f"{','.join(kinds)}: {len(times)} pages of {size_kb:.1f} kB: "
        f"median {median:.2f} ms, mean {mean:.2f} ms"
    )

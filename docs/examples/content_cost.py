"""Time rqcrawl.parse.content per page of the benchmark site (docs/benchmarks.md):

python docs/examples/content_cost.py
"""

import statistics
import time

from rqcrawl.bench.site import SiteSpec, render
from rqcrawl.parse.content import page_content
from rqcrawl.parse.extract import decode, parse

ORIGIN = "http://127.0.0.1:8000"
pages = [(p, b) for p, b in render(SiteSpec(), ORIGIN).items() if b.lstrip().startswith(b"<")]
pages = pages[:200]
size_kb = statistics.mean(len(b) for _, b in pages) / 1000
for kinds in (["html"], ["text"], ["text", "markdown"]):
    times = []
    for path, body in pages:
        text = decode(body, "text/html")
        sel = parse(text, ORIGIN + path).selector
        started = time.perf_counter()
        page_content(text, sel, ORIGIN + path, kinds)
        times.append(time.perf_counter() - started)
    median, mean = statistics.median(times) * 1000, statistics.mean(times) * 1000
    print(
        f"{','.join(kinds)}: {len(times)} pages of {size_kb:.1f} kB: "
        f"median {median:.2f} ms, mean {mean:.2f} ms"
    )

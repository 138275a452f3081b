"""Time the WACZ writer (rqcrawl.ops.wacz) on the benchmark site's pages (docs/benchmarks.md):
2,000 HTML pages archived as rqcrawl's WARC files hold them (response and request records, in
files of 100 MB), with records carrying their main text, packed into one WACZ.

python docs/examples/wacz_cost.py
"""

import io
import tempfile
import time
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from rqcrawl.bench.site import SiteSpec, render
from rqcrawl.config import CrawlConfig
from rqcrawl.ops.wacz import write_wacz
from rqcrawl.parse.content import page_content
from rqcrawl.parse.extract import decode, parse

ORIGIN = "http://127.0.0.1:8000"
PAGES = 2000
LIMITS = CrawlConfig()  # the default content_max_bytes
pages = [(p, b) for p, b in render(SiteSpec(), ORIGIN).items() if b.lstrip().startswith(b"<")]
pages = pages[:PAGES]

with tempfile.TemporaryDirectory() as work:
    warc = Path(work) / "bench-20261128000000-00000-host-w1.warc.gz"
    records = []
    with open(warc, "wb") as stream:
        writer = WARCWriter(stream, gzip=True)
        for path, body in pages:
            url = ORIGIN + path
            head = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], "HTTP/1.1")
            response = writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), http_headers=head
            )
            request = writer.create_warc_record(
                url, "request", payload=io.BytesIO(b""),
                http_headers=StatusAndHeaders(f"GET {path} HTTP/1.1", [], is_http_request=True),
            )  # fmt: skip
            writer.write_request_response_pair(request, response)
            text = decode(body, "text/html")
            page = parse(text, url)
            content, _ = page_content(text, page, url, ["text"], LIMITS.content_max_bytes, 60)
            records.append(
                {"url": url, "final_url": url, "outcome": "fetched", "title": page.title,
                 "fetched_at": "2099-01-01T00:00:00Z", "content": content}
            )  # fmt: skip
    started = time.perf_counter()
    done = write_wacz(records, [warc], Path(work) / "bench.wacz", "bench")
    seconds = time.perf_counter() - started
    mb = warc.stat().st_size / 1e6
    print(
        f"{done.pages} pages, {done.captures} captures, WARC {mb:.1f} MB: WACZ written in "
        f"{seconds:.2f} s ({seconds / done.pages * 1000:.2f} ms a page)"
    )

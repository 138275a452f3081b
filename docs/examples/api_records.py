"""Take a crawl's records in Python as they come: `rqcrawl.crawl` runs an embedded Redis and
local workers in a data directory and yields each record once it is delivered. Run the same
loop again after an interruption and it resumes. Run: python docs/examples/api_records.py"""

import tempfile

import rqcrawl
from rqcrawl.demo import DemoSite

site = DemoSite().start()  # or your own seeds: ["https://example.org/"]
data_dir = tempfile.mkdtemp(prefix="rqcrawl-example-")  # keep it to resume the crawl
try:
    fetched = 0
    for record in rqcrawl.crawl(
        site.urls, data_dir=data_dir, max_depth=3, content=["markdown"], allow_private=True
    ):
        if record["outcome"] == "fetched":
            fetched += 1
            markdown = (record.get("content") or {}).get("markdown") or ""
            print(record["url"], len(markdown), "characters of markdown")
    print(fetched, "pages fetched")
finally:
    site.stop()

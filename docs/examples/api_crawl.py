"""Crawl with the Python API: an embedded Redis, two local workers, the demo web of
`rqcrawl demo`, then the failures and the export. Run: python docs/examples/api_crawl.py"""

import tempfile
import time
from pathlib import Path

import redis

from rqcrawl import EmbeddedRedis, LocalWorkers, api
from rqcrawl.demo import DemoSite

site = DemoSite().start()  # or your own seeds: ["https://example.org/"]
data = Path(tempfile.mkdtemp(prefix="rqcrawl-example-"))
server = EmbeddedRedis(data).start()  # or any Redis: redis.Redis.from_url(...)
conn = redis.Redis.from_url(server.url)
try:
    started = api.start(conn, site.urls, max_depth=3, allow_private=True)
    workers = LocalWorkers(server.url, 2, log_dir=data / "workers")  # or `rq worker crawl`
    try:
        while api.status(conn, started.name)["state"] not in ("finished", "cancelled"):
            time.sleep(1)
    finally:
        workers.stop()
    for row in api.failures(conn, started.name):
        print(row["reason"], row["url"])
    print(api.export(conn, started.name, str(data / "pages.jsonl")), "rows written")
finally:
    server.stop()
    site.stop()

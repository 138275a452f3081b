"""The cost of requisites (docs/benchmarks.md): the Apache manual (Debian's apache2-doc) served
on 127.0.0.3, crawled whole with `rqcrawl crawl --wacz` at delay 0, with `requisites` off then
on; the server counts the requests and the body bytes it sent.

python docs/examples/requisites_cost.py [/usr/share/doc/apache2-doc/manual] [WORK_DIR]
"""

import functools
import http.server
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

TREE = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/doc/apache2-doc/manual"
RQCRAWL = str(Path(sys.executable).parent / "rqcrawl")
served = Counter()


class Counted(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_head(self):
        served["requests"] += 1
        return super().send_head()

    def copyfile(self, source, outputfile):
        body = source.read()
        served["bytes"] += len(body)
        outputfile.write(body)


server = http.server.ThreadingHTTPServer(
    ("127.0.0.3", 0), functools.partial(Counted, directory=TREE)
)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
seed = f"http://127.0.0.3:{server.server_address[1]}/en/index.html"
work = Path(sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp())
for requisites in ("false", "true"):
    run = work / f"requisites-{requisites}"
    run.mkdir(parents=True)
    (run / "crawl.toml").write_text(f"[crawl]\nrequisites = {requisites}\n")
    served.clear()
    started = time.monotonic()
    subprocess.run(
        [RQCRAWL, "crawl", seed, "-o", str(run / "out.jsonl"), "--wacz", str(run / "m.wacz"),
         "--allow-private", "--delay", "0", "--max-depth", "20", "--no-sitemaps",
         "--config", str(run / "crawl.toml"), "--data-dir", str(run / "data")],
        check=True, capture_output=True,
    )  # fmt: skip
    wall = time.monotonic() - started
    warc = sum(f.stat().st_size for f in (run / "m-warc").glob("*.warc.gz"))
    records = sum(1 for _ in open(run / "out.jsonl"))
    print(json.dumps({
        "requisites": requisites, "wall_s": round(wall, 1), "requests": served["requests"],
        "bytes_served": served["bytes"], "warc_bytes": warc, "records": records,
    }))  # fmt: skip

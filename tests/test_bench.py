"""`rqcrawl bench --stock`: the stock forking `rq worker crawl` (with and without the preload)
measured beside the recommended worker in one run."""

from __future__ import annotations

import re
import subprocess

from helpers import BIN


def test_bench_prints_stock_and_recommended_workers_side_by_side():
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--pages", "10", "--workers", "1", "--no-scrapy",
         "--stock"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    table = lines[1 : lines.index(next(x for x in lines if x.startswith("latency")))]
    rows = {line.split()[0]: line.split() for line in table}
    for crawler in ("rqcrawl", "rq-stock", "rq-stock+preload"):
        assert rows[crawler][3] == "10", rows[crawler]  # every page crawled
    ratios = dict(re.findall(r"/ (rq-stock\S*) pages/s = ([\d.]+)x", proc.stdout))
    assert set(ratios) == {"rq-stock", "rq-stock+preload"}
    assert float(ratios["rq-stock"]) > 1  # forking per job is never the faster one

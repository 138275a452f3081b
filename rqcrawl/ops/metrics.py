"""Prometheus metrics of every crawl of a Redis, built from Redis on each scrape.

The collector keeps no state of its own: each scrape reads every crawl's status (the same
counters as `rqcrawl status`), so any number of exporters can run, restart or move, and a
counter never resets while the crawl's keys live. Served by `rqcrawl metrics --port N`, and by
the recommended worker when RQCRAWL_METRICS_PORT is set (see worker.py). prometheus_client
is imported by the functions that build or serve metrics: every recommended worker imports
this module, and most never serve metrics.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from redis import Redis

from rqcrawl.config import ConfigError
from rqcrawl.frontier import state
from rqcrawl.ops import stats

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily, Metric

PORT_ENV = "RQCRAWL_METRICS_PORT"  # the recommended worker serves /metrics on this port
ADDR_ENV = "RQCRAWL_METRICS_ADDR"  # ... on this address (default 127.0.0.1)
STATES = ("running", "idle", "paused", "finished", "cancelled")

log = logging.getLogger(__name__)


class CrawlCollector:
    """Every crawl's counters, gauges and fetch-latency histogram, labelled by crawl (a
    prometheus_client collector: an object with `collect`)."""

    def __init__(self, redis: Redis):
        self.redis = redis

    def collect(self) -> Iterator[Metric]:
        found, broken = [], []
        for name in state.crawl_names(self.redis):
            try:
                s = stats.status(self.redis, name)
            except Exception as exc:  # one broken crawl must not hide the others
                log.warning("rqcrawl metrics: crawl %s skipped: %s", name, exc)
                broken.append(name)
                continue
            if s is not None:
                found.append(s)
        yield from families(found)
        yield errors(broken)


def errors(broken: list[str]) -> GaugeMetricFamily:
    """1 for each crawl whose status could not be read (skipped by this scrape)."""
    from prometheus_client.core import GaugeMetricFamily

    gauge = GaugeMetricFamily(
        "rqcrawl_status_error", "1 for a crawl whose status could not be read", labels=["crawl"]
    )
    for name in broken:
        gauge.add_metric([name], 1)
    return gauge


def families(crawls: list[dict]) -> list[Metric]:
    """The metric families of these crawls' statuses (see stats.status)."""
    declared = declared_families()
    for s in crawls:
        add_samples(declared, s)
    return list(declared.values())


def declared_families() -> dict[str, Metric]:
    """Every family `families` reports, empty, by a short name, in the order it reports them."""
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

    def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> CounterMetricFamily:
        return CounterMetricFamily(f"rqcrawl_{name}", doc, labels=["crawl", *labels])

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"rqcrawl_{name}", doc, labels=["crawl", *labels])

    return {
        "admitted": counter("urls_admitted", "URLs admitted to the crawl"),
        "fetched": counter("pages_fetched", "Pages fetched"),
        "failed": counter("pages_failed", "URLs that failed for good, by reason", ("reason",)),
        "skipped": counter("pages_skipped", "URLs recorded as skipped, by reason", ("reason",)),
        "retries": counter("retries", "Retries of transient failures"),
        "downloaded": counter("downloaded_bytes", "Bytes of the fetched pages' bodies"),
        "in_flight": gauge("urls_in_flight", "URLs queued, scheduled, running or deferred"),
        "held": gauge("urls_held", "Admitted URLs waiting for their level"),
        "deferred": gauge("urls_deferred", "URLs deferred for politeness"),
        "fill": gauge(
            "bloom_fill_ratio",
            "How full the Bloom filter is: share of its bits set (lua) or of its capacity (native)",
        ),
        "fp_rate": gauge(
            "bloom_false_positive_rate", "Estimated false-positive rate of the filter"
        ),
        "rate": gauge(
            "recent_pages_per_second", f"Pages fetched per second, last {stats.RECENT} s"
        ),
        "eta": gauge("eta_seconds", "Estimated seconds until the admitted URLs have ended"),
        "state": gauge("crawl_state", "1 for the crawl's current state", ("state",)),
        "latency": HistogramMetricFamily(
            "rqcrawl_fetch_duration_seconds", "Duration of the fetches", labels=["crawl"]
        ),
        "table_up": gauge("task_table_up", "Crawls with revisits: 1 if the task table answers"),
    }


# The families with one sample a crawl, from the status field of the same meaning.
PLAIN = {
    "admitted": "admitted", "fetched": "fetched", "retries": "retries", "downloaded": "bytes",
    "in_flight": "in_flight", "held": "held", "deferred": "deferred",
    "fill": "bloom_fill_ratio", "fp_rate": "bloom_false_positive_rate",
    "rate": "recent_pages_per_s",
}  # fmt: skip


def add_samples(declared: dict[str, Metric], s: dict) -> None:
    """Crawl status `s`'s samples, added to the `declared` families."""
    c = s["crawl"]
    for family, field in PLAIN.items():
        declared[family].add_metric([c], s[field])
    for reason, n in sorted(s["failed_by_reason"].items()):
        declared["failed"].add_metric([c, reason], n)
    for reason, n in sorted(s["skipped"].items()):
        declared["skipped"].add_metric([c, reason], n)
    if s["eta_s"] is not None:
        declared["eta"].add_metric([c], s["eta_s"])
    for name in STATES:
        declared["state"].add_metric([c, name], int(s["state"] == name))
    histogram = s["fetch_latency"]
    declared["latency"].add_metric([c], cumulative(histogram), histogram["sum_s"])
    if s["revisit_s"]:
        declared["table_up"].add_metric([c], int(not s["table_error"]))


def cumulative(histogram: dict) -> list[tuple[str, float]]:
    """status's per-bucket counts as Prometheus's cumulative `le` buckets, +Inf last."""
    out, total = [], 0
    for bound in stats.LATENCY_BUCKETS:
        total += histogram["buckets"][str(bound)]
        out.append((str(bound), total))
    out.append(("+Inf", total + histogram["buckets"]["inf"]))
    return out


def registry(redis: Redis) -> CollectorRegistry:
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(CrawlCollector(redis))
    return reg


def serve(redis: Redis, port: int, addr: str) -> WSGIServer:
    """Serve /metrics in a background thread (prometheus_client's server); returns it."""
    from prometheus_client import start_http_server

    server, _ = start_http_server(port, addr, registry(redis))
    return server


def serve_until_interrupted(server: WSGIServer) -> None:
    """`rqcrawl metrics`: the server's thread serves while this one waits for Ctrl-C."""
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()


def serve_from_env(redis: Redis) -> None:
    """The worker's opt-in endpoint: on RQCRAWL_METRICS_PORT, if set. A port already taken
    (another worker of this machine serves it) is logged, not fatal: any endpoint shows every
    crawl of the Redis."""
    port = port_from_env()
    if port is None:
        return
    try:
        serve(redis, port, os.environ.get(ADDR_ENV, "127.0.0.1"))
    except (OSError, ValueError) as exc:
        log.warning("rqcrawl metrics: cannot serve on %s=%s: %s", PORT_ENV, port, exc)


def port_from_env() -> int | None:
    """RQCRAWL_METRICS_PORT as a port number (None: not set); ConfigError in one line when
    it is none (a worker checks it as it starts)."""
    raw = os.environ.get(PORT_ENV, "").strip()
    if not raw:
        return None
    if not (raw.isdigit() and 1 <= int(raw) <= 65535):
        raise ConfigError(f"{PORT_ENV} must be a port number from 1 to 65535, not {raw!r}")
    return int(raw)

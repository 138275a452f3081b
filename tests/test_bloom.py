"""The shared Bloom filter, on the private Redis of the test session."""

from __future__ import annotations

import math
import multiprocessing
import queue

import pytest
import redis
from helpers import command_calls, rqcrawl, seed_local, status, wait_finished
from redis.crc import key_slot
from servers import HTTPSite, reply
from testsite import Site

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import configs
from rqcrawl.frontier.bloom import (
    MAX_POSITIONS,
    BloomFilter,
    NativeBloomFilter,
    allocation,
    batches,
    layout_bytes,
    optimal_size,
    shard_layout,
    string_allocation,
)
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.state import CrawlState
from rqcrawl.ops import stats
from rqcrawl.workers.runner import LocalWorkers


def urls(prefix: str, n: int) -> list[str]:
    return [f"http://{prefix}.example/page/{i}?q={i * 7}" for i in range(n)]


def shard_bytes(conn: redis.Redis, bloom: BloomFilter) -> int:
    return sum(conn.strlen(key) for key in bloom.keys)


def redis_bytes(conn: redis.Redis, bloom: BloomFilter) -> int:
    return sum(conn.memory_usage(key, samples=0) for key in bloom.keys)


# --- optimal_size ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capacity", "error_rate"),
    [(1, 0.5), (100, 0.1), (1000, 0.01), (20_000, 0.01), (1_000_000, 0.001), (10**7, 1e-6)],
)
def test_optimal_size_matches_the_formula(capacity, error_rate):
    bits, hashes = optimal_size(capacity, error_rate)
    m = -capacity * math.log(error_rate) / math.log(2) ** 2
    assert m <= bits < m + 1
    assert hashes == max(1, round(bits / capacity * math.log(2)))


@pytest.mark.parametrize(
    ("capacity", "error_rate", "expected"),
    [
        (1000, 0.01, (9586, 7)),
        (20_000, 0.01, (191_702, 7)),
        (1_000_000, 0.001, (14_377_588, 10)),
    ],
)
def test_optimal_size_known_values(capacity, error_rate, expected):
    assert optimal_size(capacity, error_rate) == expected


@pytest.mark.parametrize(
    ("capacity", "error_rate"), [(0, 0.01), (-5, 0.01), (10, 0), (10, 1), (10, -0.1), (10, 1.5)]
)
def test_optimal_size_rejects_bad_parameters(capacity, error_rate):
    with pytest.raises(ValueError):
        optimal_size(capacity, error_rate)


# --- add_many / contains_many ---------------------------------------------------------------


def test_add_many_reports_only_new_urls(conn):
    bloom = BloomFilter(conn, "t:bloom", capacity=10_000, error_rate=0.001)
    assert bloom.add_many(["http://a/1", "http://a/2"]) == [True, True]
    assert bloom.add_many(["http://a/2", "http://a/3", "http://a/1"]) == [False, True, False]
    assert bloom.add_many(["http://a/1", "http://a/2", "http://a/3"]) == [False, False, False]


def test_duplicate_within_one_batch_is_new_only_the_first_time(conn):
    bloom = BloomFilter(conn, "t:bloom", capacity=10_000, error_rate=0.001)
    got = bloom.add_many(["http://a/x", "http://a/y", "http://a/x", "http://a/z", "http://a/y"])
    assert got == [True, True, False, True, False]


def bit_commands(conn: redis.Redis) -> dict[str, int]:
    return {c: command_calls(conn, c) for c in ("bitfield", "setbit")}


@pytest.mark.parametrize("shard_limit", [2**32, 50_000], ids=["one-shard", "shards"])
def test_a_batch_costs_one_bitfield_per_shard_not_one_command_per_bit(conn, shard_limit):
    bloom = BloomFilter(conn, "t:bloom", capacity=10_000, error_rate=0.001, shard_limit=shard_limit)
    bloom.add_many(["http://a/warm-up"])  # the shards are created (one SETBIT each) first
    before = bit_commands(conn)
    assert bloom.add_many(urls("cost", 40)) == [True] * 40
    after = bit_commands(conn)
    assert after["setbit"] == before["setbit"]
    assert after["bitfield"] - before["bitfield"] == len(bloom.keys)  # 400 bits, every shard


def test_empty_batches(conn):
    bloom = BloomFilter(conn, "t:bloom", capacity=1000, error_rate=0.01)
    assert bloom.add_many([]) == []
    assert bloom.contains_many([]) == []


def test_contains_many(conn):
    bloom = BloomFilter(conn, "t:bloom", capacity=10_000, error_rate=0.001)
    assert bloom.contains_many(["http://a/1", "http://a/2"]) == [False, False]
    bloom.add_many(["http://a/1", "http://a/3"])
    got = bloom.contains_many(["http://a/1", "http://a/2", "http://a/3", "http://a/4"])
    assert got == [True, False, True, False]


def test_contains_many_does_not_add(conn):
    bloom = BloomFilter(conn, "t:bloom", capacity=10_000, error_rate=0.001)
    bloom.add_many(["http://a/0"])
    before = [conn.get(key) for key in bloom.keys]
    assert bloom.contains_many(["http://a/1", "http://a/2"]) == [False, False]
    assert [conn.get(key) for key in bloom.keys] == before
    assert bloom.add_many(["http://a/1", "http://a/2"]) == [True, True]


@pytest.mark.parametrize(("n", "cost"), [(0, 10), (1, 10), (5000, 10), (5000, 7), (3, 10**6)])
def test_batches_cover_the_items_in_order_within_the_cost(n, cost):
    items = list(range(n))
    parts = list(batches(items, cost))
    assert [x for part in parts for x in part] == items
    assert all(part and (len(part) * cost <= MAX_POSITIONS or len(part) == 1) for part in parts)


def test_any_number_of_urls_in_one_call_one_answer_each_in_order(conn):
    # 200,000 URLs are 2 million bit positions: more arguments than one Redis command takes
    bloom = BloomFilter(conn, "t:bloom", capacity=400_000, error_rate=0.001)
    items = urls("big", 200_000)
    items[150_000] = items[3]  # a repeat far from its first occurrence, in a later batch
    added = bloom.add_many(items)
    assert len(added) == len(items)
    assert added[3] and not added[150_000]
    assert sum(added) >= len(items) - 1 - 400  # only false positives (0.1%) may read as seen
    assert bloom.contains_many(items) == [True] * len(items)  # no false negatives
    others = bloom.contains_many(urls("other", 20_000))
    assert len(others) == 20_000 and sum(others) < 40


def test_filter_state_is_shared_by_name_and_separate_between_names(conn, redis_url):
    first = BloomFilter(conn, "crawl1:bloom", capacity=10_000, error_rate=0.001)
    first.add_many(["http://a/1"])
    other_conn = redis.Redis.from_url(redis_url)
    try:
        same = BloomFilter(other_conn, "crawl1:bloom", capacity=10_000, error_rate=0.001)
        other = BloomFilter(other_conn, "crawl2:bloom", capacity=10_000, error_rate=0.001)
        assert same.contains_many(["http://a/1"]) == [True]
        assert same.add_many(["http://a/1"]) == [False]
        assert other.contains_many(["http://a/1"]) == [False]
        assert other.add_many(["http://a/1"]) == [True]
    finally:
        other_conn.close()


# --- size and accuracy at capacity ----------------------------------------------------------

CAPACITY, ERROR_RATE = 20_000, 0.01


@pytest.fixture
def full_filter(conn):
    """A filter filled to capacity, the URLs added, and 20000 other URLs to probe it with."""
    bloom = BloomFilter(conn, "full:bloom", capacity=CAPACITY, error_rate=ERROR_RATE)
    added = urls("added", CAPACITY)
    probes = urls("probe", CAPACITY)
    new = bloom.add_many(added)
    return bloom, added, probes, new


def test_nearly_every_url_is_new_while_filling(full_filter):
    _, _, _, new = full_filter
    # Distinct URLs: only false positives while filling may say "seen" (far below 1% overall).
    assert sum(new) >= CAPACITY * (1 - ERROR_RATE)


def test_no_false_negatives(full_filter):
    bloom, added, _, _ = full_filter
    assert all(bloom.contains_many(added))
    assert not any(bloom.add_many(added))


def test_memory_is_within_10_percent_of_optimum(conn, full_filter):
    bloom, _, _, _ = full_filter
    optimum_bytes = -CAPACITY * math.log(ERROR_RATE) / math.log(2) ** 2 / 8
    assert shard_bytes(conn, bloom) == math.ceil(bloom.bits / 8)
    assert optimum_bytes <= redis_bytes(conn, bloom) <= optimum_bytes * 1.10


@pytest.mark.parametrize(
    ("capacity", "error_rate"), [(20_000, 0.001), (9_000, 0.01), (333_333, 0.001), (10**7, 0.001)]
)
def test_redis_memory_of_a_filter_is_within_5_percent_of_optimum(conn, capacity, error_rate):
    """What Redis itself reports (MEMORY USAGE: allocator rounding and key overhead
    included) after adds spread over the filter; left to grow bit by bit it was 1.6-1.9x."""
    bloom = BloomFilter(conn, f"mem:{capacity}:bloom", capacity=capacity, error_rate=error_rate)
    bloom.add_many(urls("first", 1))  # a low bit first: a growing string would double here
    bloom.add_many(urls("mem", 3000))
    optimum_bytes = bloom.bits / 8
    assert optimum_bytes <= redis_bytes(conn, bloom) <= optimum_bytes * 1.05
    assert shard_bytes(conn, bloom) == math.ceil(bloom.bits / 8)


def test_false_positive_rate_at_capacity(full_filter):
    bloom, _, probes, _ = full_filter
    measured = sum(bloom.contains_many(probes)) / len(probes)
    assert measured <= ERROR_RATE * 1.3
    # A filter that answers "no" to everything would pass the line above: it must be a real
    # Bloom filter at capacity, whose false positives are close to the target, not absent.
    assert measured >= ERROR_RATE / 2


def test_stats_fields(conn, full_filter):
    bloom, _, _, _ = full_filter
    stats = bloom.stats()
    bits, hashes = optimal_size(CAPACITY, ERROR_RATE)
    assert stats["capacity"] == CAPACITY
    assert stats["error_rate"] == ERROR_RATE
    assert stats["bits"] == bits
    assert stats["hashes"] == hashes
    set_bits = sum(conn.bitcount(key) for key in bloom.keys)
    assert stats["fill_ratio"] == pytest.approx(set_bits / bits)
    # At capacity about half the bits are set: 1 - exp(-k n / m).
    assert stats["fill_ratio"] == pytest.approx(1 - math.exp(-hashes * CAPACITY / bits), rel=0.02)
    assert stats["estimated_false_positive_rate"] == pytest.approx(stats["fill_ratio"] ** hashes)


def test_estimated_false_positive_rate_is_close_to_measured(full_filter):
    bloom, _, probes, _ = full_filter
    measured = sum(bloom.contains_many(probes)) / len(probes)
    estimated = bloom.stats()["estimated_false_positive_rate"]
    assert estimated == pytest.approx(measured, rel=0.25)
    assert estimated == pytest.approx(ERROR_RATE, rel=0.25)


def test_stats_of_an_empty_filter(conn):
    bloom = BloomFilter(conn, "empty:bloom", capacity=1000, error_rate=0.01)
    stats = bloom.stats()
    assert stats["fill_ratio"] == 0
    assert stats["estimated_false_positive_rate"] == 0
    assert (stats["bits"], stats["hashes"]) == optimal_size(1000, 0.01)
    assert stats["bits_set"] == 0


def test_stats_fill_grows_with_additions(conn):
    bloom = BloomFilter(conn, "grow:bloom", capacity=1000, error_rate=0.01)
    bloom.add_many(urls("a", 100))
    low = bloom.stats()
    bloom.add_many(urls("b", 900))
    high = bloom.stats()
    assert 0 < low["fill_ratio"] < high["fill_ratio"] < 1
    assert low["estimated_false_positive_rate"] < high["estimated_false_positive_rate"]
    assert low["bits_set"] <= 100 * bloom.hashes


# --- layout ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "allocated"),
    [
        (1, 16),
        (17, 32),
        (128, 128),
        (129, 160),
        (1025, 1280),
        (36_000, 40_960),
        (2**24 + 1, 20 * 2**20),
    ],
)
def test_allocation_follows_jemalloc_size_classes(size, allocated):
    assert allocation(size) == allocated


@pytest.mark.parametrize("limit", [2**32, 10**7])
def test_layout_covers_the_bits_within_shard_limit_and_wastes_little(limit):
    for bits in (int(1.37**e) for e in range(37, 75)):  # about 110 thousand to 13 billion bits
        shard_bits, shards = shard_layout(bits, limit)
        assert shard_bits % 8 == 0 and shard_bits <= limit
        assert (shards - 1) * shard_bits < bits <= shards * shard_bits
        assert shards <= 2 * math.ceil(bits / limit) + 2
        assert layout_bytes(bits, shard_bits) <= bits / 8 * 1.05, bits


def test_layout_beats_one_string():
    bits = 36_000 * 8  # one string: 40 KB for 36 KB of bits
    assert string_allocation(36_000) / 36_000 > 1.13
    assert layout_bytes(bits, shard_layout(bits)[0]) / 36_000 < 1.03


# --- sharding -------------------------------------------------------------------------------


def test_small_shard_limit_gives_several_keys_with_one_hash_tag(conn):
    bloom = BloomFilter(conn, "crawl:bloom", capacity=1000, error_rate=0.01, shard_limit=1000)
    bits, _ = optimal_size(1000, 0.01)
    assert len(bloom.keys) == math.ceil(bits / 1000) > 1
    assert len(set(bloom.keys)) == len(bloom.keys)
    for key in bloom.keys:
        assert key.startswith("{crawl:bloom}")
    assert len({key_slot(key.encode()) for key in bloom.keys}) == 1
    assert key_slot(bloom.keys[0].encode()) == key_slot(b"crawl:bloom")


def test_existing_hash_tag_in_name_is_kept(conn):
    bloom = BloomFilter(
        conn, "rqcrawl:{c1}:bloom", capacity=1000, error_rate=0.01, shard_limit=1000
    )
    assert len(bloom.keys) > 1
    for key in bloom.keys:
        assert key.startswith("rqcrawl:{c1}:bloom")
        assert key.count("{") == 1 and key.count("}") == 1
    assert {key_slot(key.encode()) for key in bloom.keys} == {key_slot(b"c1")}


def test_sharded_filter_works_and_fills_every_shard(conn):
    capacity = 1000
    bloom = BloomFilter(conn, "crawl:bloom", capacity=capacity, error_rate=0.01, shard_limit=1000)
    added = urls("added", capacity)
    new = bloom.add_many(added)
    assert sum(new) >= capacity * 0.99
    assert bloom.add_many(added[:10] * 2) == [False] * 20
    assert all(bloom.contains_many(added))
    # Every shard is used, none is larger than the shard limit, and in all they use no more
    # memory than one unsharded string would.
    lengths = [conn.strlen(key) for key in bloom.keys]
    assert all(0 < n <= math.ceil(1000 / 8) for n in lengths), lengths
    assert sum(lengths) == pytest.approx(bloom.bits / 8, rel=0.10)
    stats = bloom.stats()
    assert stats["shards"] == len(bloom.keys)
    assert stats["bits_set"] == sum(conn.bitcount(key) for key in bloom.keys)
    probes = urls("probe", 5000)
    measured = sum(bloom.contains_many(probes)) / len(probes)
    assert measured <= 0.01 * 1.3


def test_sharded_and_unsharded_filters_give_the_same_answers(conn):
    sharded = BloomFilter(conn, "s:bloom", capacity=1000, error_rate=0.01, shard_limit=1000)
    single = BloomFilter(conn, "u:bloom", capacity=1000, error_rate=0.01)
    assert len(single.keys) == 1 and len(sharded.keys) > 1
    added = urls("added", 1000) + urls("added", 50)  # with duplicates
    assert sharded.add_many(added) == single.add_many(added)
    probes = urls("probe", 3000)
    assert sharded.contains_many(probes) == single.contains_many(probes)
    assert sharded.stats()["bits_set"] == single.stats()["bits_set"]


# --- two concurrent writers -----------------------------------------------------------------

SHARED = [f"http://shared.example/item/{i}" for i in range(5000)]
BATCH = 50


def _writer(url: str, name: str, shard_limit: int, barrier, results, tag: str) -> None:
    """Add SHARED batch by batch, in step with the other writer: both send batch i at once.

    The second writer sends each batch reversed, so the two also race inside a batch.
    """
    conn = redis.Redis.from_url(url)
    try:
        bloom = BloomFilter(conn, name, capacity=200_000, error_rate=1e-6, shard_limit=shard_limit)
        new: dict[str, bool] = {}
        for i in range(0, len(SHARED), BATCH):
            batch = SHARED[i : i + BATCH]
            if tag == "w2":
                batch = batch[::-1]
            barrier.wait(timeout=20)
            new.update(zip(batch, bloom.add_many(batch), strict=True))
        results.put((tag, [new[u] for u in SHARED]))
    finally:
        conn.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shard_limit", [2**32, 500_000], ids=["default-layout", "many-shards"])
def test_two_concurrent_writers_see_each_url_new_exactly_once(conn, redis_url, shard_limit):
    name = "race:bloom"
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(redis_url, name, shard_limit, barrier, results, tag))
        for tag in ("w1", "w2")
    ]
    for p in procs:
        p.start()
    try:
        got = {}
        for _ in procs:
            try:
                tag, new = results.get(timeout=30)
            except queue.Empty:
                pytest.fail(f"a writer did not report: exit codes {[p.exitcode for p in procs]}")
            got[tag] = new
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(got["w1"]) == len(got["w2"]) == len(SHARED)
    times_new = [a + b for a, b in zip(got["w1"], got["w2"], strict=True)]
    twice = [u for u, n in zip(SHARED, times_new, strict=True) if n == 2]
    never = [u for u, n in zip(SHARED, times_new, strict=True) if n == 0]
    assert not twice, f"{len(twice)} URLs reported new by both writers, e.g. {twice[:3]}"
    assert not never, f"{len(never)} URLs reported new by neither writer, e.g. {never[:3]}"
    bloom = BloomFilter(conn, name, capacity=200_000, error_rate=1e-6, shard_limit=shard_limit)
    assert len(bloom.keys) == shard_layout(bloom.bits, shard_limit)[1]
    assert len(bloom.keys) >= (2 if shard_limit == 2**32 else 12)
    assert all(bloom.contains_many(SHARED))


# --- status ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("capacity", "warned"), [(1000, False), (100, True)])
def test_status_warns_when_the_filter_is_past_its_capacity(conn, capacity, warned):
    crawl = f"cap{capacity}"
    cfg = CrawlConfig.from_dict({"bloom_capacity": capacity, "bloom_error_rate": 0.01})
    configs.save(conn, crawl, cfg)
    Frontier(conn, crawl, cfg).seed(urls(crawl, 300))
    found = [w for w in stats.status(conn, crawl)["warnings"] if "Bloom" in w]
    assert bool(found) == warned, found
    if warned:
        assert "past its bloom_capacity 100" in found[0]


# --- the native filter (RedisBloom's BF.*), on a Redis that loaded the module --------------


@pytest.fixture
def bloom_conn(bloom_redis_url):
    c = redis.Redis.from_url(bloom_redis_url)
    yield c
    c.close()


def test_the_native_filter_checks_and_adds_in_order(bloom_conn):
    bloom = NativeBloomFilter(bloom_conn, "n:bloom", capacity=1000, error_rate=0.01)
    assert bloom.stats()["estimated_items"] == 0  # nothing reserved before the first add
    assert bloom.add_many([]) == [] and bloom.contains_many(["http://a/1"]) == [False]
    assert bloom.add_many(["http://a/1", "http://a/2", "http://a/1"]) == [True, True, False]
    assert bloom.contains_many(["http://a/2", "http://a/3"]) == [True, False]
    assert bloom.add_many(["http://a/3"]) == [True]
    assert bloom_conn.keys("*n:bloom*") == [b"{n:bloom}:bf"]  # one key, no bitmaps


def test_the_native_filter_grows_past_its_capacity_at_its_error_rate(bloom_conn):
    """Where the bit filter fills up (and takes ever more new URLs for seen ones), RedisBloom
    stacks sub-filters: five times its capacity later, a probe still errs about as asked."""
    bloom = NativeBloomFilter(bloom_conn, "g:bloom", capacity=2000, error_rate=0.01)
    added = urls("added", 10_000)
    new = bloom.add_many(added)  # in calls of MAX_POSITIONS fingerprints
    assert sum(new) >= len(added) * 0.98 and all(bloom.contains_many(added))
    probes = urls("probe", 10_000)
    assert sum(bloom.contains_many(probes)) / len(probes) <= 0.02
    s = bloom.stats()
    assert s["filters"] > 1 and s["estimated_items"] == sum(new)
    assert s["estimated_false_positive_rate"] == pytest.approx(0.01)
    assert stats.bloom_warnings(s) == []  # past capacity, but not losing URLs


def test_a_crawl_takes_the_native_filter_where_the_server_has_it(
    redis_url, bloom_redis_url, tmp_path
):
    """auto: native on a server with BF.*, lua elsewhere, decided once and stored with the
    crawl; native asked of a server without it is a one-line error and stores nothing."""
    for url, want in ((redis_url, "lua"), (bloom_redis_url, "native")):
        rqcrawl(url, "seed", "http://127.0.0.1:9/", "--crawl", "auto", "--allow-private")
        shown = rqcrawl(url, "status", "auto", "--config").stdout
        assert f'bloom_filter = "{want}"' in shown, shown
    native, lua = tmp_path / "native.toml", tmp_path / "lua.toml"
    native.write_text("bloom_filter = 'native'\n")
    lua.write_text("bloom_filter = 'lua'\n")
    bad = rqcrawl(redis_url, "seed", "http://127.0.0.1:9/", "--crawl", "n", "--config",
                  str(native), check=False)  # fmt: skip
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "setting 'bloom_filter' is native, but this Redis has no BF.* commands" in bad.stderr
    assert redis.Redis.from_url(redis_url).keys("rqcrawl:{n}*") == []
    rqcrawl(bloom_redis_url, "seed", "http://127.0.0.1:9/", "--crawl", "l", "--config", str(lua))
    assert 'bloom_filter = "lua"' in rqcrawl(bloom_redis_url, "status", "l", "--config").stdout


def test_a_crawl_on_the_native_filter_fetches_every_page_once(bloom_redis_url, bloom_conn):
    site = Site(pages=40, slow={1: 0.3})
    with HTTPSite(site.handle, max_requests=200, max_seconds=120) as http:
        seed_local(bloom_redis_url, http.base + "/p0.html", "nat", 3)
        with LocalWorkers(bloom_redis_url, 2):
            wait_finished(bloom_redis_url, "nat")
    want = site.expected(3)
    assert http.hits.pop("/robots.txt") == 1
    assert all(n == 1 for n in http.hits.values()), http.hits
    assert set(http.hits) == set(want)
    s = status(bloom_redis_url, "nat")
    assert s["bloom"]["kind"] == "native" and s["bloom"]["estimated_items"] == len(want)
    assert "native (BF.*)" in rqcrawl(bloom_redis_url, "status", "nat").stdout
    assert not [k for k in bloom_conn.keys("rqcrawl:{nat}:bloom*") if not k.endswith(b":bf")]


def test_the_kept_count_of_set_bits_is_the_bitcount_and_an_older_filter_is_counted_once(conn):
    """The fill a status shows is read from the count the scripts keep (a GET), which stays
    equal to a BITCOUNT of every shard: duplicates within a batch and across batches, a
    sharded filter, the finish step's adds. A filter made before the count was kept (the
    count key gone) is counted once by its next add, and counted on from there."""
    bloom = BloomFilter(conn, "kept:bloom", capacity=2000, error_rate=0.01, shard_limit=4096)
    assert len(bloom.keys) > 1

    def bitcount() -> int:
        return sum(conn.bitcount(key) for key in bloom.keys)

    bloom.add_many(urls("a", 500) + urls("a", 20))  # a URL twice in one batch
    bloom.add_many(urls("a", 700))  # 500 of them seen before
    assert int(conn.get(bloom.count_key)) == bitcount() == bloom.stats()["bits_set"] > 0
    conn.delete(bloom.count_key)  # as a filter of an older version has it
    assert bloom.stats()["bits_set"] == bitcount()  # counted when asked, not stored
    assert conn.get(bloom.count_key) is None
    bloom.add_many(urls("b", 300))
    assert int(conn.get(bloom.count_key)) == bitcount() == bloom.stats()["bits_set"]


def test_a_crawls_bloom_count_follows_the_finish_steps_adds(redis_url, tmp_path):
    """The links a page's finish step admits are counted too (scripts.FINISH)."""
    conn = redis.Redis.from_url(redis_url)
    handle = lambda req: reply(  # noqa: E731 - one page of 30 links, each a leaf
        req, 200, "".join(f'<a href="/p{i}">{i}</a>' for i in range(30)).encode()
    )
    with HTTPSite(handle, max_requests=100, max_seconds=60) as http:
        seed_local(redis_url, http.base + "/", "counted", 1)
        with LocalWorkers(redis_url, 1, log_dir=tmp_path):
            wait_finished(redis_url, "counted", timeout=60)
    bloom = CrawlState(conn, "counted", configs.load(conn, "counted")).bloom
    assert int(conn.get(bloom.count_key)) == sum(conn.bitcount(k) for k in bloom.keys) > 0

"""Hostile settings, names, files and Redis contents: each ends as one line of error (or a
one-line warning), nothing half-written to Redis, no secret shown, nothing unpickled."""

from __future__ import annotations

import contextlib
import pickle
import subprocess
from pathlib import Path

import pytest
import redis
from helpers import BIN, child_pids, env_with, rqcrawl, wait_until
from rq import Worker
from servers import HTTPSite, free_port
from test_cli import assert_one_line_error
from testsite import Site

from rqcrawl.frontier import keys
from rqcrawl.frontier.state import InFlight
from rqcrawl.ops.control import job_crawl

SEED = "http://127.0.0.1:9/"


def crawl_keys(conn: redis.Redis) -> list[bytes]:
    return [k for k in conn.scan_iter() if b"rqcrawl" in k]


def assert_refused(redis_url: str, conn: redis.Redis, *args: str, words=()) -> None:
    """One line of error, and not a byte written to Redis."""
    assert conn.dbsize() == 0
    assert_one_line_error(rqcrawl(redis_url, *args, check=False), *words)
    assert conn.dbsize() == 0


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ("bloom_capacity = 0", ["bloom_capacity", ">= 1"]),
        ("bloom_capacity = 100_000_000_000", ["Bloom filter", "bloom_max_mb"]),
        ("bloom_error_rate = 0.0", ["bloom_error_rate", "> 0"]),
        ("bloom_error_rate = 1.0", ["bloom_error_rate", "< 1"]),
        ("bloom_error_rate = nan", ["bloom_error_rate", "finite"]),
        ("window = 0", ["window", ">= 1"]),
        ("host_concurrency = 0", ["host_concurrency", ">= 1"]),
        ("delay = -1.0", ["delay", ">= 0"]),
        ("connect_timeout = inf", ["connect_timeout", "finite"]),
        ("read_timeout = 0", ["read_timeout", "> 0"]),
        ("max_body_bytes = 0", ["max_body_bytes", ">= 1"]),
        ("job_timeout = -5", ["job_timeout", ">= 1"]),
        ("max_depth = -1", ["max_depth", ">= 0"]),
        ('user_agent = "a\\r\\nX-Injected: 1"', ["user_agent", "control character"]),
        ("crawl = 5", ["[crawl]", "table"]),
    ],
)
def test_bad_setting_in_a_file_is_refused_before_redis(redis_url, conn, tmp_path, toml, words):
    conf = tmp_path / "bad.toml"
    conf.write_text(toml + "\n")
    assert_refused(redis_url, conn, "seed", SEED, "--config", str(conf), words=words)


@pytest.mark.parametrize(
    "flag",
    [
        ["--delay", "nan"],
        ["--delay", "inf"],
        ["--delay", "-1"],
        ["--retry-base", "-inf"],
        ["--host-concurrency", "0"],
        ["--max-depth", "-2"],
    ],
)
def test_bad_setting_flag_is_refused_before_redis(redis_url, conn, flag):
    assert_refused(redis_url, conn, "seed", SEED, *flag, words=[flag[0][2:].replace("-", "_")])


def test_toml_file_that_is_not_utf8(redis_url, conn, tmp_path):
    conf = tmp_path / "latin1.toml"
    conf.write_bytes('user_agent = "caf\xe9"\n'.encode("latin-1"))
    assert_refused(redis_url, conn, "seed", SEED, "--config", str(conf), words=["UTF-8"])


def test_seed_url_with_a_byte_that_is_not_utf8(redis_url, conn):
    # A 0xFF byte on the command line reaches Python as a lone surrogate.
    assert_refused(redis_url, conn, "seed", "http://example.org/\udcff", words=["invalid URL"])


@pytest.mark.parametrize("name", ["a\n", "a\nb", "-a", "a" * 65, "é"])
def test_bad_crawl_name(redis_url, conn, name):
    assert_refused(redis_url, conn, "seed", SEED, "--crawl", name, words=["invalid crawl name"])


def test_derived_name_never_starts_with_a_dash(redis_url, conn):
    proc = rqcrawl(redis_url, "seed", "http://[::]/", "--max-depth", "0")
    name = proc.stdout.strip().splitlines()[-1]
    assert keys.valid_crawl_name(name) and name.startswith("crawl-"), name


def crawl_cmd(*args: str, redis_url: str | None = None) -> subprocess.CompletedProcess:
    env = env_with(redis_url or "")
    if redis_url is None:
        env.pop("RQ_REDIS_URL")
    return subprocess.run(
        [str(BIN / "rqcrawl"), "crawl", *args], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def test_crawl_with_an_unusable_data_dir_is_one_line():
    proc = crawl_cmd(SEED, "-o", "/tmp/never.jsonl", "--data-dir", "/proc/x")
    assert_one_line_error(proc, "/proc/x")


def test_crawl_with_an_unwritable_output_fails_before_it_starts(redis_url, conn, tmp_path):
    out = tmp_path / "missing-dir" / "out.jsonl"
    proc = crawl_cmd(SEED, "-o", str(out), redis_url=redis_url)
    assert_one_line_error(proc, str(out))
    assert conn.dbsize() == 0


def test_crawl_with_an_unwritable_warc_dir_is_refused(redis_url, conn, tmp_path):
    out = str(tmp_path / "o.jsonl")
    proc = crawl_cmd(SEED, "-o", out, "--warc", "/proc/x", redis_url=redis_url)
    assert_one_line_error(proc, "/proc/x")
    assert conn.dbsize() == 0


@pytest.fixture
def acl_user(conn):
    """A Redis user with a password who may not run scripts: seeding then fails after the
    config could have been written."""
    conn.acl_setuser(
        "noscript", enabled=True, passwords=["+s3cr3t-pw"], keys=["*"],
        commands=["+@all", "-eval", "-evalsha", "-script"],
    )  # fmt: skip
    conn.execute_command("ACL", "SETUSER", "noscript", "&*")
    yield "noscript", "s3cr3t-pw"
    conn.acl_deluser("noscript")


def test_seed_that_fails_midway_leaves_nothing_and_no_password(redis_server, conn, acl_user):
    user, password = acl_user
    url = f"redis://{user}:{password}@127.0.0.1:{redis_server.port}/0"
    proc = rqcrawl(url, "seed", SEED, "--crawl", "half", check=False)
    assert_one_line_error(proc, "half")
    assert password not in proc.stderr + proc.stdout
    assert crawl_keys(conn) == [] and conn.dbsize() == 0


def test_password_is_masked_in_connection_errors():
    for url in (
        f"redis://:s3cr3t-pw@127.0.0.1:{free_port()}/0",
        f"redis://user:s3cr3t-pw@127.0.0.1:{free_port()}/0",
        f"rediss://user:s3cr3t-pw@127.0.0.1:{free_port()}/0",
        "redis://user:s3cr3t-pw@127.0.0.1:notaport/0",
    ):
        proc = rqcrawl(url, "list", check=False)
        assert_one_line_error(proc, "Redis")
        assert "s3cr3t-pw" not in proc.stderr and "user:***@" in proc.stderr.replace(
            "//:***@", "//user:***@"
        ), proc.stderr


def plant_crawl(conn: redis.Redis, name: str, raw_config: bytes | None) -> None:
    conn.sadd(keys.CRAWLS, name)
    conn.hset(keys.CrawlKeys(name).counters, "admitted", 1)
    if raw_config is not None:
        conn.set(keys.CrawlKeys(name).config, raw_config)


def test_list_status_purge_cope_with_broken_crawls(redis_url, conn):
    rqcrawl(redis_url, "seed", SEED, "--crawl", "good", "--max-depth", "0")
    plant_crawl(conn, "garbled", b"{not json")
    plant_crawl(conn, "invalid", b'{"window": 0}')
    plant_crawl(conn, "noconfig", None)
    rqcrawl(redis_url, "seed", SEED, "--crawl", "wrongtype", "--max-depth", "0")
    conn.delete(keys.CrawlKeys("wrongtype").inflight)
    conn.set(keys.CrawlKeys("wrongtype").inflight, "not a hash")
    conn.sadd(keys.CRAWLS, "bad\nname")

    listed = rqcrawl(redis_url, "list")
    assert "good" in listed.stdout
    warnings = listed.stderr.strip().splitlines()
    assert len(warnings) == 5 and "Traceback" not in listed.stderr, listed.stderr
    for name in ("garbled", "invalid", "noconfig", "wrongtype", "'bad\\nname'"):
        assert any(name in w for w in warnings), (name, warnings)
    assert_one_line_error(rqcrawl(redis_url, "status", "garbled", check=False), "garbled")
    assert_one_line_error(rqcrawl(redis_url, "status", "invalid", check=False), "window")

    assert_one_line_error(rqcrawl(redis_url, "status", "wrongtype", check=False), "WRONGTYPE")

    for name in ("garbled", "invalid", "noconfig", "wrongtype"):
        assert_one_line_error(rqcrawl(redis_url, "purge", name, check=False), "--force")
        rqcrawl(redis_url, "purge", name, "--force")
        assert not list(conn.scan_iter(match=f"rqcrawl:{{{name}}}:*"))
    assert conn.smembers(keys.CRAWLS) == {b"good", b"bad\nname"}


def test_job_ids_name_their_crawl_exactly():
    url_job = InFlight(2, 0.0, 1, 3).job_id("a-b", "http://example.org/x")
    assert job_crawl(url_job) == "a-b"
    assert job_crawl(InFlight(0, 0.0, 0).job_id("a", "http://example.org/")) == "a"
    assert job_crawl("rqcrawl-a-b-wake-1700000000") == "a-b"
    assert job_crawl("rqcrawl-x-0123456789abcdef0123-1-2-fedcba98765432100123-0-0") == (
        "x-0123456789abcdef0123-1-2"
    )
    for other in (
        "rqcrawl-a-b",
        "rqcrawl-a-XYZ-0-0",
        "rqcrawl--wake-1",
        "myjob",
        "rqcrawl-a-wake-",
    ):
        assert job_crawl(other) is None, other


class Boom:
    """Unpickling this creates a file: proof that something unpickled it."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_purge_and_cancel_never_unpickle_job_data(redis_url, conn, tmp_path):
    rqcrawl(redis_url, "seed", SEED, "--crawl", "p", "--max-depth", "0")
    rqcrawl(redis_url, "seed", SEED, "--crawl", "p-q", "--max-depth", "0")
    marker = tmp_path / "unpickled"
    evil = pickle.dumps(Boom(marker))
    queue = f"rq:queue:{keys.QUEUE_NAME}"
    [seed_job] = [j.decode() for j in conn.lrange(queue, 0, -1) if b"-p-q-" not in j]
    planted = ["rqcrawl-p-0123456789abcdef0123-0-0", "rqcrawl-p-wake-1700000000"]
    for job_id in [seed_job, *planted]:
        conn.hset(
            f"rq:job:{job_id}",
            mapping={"data": evil, "meta": evil, "result": evil, "status": "queued",
                     "origin": keys.QUEUE_NAME},
        )  # fmt: skip
    conn.rpush(queue, *planted)
    pickle.loads(pickle.dumps(Boom(tmp_path / "probe")))  # the planted pickle does work
    assert (tmp_path / "probe").exists()

    assert "1 queued RQ job(s) removed" in rqcrawl(redis_url, "cancel", "p").stdout
    said = rqcrawl(redis_url, "purge", "p").stdout
    assert not marker.exists()
    assert "2 RQ job(s)" in said, said
    assert not [k for k in conn.scan_iter(match="rq:job:rqcrawl-p-*") if b"rqcrawl-p-q-" not in k]
    assert conn.exists(keys.CrawlKeys("p-q").config)
    queued = conn.lrange(queue, 0, -1)
    assert queued and all(j.startswith(b"rqcrawl-p-q-") for j in queued), queued


def test_local_workers_get_the_redis_url_from_the_environment(redis_server, conn, tmp_path):
    conn.acl_setuser(
        "crawler", enabled=True, passwords=["+s3cr3t-pw"], keys=["*"], commands=["+@all"]
    )
    conn.execute_command("ACL", "SETUSER", "crawler", "&*")
    url = f"redis://crawler:s3cr3t-pw@127.0.0.1:{redis_server.port}/0"
    site = Site(pages=6, slow={i: 0.3 for i in range(6)})
    out = tmp_path / "out.jsonl"
    try:
        with HTTPSite(site.handle, max_requests=100, max_seconds=120) as http:
            proc = subprocess.Popen(
                [str(BIN / "rqcrawl"), "crawl", http.base + "/p0.html", "-o", str(out),
                 "--allow-private", "--delay", "0", "--max-depth", "2", "--workers", "2"],
                env=env_with(url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            cmdlines = {}

            def workers_seen() -> dict[int, bytes]:
                """The command lines of the crawl's child processes registered with RQ so
                far (its workers: forked, they show the crawl's own command line)."""
                children = set(child_pids(proc.pid))
                for worker in Worker.all(connection=conn):
                    if worker.pid in children:
                        with contextlib.suppress(FileNotFoundError):  # it just ended
                            line = Path(f"/proc/{worker.pid}/cmdline").read_bytes()
                            cmdlines[worker.pid] = line
                return cmdlines

            wait_until(
                workers_seen,
                60,
                "two workers registered (or the crawl over)",
                accept=lambda seen: len(seen) >= 2 or proc.poll() is not None,
            )
            _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert len(cmdlines) == 2
        assert not [c for c in cmdlines.values() if b"s3cr3t" in c], cmdlines
        assert out.read_text().count("\n") == len(site.expected(2))  # they did connect
    finally:
        conn.acl_deluser("crawler")

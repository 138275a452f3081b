"""`rqcrawl bench --script-costs`: what Redis spends on a frontier script call before its work,
on a command inside a script, and on Lua's own operations, in CPU µs.

Why: a page's Redis CPU is three script calls (DEQUEUE, CLAIM, FINISH) and the ~60 commands
they run, and callgrind's instruction count of it misses what costs cycles without costing
instructions (the garbage of the functions a composed script makes again at every call,
docs/benchmarks.md). Each case here runs CALLS times against an embedded Redis of its own,
pipelined, and reads Redis's CPU (INFO) before and after: CPU time, but of one thing at a
time, so the cases compare within a run.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import click
from redis import Redis
from redis.client import Pipeline

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import scripts
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.workers.embedded import EmbeddedRedis

from .runs import redis_cpu_s

CALLS = 20_000  # script calls a case
BATCH = 500  # calls a pipeline
OPS = 1_000  # operations a call, for those inside a script
INSIDE_CALLS = BATCH  # calls of each of those (500,000 operations)

# Operations inside a script, each repeated OPS times a call (KEYS[1] a hash of 40 fields,
# KEYS[2] a sorted set of 50 URLs); the first is the loop's own cost, in each of the others.
INSIDE = {
    "nothing (the loop)": "local x = i",
    "HGET of a 40-field hash": "redis.call('HGET', KEYS[1], 'f20')",
    "HINCRBY (with the append-only file)": "redis.call('HINCRBY', KEYS[1], 'f21', '1')",
    "ZADD of a URL": "redis.call('ZADD', KEYS[2], '1700000000.123456', 'http://h/p' .. i % 50)",
    "ZSCORE in a 50-member sorted set": "redis.call('ZSCORE', KEYS[2], 'http://h/p7')",
    "tonumber of a time": "local x = tonumber('1700000000.123456')",
    "a 4-field string.match": "local a, b, c, d = string.match('1.5 0.5 0 -1', "
    "'^(%S+) (%S+) (%S+) (%S+)')",
    "string.format('%.6f')": "local x = string.format('%.6f', 1700000000.123456 + i)",
}


def per_call(r: Redis, queue_one: Callable[[Pipeline], None], calls: int) -> float:
    """Redis's CPU µs a call, over `calls` calls that `queue_one` adds to pipelines."""
    before = redis_cpu_s(r)
    for start in range(0, calls, BATCH):
        pipe = r.pipeline(transaction=False)
        for _ in range(min(BATCH, calls - start)):
            queue_one(pipe)
        pipe.execute()
    return (redis_cpu_s(r) - before) * 1e6 / calls


def calls_of(r: Redis) -> dict[str, Callable[[Pipeline], None]]:
    """The composed-call cases, by label: a call queued. CLAIM's keys and arguments are a
    crawl's at default settings; its URL is held by no job, so the call does its reads and
    nothing else. The other two take the same and do nothing: one binds them only
    (lua/args.lua), one runs the frontier's header too (lua/frontier.lua: its functions are
    left out, as from any script that calls none of them)."""
    claim = Frontier(r, "script-costs", CrawlConfig()).claim_call("http://127.0.0.1/p", "j-1-0")
    keys, args = scripts.CLAIM.keys, scripts.CLAIM.args
    made = len(scripts.FUNCTION.findall(scripts.CLAIM.source))
    of = len(scripts.FUNCTION.findall(scripts.lua_source("frontier")))
    cases = {
        f"a call with CLAIM's {len(keys) + len(args)} keys and arguments": scripts.Script(
            keys, args, lua="args"
        ),
        "the same, running the frontier's header": scripts.Script(keys, args, lua="frontier"),
        f"CLAIM of a URL no job holds ({made} of the frontier's {of} functions made)": (
            scripts.CLAIM
        ),
    }
    scripts.load(r, *cases.values())
    return {label: partial(script.queue, **claim) for label, script in cases.items()}


def inside_of(r: Redis) -> dict[str, Callable[[Pipeline], None]]:
    """The operation cases, by label: a call queued of a script that runs it OPS times."""
    r.hset("h", mapping={f"f{i}": "12345" for i in range(40)})
    r.zadd("z", {f"http://h/p{i}": i for i in range(50)})
    shas = {label: r.script_load(f"for i = 1, {OPS} do {op} end") for label, op in INSIDE.items()}
    return {label: partial(run_on, sha) for label, sha in shas.items()}


def run_on(sha: str, pipe: Pipeline) -> None:
    """Queue a call of an operation's script, on the hash and the sorted set inside_of made."""
    pipe.evalsha(sha, 2, "h", "z")


def report(repeat: int) -> None:
    """Measure every case `repeat` times, in turn, and print their medians."""
    with tempfile.TemporaryDirectory(prefix="rqcrawl-script-costs-") as tmp:
        server = EmbeddedRedis(Path(tmp)).start()
        try:
            r = Redis(unix_socket_path=str(server.socket))
            composed, inside = calls_of(r), inside_of(r)
            got: dict[str, list[float]] = {}
            for i in range(repeat):
                click.echo(f"script costs, round {i + 1}/{repeat}...", err=True)
                for label, queue_one in composed.items():
                    got.setdefault(label, []).append(per_call(r, queue_one, CALLS))
                for label, queue_one in inside.items():
                    cost = per_call(r, queue_one, INSIDE_CALLS) / OPS
                    got.setdefault(label, []).append(cost)
        finally:
            server.stop()
    width = max(map(len, got))
    lines = [
        f"Redis CPU µs (medians of {repeat} round(s); runs), an embedded Redis of its own:",
        f"a call, {CALLS:,} calls pipelined:",
    ]
    for label in composed:
        lines.append(row(label, got[label], width))
    lines.append(f"an operation inside a script, {OPS:,} a call:")
    for label in inside:
        lines.append(row(label, got[label], width))
    lines.append(f"reproduce: rqcrawl bench --script-costs --repeat {repeat}")
    click.echo("\n".join(lines))


def row(label: str, values: list[float], width: int) -> str:
    runs = ", ".join(f"{v:.2f}" for v in values)
    return f"  {label:<{width}}  {statistics.median(values):8.2f}  ({runs})"

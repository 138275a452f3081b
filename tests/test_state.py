"""The crawl's state machine, specified directly on CrawlState and its Lua against a real Redis:
the level barrier, the window, budgets, deferral, put back, cancel and recovery. (RQ is not
involved: what a change releases is returned, and the frontier's job is to queue it.)"""

from __future__ import annotations

import json
import time

import pytest
from redis.exceptions import NoScriptError

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import keys, scripts
from rqcrawl.frontier.state import CLAIM_NOTE_EVERY, CrawlState, InFlight
from rqcrawl.ops.sinks import iter_records, record, skip_template

A, B, C = "http://a.test/", "http://b.test/", "http://c.test/"


def crawl(conn, name: str = "s", **settings) -> CrawlState:
    cfg = CrawlConfig.from_dict({"bloom_capacity": 10_000, **settings})
    state = CrawlState(conn, name, cfg)
    conn.set(state.keys.reap_lock, 1, ex=300)  # the finish step must not ask for a reap
    return state


def urls(released) -> list[str]:
    return [url for url, _ in released]


def end(state: CrawlState, url: str, children=(), depth: int = 1, outcome: str = "fetched"):
    """End `url` as fetched with `children` (plain URLs, admitted unless refused, at the
    priority they inherit from `url`)."""
    page = record(url, outcome, depth - 1)
    entry = state.redis.hget(state.keys.inflight, url)
    inherited = state.inherited(InFlight.parse(entry).priority if entry else 0)
    links = [(None, c) for c in children]
    return state.finish(url, {keys.FETCHED: 1}, page, links, depth, inherited).released


def job_of(state: CrawlState, url: str) -> tuple[InFlight, str]:
    entry = InFlight.parse(state.redis.hget(state.keys.inflight, url))
    return entry, entry.job_id(state.crawl, url)


def test_level_d_plus_1_starts_only_when_every_url_of_level_d_has_ended(conn):
    state = crawl(conn)
    _, released = state.seed([A, B])
    assert urls(released) == [A, B]
    assert end(state, A, [A + "1", A + "2"]) == []  # B (level 0) is still in flight
    assert conn.llen(state.keys.held) == 2
    assert urls(end(state, B, [B + "1"])) == [A + "1", A + "2", B + "1"]
    assert state.snapshot().count(keys.LEVEL) == 1
    assert {job_of(state, u)[0].depth for u in [A + "1", B + "1"]} == {1}


def test_no_more_than_window_urls_are_in_flight(conn):
    state = crawl(conn, window=2)
    admitted, released = state.seed([A, B, C, A + "x", B + "x"])
    assert admitted == 5 and urls(released) == [A, B]
    assert conn.hlen(state.keys.inflight) == 2 and conn.llen(state.keys.held) == 3
    assert urls(end(state, A)) == [C]  # one ends, one more goes
    assert conn.hlen(state.keys.inflight) == 2


def test_a_link_is_admitted_once_whoever_finds_it(conn):
    state = crawl(conn)
    state.seed([A, B])
    end(state, A, [C])
    end(state, B, [C])  # through the Bloom filter, not this process's memory
    state.known.clear()
    assert state.snapshot().count(keys.ADMITTED) == 3
    assert conn.lrange(state.keys.held, 0, -1) == []  # C was released with level 1
    assert conn.hexists(state.keys.inflight, C)


def test_budgets_refuse_links_once_each_with_a_record_built_from_the_same_fields(conn):
    state = crawl(conn, max_pages=3, max_pages_per_host=2)
    state.seed([A])
    end(state, A, [A + "1", A + "2", B + "1", B + "2"])
    end_again = [A + "2"]  # already refused: the filter knows it, no second record
    state.finish(
        A + "1", {keys.FETCHED: 1}, record(A + "1", "fetched", 1), [(None, u) for u in end_again], 2
    )
    refused = {r["url"]: r for r in iter_records(conn, "s") if r["outcome"] != "fetched"}
    assert set(refused) == {A + "2", B + "2"}
    assert refused[A + "2"]["outcome"] == "max_pages_per_host"  # A has A and A1
    assert refused[B + "2"]["outcome"] == "max_pages"  # A, A1, B1 admitted: 3
    template = record("", None, 1, attempts=0)
    assert set(refused[B + "2"]) == set(template) and refused[B + "2"]["depth"] == 1
    assert refused[B + "2"]["attempts"] == 0 and refused[B + "2"]["fields"] == {}
    snap = state.snapshot()
    assert snap.family(keys.SKIPPED) == {"max_pages": 1, "max_pages_per_host": 1}
    assert snap.count(keys.ADMITTED) == 3


def test_the_host_share_applies_past_the_first_100_and_a_host_gets_room_as_the_crawl_grows(conn):
    state = crawl(conn, max_host_share=0.5)
    assert state.seed([f"{A}{i}" for i in range(100)])[0] == 100  # small crawls are not cut
    assert state.seed([A + "x", B + "1"])[0] == 1  # A would have 101 of 102
    refused = [(r["url"], r["outcome"]) for r in iter_records(conn, "s")]
    assert refused == [(A + "x", "max_host_share")]
    assert state.snapshot().family(keys.SKIPPED) == {"max_host_share": 1}
    assert state.seed([f"{C}{i}" for i in range(100)])[0] == 100  # the crawl grows: 201
    assert state.seed([A + "x", A + "y"])[0] == 1  # x stays refused, y fits: 101 of 202
    assert state.snapshot().hosts["a.test"][keys.ADMITTED] == 101
    assert len(list(iter_records(conn, "s"))) == 1  # x was recorded once


def test_a_level_is_released_highest_priority_first_and_links_inherit_a_share(conn):
    state = crawl(conn, window=1, priority_share=0.5)
    assert urls(state.seed([A])[1]) == [A]  # the window's one place
    state.seed([B], priority=5)
    state.seed([C], priority=-2)
    state.seed([A + "0"])
    assert urls(end(state, A, [A + "1"])) == [B]  # before A0 (0) and C (-2), found earlier
    assert job_of(state, B)[0].priority == 5
    assert urls(end(state, B, [B + "1"])) == [A + "0"]  # B1 (priority 2) waits for level 1
    assert urls(end(state, A + "0")) == [C]
    assert urls(end(state, C, [C + "1"])) == [B + "1"]  # level 1: 2, then 0, then -1
    assert job_of(state, B + "1")[0].priority == 2
    assert urls(end(state, B + "1", depth=2)) == [A + "1"]
    assert urls(end(state, A + "1", depth=2)) == [C + "1"]
    assert job_of(state, C + "1")[0].priority == -1
    assert state.unfinished() == 1 and not conn.exists(state.keys.priorities)


def test_without_exact_depth_a_deeper_url_goes_without_waiting_for_its_level(conn):
    state = crawl(conn, exact_depth=False)
    state.seed([A, B])
    assert urls(end(state, A, [A + "1"])) == [A + "1"]  # B (depth 0) is still in flight
    assert job_of(state, A + "1")[0].depth == 1
    assert urls(end(state, A + "1", [A + "2", B + "1"], depth=2)) == [A + "2", B + "1"]
    assert end(state, B, [B + "1"]) == []  # B1 was first found at depth 2: it keeps it
    assert job_of(state, B + "1")[0].depth == 2
    assert state.snapshot().count(keys.LEVEL) == 0  # no levels, no barrier


def test_without_exact_depth_priority_still_orders_the_release(conn):
    state = crawl(conn, window=1, exact_depth=False, priority_share=1)
    state.seed([A])
    state.seed([B], priority=5)
    state.seed([C])
    assert urls(end(state, A, [A + "1"])) == [B]  # priority 5 first
    assert urls(end(state, B, [B + "1"])) == [B + "1"]  # 5 again, although deeper than C
    assert urls(end(state, B + "1", depth=2)) == [C]  # then 0 in the order found
    assert urls(end(state, C)) == [A + "1"]


@pytest.mark.parametrize("exact", [True, False])
def test_parked_urls_leave_room_in_the_window_only_without_exact_depth(conn, exact):
    """A slow host's deferred URLs must not fill the window and starve the other hosts
    when there is no level barrier; with it, the window stays a cap on in-flight URLs."""
    state = crawl(conn, window=2, exact_depth=exact)
    state.seed([A + "1", A + "2", A + "3", B])
    for url in (A + "1", A + "2"):  # host A is not ready: both wait in `later`
        entry, job_id = job_of(state, url)
        state.claim(url, job_id)
        assert state.park(url, entry, InFlight(0, time.time() + 60, 0, 1))
    released = state.seed([C])[1]  # any finish step releases
    assert urls(released) == ([] if exact else [A + "3", B])


def test_a_put_back_url_keeps_its_priority_and_cancel_drops_every_priority(conn):
    state = crawl(conn, window=1)
    state.seed([A], priority=3)
    state.seed([B, C], priority=1)
    entry, _ = job_of(state, A)
    state.pause()
    assert state.put_back(A, entry)
    assert state.snapshot().held == 3
    assert urls(state.resume()) == [A] and job_of(state, A)[0].priority == 3
    assert state.cancel()[0] == 2
    assert state.unfinished() == 0 and not conn.keys(state.keys.held + "*")


def test_a_refusal_verdict_is_recorded_and_counted_not_admitted(conn):
    state = crawl(conn)
    state.seed([A])
    page = record(A, "fetched", 0)
    state.finish(A, {keys.FETCHED: 1}, page, [("out_of_scope", C), (None, B)], 1)
    outcomes = {r["url"]: r["outcome"] for r in iter_records(conn, "s")}
    assert outcomes == {A: "fetched", C: "out_of_scope"}
    assert state.snapshot().family(keys.SKIPPED) == {"out_of_scope": 1}


def test_a_url_ends_once_a_second_finish_changes_nothing(conn):
    state = crawl(conn)
    state.seed([A])
    end(state, A, [B])
    before = state.snapshot().counters
    assert end(state, A, [C]) == []  # a stale job: no record, no count, no links
    assert len(list(iter_records(conn, "s"))) == 1
    after = state.snapshot().counters
    assert after[keys.FETCHED] == before[keys.FETCHED] == 1
    assert not conn.hexists(state.keys.inflight, C) and conn.llen(state.keys.held) == 0


def test_claim_takes_the_lease_only_for_the_live_job(conn):
    state = crawl(conn)
    state.seed([A])
    entry, job_id = job_of(state, A)
    stale = InFlight(entry.depth, entry.released_at, entry.attempt, entry.turn + 1)
    assert state.claim(A, stale.job_id("s", A)).entry is None
    assert conn.zscore(state.keys.leased, A) is None
    claim = state.claim(A, job_id)
    assert claim.entry == entry and not claim.paused and not claim.stale
    assert conn.zscore(state.keys.leased, A) > time.time()


def test_a_process_notes_its_claims_time_at_most_once_a_second(conn):
    state = crawl(conn)
    state.seed([A, B])
    (_, a_job), (_, b_job) = job_of(state, A), job_of(state, B)
    state.claim(A, a_job)
    noted = float(conn.hget(state.keys.counters, keys.LAST_CLAIM_AT))
    assert noted == pytest.approx(time.time(), abs=1)
    state.claim(B, b_job)  # within the second: not noted again
    assert float(conn.hget(state.keys.counters, keys.LAST_CLAIM_AT)) == noted
    state.claim_noted_at -= CLAIM_NOTE_EVERY  # a second later
    state.claim(B, b_job)
    assert float(conn.hget(state.keys.counters, keys.LAST_CLAIM_AT)) > noted


def test_a_parked_url_waits_in_later_until_its_time_then_comes_back_as_a_new_turn(conn):
    state = crawl(conn)
    state.seed([A, B])
    entry, job_id = job_of(state, A)
    state.claim(A, job_id)
    soon = InFlight(entry.depth, time.time() + 60, entry.attempt, entry.turn + 1)
    assert state.park(A, entry, soon)
    assert not state.park(A, entry, soon)  # the old turn is stale now
    assert conn.zscore(state.keys.leased, A) is None  # a waiting URL is nobody's
    assert state.take_due() == [] and state.next_due() == pytest.approx(soon.released_at)
    due = InFlight(entry.depth, time.time() - 1, entry.attempt, entry.turn + 2)
    assert state.park(A, soon, due)
    assert state.take_due() == [(A, due)]
    assert state.take_due() == []  # taken once
    _, b_job = job_of(state, B)
    late = InFlight(0, time.time() - 1, 0, 1)
    state.claim(B, b_job)
    state.park(B, job_of(state, B)[0], late)
    assert state.claim(A, due.job_id("s", A)).due == [(B, late)]  # the claim releases too


def test_a_retry_is_the_next_attempt_and_counts(conn):
    state = crawl(conn)
    state.seed([A])
    entry, _ = job_of(state, A)
    retry = InFlight(entry.depth, time.time() + 5, entry.attempt + 1)
    assert state.park(A, entry, retry, keys.RETRIES)
    assert state.snapshot().count(keys.RETRIES) == 1
    assert job_of(state, A)[0] == retry


def test_a_paused_crawl_gets_its_url_back_at_the_head_of_held(conn):
    state = crawl(conn, window=1)
    state.seed([A, B])
    entry, _ = job_of(state, A)
    assert not state.put_back(A, entry)  # not paused: the job goes on
    assert state.pause() and not state.pause()
    assert end(state, A) == []  # paused: the window releases nothing
    state.seed([C])
    assert conn.hlen(state.keys.inflight) == 0 and conn.lrange(state.keys.held, 0, -1) == [
        b"0 " + B.encode(),
        b"0 " + C.encode(),
    ]
    assert urls(state.resume()) == [B]


def test_put_back_returns_the_url_to_held_while_paused(conn):
    state = crawl(conn)
    state.seed([A])
    entry, _ = job_of(state, A)
    state.pause()
    assert state.put_back(A, entry)
    assert not state.put_back(A, entry)  # once
    assert conn.lrange(state.keys.held, 0, -1) == [b"0 " + A.encode()]
    assert state.snapshot().count(keys.PUT_BACK) == 1
    assert urls(state.resume()) == [A]


def test_cancel_drops_held_in_flight_and_waiting_urls_at_once(conn):
    state = crawl(conn, window=2)
    state.seed([A, B, C])
    entry, _ = job_of(state, B)
    state.park(B, entry, InFlight(0, time.time() + 60, 0, 1))
    held, dropped = state.cancel()
    assert held == 1 and sorted(urls(dropped)) == [A, B]
    assert state.cancel() is None
    assert not conn.exists(state.keys.held, state.keys.inflight, state.keys.later)
    snap = state.snapshot()
    assert snap.count(keys.DROPPED) == 3 and keys.CANCELLED_AT in snap.counters
    a_entry = InFlight(0, 0.0, 0)
    assert not state.put_back(A, a_entry) and end(state, A) == []  # running jobs end quietly


def test_a_job_running_during_a_cancel_drops_its_url(conn):
    state = crawl(conn)
    state.seed([A])
    entry, _ = job_of(state, A)
    conn.hset(state.keys.counters, mapping={keys.PAUSED_AT: 1, keys.CANCELLED_AT: 1})
    assert state.put_back(A, entry)
    assert state.snapshot().count(keys.DROPPED) == 1 and conn.llen(state.keys.held) == 0


def test_recovery_finds_expired_leases_and_old_unleased_urls_but_not_waiting_ones(conn):
    state = crawl(conn)
    state.seed([A, B, C])
    a, a_job = job_of(state, A)
    state.claim(A, a_job)
    conn.zadd(state.keys.leased, {A: time.time() - 1, "http://ended.test/": time.time() - 1})
    c, _ = job_of(state, C)
    state.park(C, c, InFlight(0, time.time() - 100, 0, 1))  # waiting: never lost
    orphans, lost, unleased = state.recovery_candidates(lost_after=-1)
    assert orphans == ["http://ended.test/"]
    assert lost == [(A, a)]
    assert urls(unleased) == [B]
    assert state.recovery_candidates(lost_after=60)[2] == []  # B was released just now


def test_requeue_replaces_only_the_expected_entry_and_never_a_renewed_one(conn):
    state = crawl(conn)
    state.seed([A])
    a, job_id = job_of(state, A)
    state.claim(A, job_id)  # a live lease
    nxt = InFlight(0, time.time(), a.attempt + 1)
    assert not state.requeue(A, a, nxt)  # its worker is alive
    conn.zadd(state.keys.leased, {A: time.time() - 1})
    assert not state.requeue(A, nxt, nxt)  # not the entry it has
    assert state.requeue(A, a, nxt) and job_of(state, A)[0] == nxt
    assert state.snapshot().count(keys.RECOVERED) == 1
    assert conn.zscore(state.keys.leased, A) is None
    assert state.still_lost(A, nxt) and not state.still_lost(A, a)


def test_snapshot_groups_counters_by_family_and_host(conn):
    state = crawl(conn)
    state.seed([A, B])
    counts = {
        keys.FETCHED: 1,
        keys.per_host(keys.FETCHED, "a.test"): 1,
        keys.links_dropped("bad"): 2,
    }
    state.finish(A, counts, record(A, "fetched", 0), [], 1)
    snap = state.snapshot()
    assert snap.hosts["a.test"] == {keys.ADMITTED: 1, keys.FETCHED: 1}
    assert snap.hosts["b.test"] == {keys.ADMITTED: 1}
    assert snap.family(keys.LINKS) == {"bad": 2}
    assert snap.in_flight == [B] and snap.held == 0 and snap.deferred == 0


def test_scripts_take_named_arguments_and_survive_a_script_flush(conn):
    state = crawl(conn)
    with pytest.raises(TypeError, match="unknown script parameters"):
        scripts.DUE(conn, later=state.keys.later, inflight=state.keys.inflight, now=1, limit=1, x=1)
    conn.script_flush()
    assert (
        scripts.DUE(conn, later=state.keys.later, inflight=state.keys.inflight, now=1, limit=1)
        == []
    )
    conn.script_flush()
    state.seed([A])
    _, job_id = job_of(state, A)
    conn.script_flush()  # the claim loads what a restarted Redis forgot
    assert state.claim(A, job_id).entry is not None
    with pytest.raises(NoScriptError):
        conn.script_flush()
        conn.evalsha(scripts.DUE.sha, 2, "k1", "k2", 1, 1)


def test_the_skip_template_is_a_record_without_its_url_and_outcome():
    template = json.loads(skip_template(3))
    assert template["depth"] == 3 and template["attempts"] == 0 and "url" not in template


def test_readmit_brings_ended_urls_back_past_the_bloom_filter_once_until_they_end(conn):
    state = crawl(conn)
    state.seed([A])
    end(state, A, [B])
    end(state, B, [], depth=2)
    assert state.unfinished() == 0
    added, released = state.readmit([(A, 0, 0), (B, 1, 0), (A, 0, 0)])  # seen, but not done
    assert added == 2 and urls(released) == [A, B]
    assert job_of(state, B)[0].depth == 1
    assert state.readmit([(A, 0, 0), (B, 1, 0)]) == (0, [])  # in flight: not twice
    end(state, A, [B])  # a revisit's links go through the filter: B is not admitted again
    assert state.snapshot().count(keys.ADMITTED) == 2
    assert state.readmit([(A, 0, 0)])[0] == 1  # ended: due again
    assert state.snapshot().count(keys.REVISITS) == 3


def test_a_readmitted_url_waiting_in_held_is_not_readmitted_twice(conn):
    state = crawl(conn, window=1)
    state.seed([A])
    end(state, A, [B])
    end(state, B, [], depth=2)
    state.seed([C])  # fills the window: the revisits wait in held
    assert state.readmit([(A, 0, 0), (B, 1, 0)]) == (2, [])
    assert state.readmit([(A, 0, 0), (B, 1, 0)]) == (0, [])
    assert conn.lrange(state.keys.held, 0, -1) == [b"0 " + A.encode(), b"1 " + B.encode()]


def test_a_cancelled_crawl_readmits_nothing_and_forgets_its_pending_revisits(conn):
    state = crawl(conn, window=1)
    state.seed([A, B])
    end(state, A)
    state.readmit([(A, 0, 0)])
    state.cancel()
    assert not conn.exists(state.keys.revisiting)
    assert state.readmit([(A, 0, 0)]) == (0, [])


def test_the_pump_takes_its_turn_once_per_period_whoever_asks(conn):
    state = crawl(conn)
    assert state.pump_due(5) and not state.pump_due(5)
    assert not crawl(conn).pump_due(5)  # another process

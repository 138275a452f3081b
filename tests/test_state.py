"""The crawl's state machine, specified directly on CrawlState and its Lua against a real Redis:
each host's queue and pace, exact depth without a barrier (shorter paths found late, records
held back), the window, budgets, parking, put back, cancel and recovery. (RQ is not involved:
what a change releases is returned, and the frontier's job is to queue it.)"""

from __future__ import annotations

import hashlib
import json
import re
import time

import pytest
from helpers import command_calls, waiting
from redis.exceptions import NoScriptError

from rqcrawl.config import CrawlConfig
from rqcrawl.defaults import CLAIM_NOTE_EVERY
from rqcrawl.frontier import keys, scripts
from rqcrawl.frontier.messages import Ending, Slot
from rqcrawl.frontier.records import record, skip_template
from rqcrawl.frontier.state import CrawlState, InFlight
from rqcrawl.ops.sinks import iter_records

A, B, C = "http://a.test/", "http://b.test/", "http://c.test/"


def crawl(conn, name: str = "s", **settings) -> CrawlState:
    """A crawl without delay between requests unless told (the pace has tests of its own)."""
    cfg = CrawlConfig.from_dict({"bloom_capacity": 10_000, "delay": 0.0, **settings})
    state = CrawlState(conn, name, cfg)
    conn.set(state.keys.reap_lock, 1, ex=300)  # the finish step must not ask for a reap
    return state


def urls(released) -> list[str]:
    return [url for url, _ in released]


def end(
    state: CrawlState,
    url: str,
    children=(),
    depth: int = 1,
    outcome: str = "fetched",
    links=None,
    seconds: float = 0.01,
    answer: str = "ok",
):
    """End `url` as fetched at depth - 1 with `children` (plain URLs, admitted unless refused,
    at the priority they inherit from `url`) after a request of `seconds`; `links`: the
    page's links kept with a held-back record (all of them, past max_depth too)."""
    page = record(url, outcome, depth - 1)
    entry = state.redis.hget(state.keys.inflight, url)
    inherited = state.inherited(InFlight.parse(entry).priority if entry else 0)
    within = [(None, c) for c in children] if depth <= state.cfg.max_depth else []
    kept = [(None, u) for u in links] if links is not None else None
    cut = kept if kept and depth > state.cfg.max_depth else ()
    slot = Slot(state.key_of(url), seconds, answer)
    ending = Ending({keys.FETCHED: 1}, page, within, depth, inherited, "", slot, kept, cut)
    return state.finish_step(url, ending).released


def job_of(state: CrawlState, url: str) -> tuple[InFlight, str]:
    entry = InFlight.parse(state.redis.hget(state.keys.inflight, url))
    return entry, entry.job_id(state.crawl, url)


def depths(conn, crawl: str = "s") -> dict[str, int]:
    return {r["url"]: r["depth"] for r in iter_records(conn, crawl)}


def test_each_host_goes_at_its_own_pace_and_no_host_waits_for_another(conn):
    state = crawl(conn, delay=0.3)
    _, released = state.seed_step([A, B])
    assert urls(released) == [A, B]  # two hosts: both at once
    assert urls(end(state, A, [A + "1", A + "2", B + "1"])) == []  # a.test: 0.3 s after A
    assert urls(end(state, B, [B + "2"], seconds=0.1)) == []  # b.test the same
    assert state.next_due() == pytest.approx(time.time() + 0.3, abs=0.05)
    time.sleep(0.35)
    assert sorted(urls(state.take_due()[1])) == [A + "1", B + "1"]  # one each, level 1
    assert set(waiting(state)) == {A + "2", B + "2"}
    time.sleep(0.35)
    assert urls(state.take_due()[1]) == []  # each host has its request in flight
    assert urls(end(state, A + "1", depth=2)) == []  # ... and waits its delay after it
    time.sleep(0.35)
    assert urls(state.take_due()[1]) == [A + "2"]


def test_a_host_takes_host_concurrency_requests_at_once_and_the_window_caps_them_all(conn):
    state = crawl(conn, host_concurrency=2, window=3)
    _, released = state.seed_step([A + "1", A + "2", A + "3", B])
    assert sorted(urls(released)) == [A + "1", A + "2", B]  # 2 of a.test, 3 in all
    assert conn.hlen(state.keys.inflight) == 3
    assert urls(end(state, B)) == []  # room again, but a.test has its 2 requests
    assert urls(end(state, A + "1")) == [A + "3"]


def test_a_link_is_admitted_once_whoever_finds_it(conn):
    state = crawl(conn)
    state.seed_step([A, B])
    end(state, A, [C])
    end(state, B, [C])  # through the Bloom filter, not this process's memory
    state.known.clear()
    assert state.snapshot().count(keys.ADMITTED) == 3
    assert conn.hexists(state.keys.inflight, C) and waiting(state) == {}


def test_a_process_tries_the_recovery_lock_at_most_once_a_second_however_many_urls_end(conn):
    state = crawl(conn, host_concurrency=3)
    _, released = state.seed_step([A + "1", A + "2", A + "3"])
    assert len(released) == 3
    before = command_calls(conn, "set")
    for url in urls(released):
        end(state, url)
    assert command_calls(conn, "set") - before == 1  # (within REAP_TRY_EVERY of the first)


def test_budgets_refuse_links_once_each_with_a_record_built_from_the_same_fields(conn):
    state = crawl(conn, max_pages=3, max_pages_per_host=2)
    state.seed_step([A])
    end(state, A, [A + "1", A + "2", B + "1", B + "2"])
    end_again = [A + "2"]  # already refused: the filter knows it, no second record
    end(state, A + "1", end_again, depth=2)
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


def test_with_budgets_a_level_is_released_only_once_the_one_before_ended(conn):
    """Budgets keep the pages a breadth-first crawl would: the level barrier."""
    state = crawl(conn, max_pages=100)
    state.seed_step([A, B])
    assert end(state, A, [A + "1"]) == []  # B (level 0) is still in flight
    assert waiting(state) == {A + "1": 1}
    assert urls(end(state, B, [B + "1"])) == [A + "1", B + "1"]
    assert state.snapshot().count(keys.LEVEL) == 1


def test_the_host_share_applies_past_the_first_100_and_a_host_gets_room_as_the_crawl_grows(conn):
    state = crawl(conn, max_host_share=0.5)
    assert state.seed_step([f"{A}{i}" for i in range(100)])[0] == 100  # small crawls are not cut
    assert state.seed_step([A + "x", B + "1"])[0] == 1  # A would have 101 of 102
    refused = [(r["url"], r["outcome"]) for r in iter_records(conn, "s")]
    assert refused == [(A + "x", "max_host_share")]
    assert state.snapshot().family(keys.SKIPPED) == {"max_host_share": 1}
    assert state.seed_step([f"{C}{i}" for i in range(100)])[0] == 100  # the crawl grows: 201
    assert state.seed_step([A + "x", A + "y"])[0] == 1  # x stays refused, y fits: 101 of 202
    assert state.snapshot().hosts["a.test"][keys.ADMITTED] == 101
    assert len(list(iter_records(conn, "s"))) == 1  # x was recorded once


def test_a_host_releases_its_lowest_depth_then_highest_priority_first(conn):
    state = crawl(conn, priority_share=1, delay=0.2)
    state.seed_step([A])
    state.seed_step([A + "p5"], priority=5)
    state.seed_step([A + "m2"], priority=-2)
    end(state, A, [A + "d1"])  # depth 1, priority 0
    for want in (A + "p5", A + "m2", A + "d1"):
        time.sleep(0.25)
        released = state.take_due()[1]
        assert urls(released) == [want]
        assert job_of(state, want)[0].priority == {"p5": 5, "m2": -2, "d1": 0}[want[-2:]]
        end(state, want, depth=released[0][1].depth + 1)


def test_a_shorter_path_found_late_lowers_a_waiting_url(conn):
    state = crawl(conn, delay=0.5)
    state.seed_step([A, B])
    end(state, A, [A + "1"])
    time.sleep(0.55)
    state.take_due()
    end(state, A + "1", [A + "2"], depth=2)  # a.test ran ahead: A2 waits at depth 2
    assert waiting(state) == {A + "2": 2}
    end(state, B, [A + "2"])  # the slow host links it at depth 1
    assert waiting(state) == {A + "2": 1}
    assert state.snapshot().count(keys.LOWERED) == 1


def test_a_shorter_path_found_while_in_flight_records_the_url_at_it(conn):
    state = crawl(conn)
    state.seed_step([A, B])
    end(state, A, [A + "1"])
    end(state, A + "1", [A + "2"], depth=2)  # A2 released at depth 2
    entry, job_id = job_of(state, A + "2")
    assert entry.depth == 2
    end(state, B, [A + "2"])  # found at depth 1 while its job runs
    assert state.claim_step(A + "2", job_id).lowered == 1
    end(state, A + "2", [A + "3"], depth=3, links=[A + "3"])  # its job still thinks 2
    assert depths(conn)[A + "2"] == 1
    admit_outbox(state)  # its links, past max_depth 2 at depth 2, are within it at 1
    assert job_of(state, A + "3")[0].depth == 2


def test_a_shorter_path_found_after_the_end_lowers_the_held_back_record_and_its_links(conn):
    state = crawl(conn, max_depth=3)
    state.seed_step([A, B])
    end(state, A, [A + "1"])
    end(state, A + "1", [A + "2"], depth=2)
    end(state, A + "2", [A + "3"], depth=3, links=[A + "3"])  # depth 2 > level 0 + 1
    end(state, A + "3", [A + "4"], depth=4, links=[A + "4"])  # at max_depth: A4 is cut
    assert A + "2" not in depths(conn) and state.snapshot().held_back == 2
    assert A + "4" not in waiting(state) and not state.redis.hexists(state.keys.inflight, A + "4")
    end(state, B, [A + "2"])  # B (depth 0) links A2: depth 1
    assert depths(conn)[A + "2"] == 1  # lowered, and final (the level is now 1)
    assert state.redis.llen(state.keys.outbox) == 1  # A3 sent again one deeper: 2
    admit_outbox(state)
    assert depths(conn)[A + "3"] == 2  # its record was held back, lowered too
    admit_outbox(state)  # A3's links again: A4 is within max_depth now
    assert job_of(state, A + "4")[0].depth == 3
    end(state, A + "4", depth=4)
    assert depths(conn) == {A: 0, B: 0, A + "1": 1, A + "2": 1, A + "3": 2, A + "4": 3}
    assert state.unfinished() == 0


def admit_outbox(state: CrawlState) -> None:
    """What a drain does with this shard's outbox (Frontier.drain)."""
    links = state.read_outbox("t", 100)
    state.admit(links)
    state.trim_outbox("t", len(links))


def test_held_back_records_are_emitted_once_the_level_makes_them_final(conn):
    state = crawl(conn)
    state.seed_step([A, B])
    end(state, A, [A + "1"])
    end(state, A + "1", [A + "2"], depth=2, links=[A + "2"])
    assert A + "1" in depths(conn)  # depth 1: already final while B (0) waits
    end(state, A + "2", depth=3, links=[])
    assert A + "2" not in depths(conn) and state.snapshot().held_back == 1
    end(state, B)  # the level moves past 0 and 1: depth 2 is final
    assert depths(conn)[A + "2"] == 2 and state.snapshot().held_back == 0
    assert state.unfinished() == 0


def test_at_max_ahead_held_back_records_only_the_levels_urls_go(conn):
    state = crawl(conn, max_ahead=1, max_depth=3)
    state.seed_step([A, B])
    end(state, A, [A + "1"])
    end(state, A + "1", [A + "2"], depth=2, links=[A + "2"])
    end(state, A + "2", [A + "3"], depth=3, links=[A + "3"])  # held back: the bound
    assert waiting(state) == {A + "3": 3}  # past the level: waits for it
    assert conn.sismember(state.keys.blocked, "a.test")
    assert urls(end(state, B)) == [A + "3"]  # level 1: the record goes, A3 may go


def test_without_room_ahead_the_crawl_goes_level_by_level(conn):
    state = crawl(conn, max_ahead=0)
    state.seed_step([A, B])
    assert end(state, A, [A + "1"]) == []  # B (level 0) is still in flight
    assert urls(end(state, B, [B + "1"])) == [A + "1", B + "1"]


def test_without_exact_depth_a_url_keeps_its_first_found_depth(conn):
    state = crawl(conn, exact_depth=False)
    state.seed_step([A, B])
    end(state, A, [A + "1"])
    end(state, A + "1", [A + "2"], depth=2)
    end(state, B, [A + "2"])  # found shorter: kept as first found
    assert job_of(state, A + "2")[0].depth == 2 and state.snapshot().held_back == 0
    assert state.snapshot().count(keys.LOWERED) == 0


def test_a_refusal_verdict_is_recorded_and_counted_not_admitted(conn):
    state = crawl(conn)
    state.seed_step([A])
    page = record(A, "fetched", 0)
    ending = Ending({keys.FETCHED: 1}, page, [("out_of_scope", C), (None, B)], 1)
    state.finish_step(A, ending)
    outcomes = {r["url"]: r["outcome"] for r in iter_records(conn, "s")}
    assert outcomes == {A: "fetched", C: "out_of_scope"}
    assert state.snapshot().family(keys.SKIPPED) == {"out_of_scope": 1}


def test_a_url_ends_once_a_second_finish_changes_nothing(conn):
    state = crawl(conn)
    state.seed_step([A])
    end(state, A, [B])
    before = state.snapshot().counters
    assert end(state, A, [C]) == []  # a stale job: no record, no count, no links
    assert len(list(iter_records(conn, "s"))) == 1
    after = state.snapshot().counters
    assert after[keys.FETCHED] == before[keys.FETCHED] == 1
    assert not conn.hexists(state.keys.inflight, C) and C not in waiting(state)


def test_claim_takes_the_lease_and_slot_only_for_the_live_job(conn):
    state = crawl(conn)
    state.seed_step([A])
    entry, job_id = job_of(state, A)
    stale = InFlight(entry.depth, entry.released_at, entry.attempt, entry.turn + 1)
    assert state.claim_step(A, stale.job_id("s", A)).entry is None
    assert conn.zscore(state.keys.leased, A) is None
    claim = state.claim_step(A, job_id)
    assert claim.entry == entry and not claim.paused and not claim.stale
    assert claim.wait_until is None  # its release took a slot of its host for it
    assert conn.zscore(state.keys.leased, A) > time.time()
    assert conn.zscore(state.keys.host_leases("a.test"), A) > time.time()


def test_a_job_that_lost_its_slot_takes_a_free_one_or_waits_for_its_host(conn):
    state = crawl(conn, delay=5.0)
    state.seed_step([A, A + "1"])
    entry, job_id = job_of(state, A)
    conn.delete(state.keys.host_leases("a.test"))  # it waited in RQ past its slot's grace
    assert state.claim_step(A, job_id).wait_until is None  # the host is free: it takes the slot
    end(state, A, depth=1)
    conn.hset(state.keys.inflight, A + "1", InFlight(0, time.time(), 1).encode())
    claim = state.claim_step(A + "1", InFlight(0, 0.0, 1).job_id("s", A + "1"))
    assert claim.wait_until == pytest.approx(time.time() + 5, abs=0.5)  # 5 s after A ended


def test_a_process_notes_its_claims_time_at_most_once_a_second(conn):
    state = crawl(conn)
    state.seed_step([A, B])
    (_, a_job), (_, b_job) = job_of(state, A), job_of(state, B)
    state.claim_step(A, a_job)
    noted = float(conn.hget(state.keys.counters, keys.LAST_CLAIM_AT))
    assert noted == pytest.approx(time.time(), abs=1)
    state.claim_step(B, b_job)  # within the second: not noted again
    assert float(conn.hget(state.keys.counters, keys.LAST_CLAIM_AT)) == noted
    state.claim_noted_at -= CLAIM_NOTE_EVERY  # a second later
    state.claim_step(B, b_job)
    assert float(conn.hget(state.keys.counters, keys.LAST_CLAIM_AT)) > noted


def test_a_parked_url_waits_in_later_then_for_its_host_as_a_new_turn(conn):
    state = crawl(conn)
    state.seed_step([A, B, A + "1"])
    entry, job_id = job_of(state, A)
    state.claim_step(A, job_id)
    soon = InFlight(entry.depth, time.time() + 60, entry.attempt, entry.turn + 1)
    assert state.park(A, entry, soon, Slot("a.test"))
    assert state.park(A, entry, soon, Slot("a.test")) is None  # the old turn is stale now
    assert conn.zscore(state.keys.leased, A) is None  # a waiting URL is nobody's
    assert job_of(state, A + "1")[0]  # its host's slot went to the next URL
    assert state.take_due()[1] == [] and state.next_due() == pytest.approx(soon.released_at)
    due = InFlight(entry.depth, time.time() - 1, entry.attempt, entry.turn + 2)
    assert state.park(A, soon, due, Slot("a.test")).released == []  # a.test busy with A1
    assert waiting(state) == {A: -1}  # first in its host's queue
    released = end(state, A + "1")
    assert urls(released) == [A] and released[0][1].turn == due.turn  # its job's id
    _, b_job = job_of(state, B)
    state.claim_step(B, b_job)
    late = InFlight(0, time.time() - 1, 0, 1)
    state.park(B, job_of(state, B)[0], late, Slot("b.test"))
    assert urls(state.claim_step(A, due.job_id("s", A)).due) == []  # B went back at once
    assert conn.hexists(state.keys.inflight, B)


def test_a_retry_is_the_next_attempt_and_counts(conn):
    state = crawl(conn)
    state.seed_step([A])
    entry, _ = job_of(state, A)
    retry = InFlight(entry.depth, time.time() + 5, entry.attempt + 1)
    assert state.park(A, entry, retry, Slot("a.test"), keys.RETRIES)
    assert state.snapshot().count(keys.RETRIES) == 1
    assert job_of(state, A)[0] == retry


def test_a_paused_crawl_releases_nothing_and_gets_its_urls_back(conn):
    state = crawl(conn)
    state.seed_step([A, B])
    entry, _ = job_of(state, A)
    assert not state.put_back(A, entry)  # not paused: the job goes on
    assert state.pause() and not state.pause()
    assert end(state, B, [B + "1"]) == []  # paused: nothing is released
    assert state.put_back(A, entry) and not state.put_back(A, entry)  # once
    assert conn.hlen(state.keys.inflight) == 0 and waiting(state) == {A: 0, B + "1": 1}
    assert state.snapshot().count(keys.PUT_BACK) == 1
    assert sorted(urls(state.resume_step())) == [A, B + "1"]


def test_a_put_back_url_keeps_its_priority(conn):
    state = crawl(conn)
    state.seed_step([A], priority=3)
    entry, _ = job_of(state, A)
    state.pause()
    assert state.put_back(A, entry)
    assert urls(state.resume_step()) == [A] and job_of(state, A)[0].priority == 3


def test_cancel_drops_waiting_in_flight_and_parked_urls_and_emits_held_back_records(conn):
    state = crawl(conn)
    state.seed_step([A, B, C, A + "1"])
    entry, _ = job_of(state, B)
    state.park(B, entry, InFlight(0, time.time() + 60, 0, 1), Slot("b.test"))
    end(state, C, [C + "1"])
    end(state, C + "1", depth=2, links=[])  # held back: A (depth 0) still in flight
    held, dropped = state.cancel()
    assert held == 1 and sorted(urls(dropped)) == [A, B]
    assert state.cancel() is None
    assert depths(conn)[C + "1"] == 1
    assert not conn.exists(state.keys.inflight, state.keys.later, state.keys.qkeys)
    snap = state.snapshot()
    assert snap.count(keys.DROPPED) == 3 and keys.CANCELLED_AT in snap.counters
    assert state.unfinished() == 0
    a_entry = InFlight(0, 0.0, 0)
    assert not state.put_back(A, a_entry) and end(state, A) == []  # running jobs end quietly


def test_a_job_running_during_a_cancel_drops_its_url(conn):
    state = crawl(conn)
    state.seed_step([A])
    entry, _ = job_of(state, A)
    conn.hset(state.keys.counters, mapping={keys.PAUSED_AT: 1, keys.CANCELLED_AT: 1})
    assert state.put_back(A, entry)
    assert state.snapshot().count(keys.DROPPED) == 1 and waiting(state) == {}


def test_recovery_finds_expired_leases_and_old_unleased_urls_but_not_waiting_ones(conn):
    state = crawl(conn)
    state.seed_step([A, B, C])
    a, a_job = job_of(state, A)
    state.claim_step(A, a_job)
    conn.zadd(state.keys.leased, {A: time.time() - 1, "http://ended.test/": time.time() - 1})
    c, _ = job_of(state, C)
    state.park(C, c, InFlight(0, time.time() + 100, 0, 1), Slot("c.test"))  # never lost
    orphans, lost, unleased = state.recovery_candidates(lost_after=-1)
    assert orphans == ["http://ended.test/"]
    assert lost == [(A, a)]
    assert urls(unleased) == [B]
    assert state.recovery_candidates(lost_after=60)[2] == []  # B was released just now


def test_requeue_replaces_only_the_expected_entry_and_never_a_renewed_one(conn):
    state = crawl(conn)
    state.seed_step([A])
    a, job_id = job_of(state, A)
    state.claim_step(A, job_id)  # a live lease
    nxt = InFlight(0, time.time(), a.attempt + 1)
    assert state.requeue(A, a, nxt) is None  # its worker is alive
    conn.zadd(state.keys.leased, {A: time.time() - 1})
    assert state.requeue(A, nxt, nxt) is None  # not the entry it has
    conn.zadd(state.keys.host_leases("a.test"), {A: time.time() - 1})  # the dead job's slot
    released = state.requeue(A, a, nxt)
    assert urls(released) == [A] and released[0][1].attempt == nxt.attempt
    assert state.snapshot().count(keys.RECOVERED) == 1
    assert conn.zscore(state.keys.leased, A) is None
    assert state.still_lost(A, released[0][1]) and not state.still_lost(A, a)


def test_a_request_refused_by_robots_txt_costs_its_host_no_turn(conn):
    state = crawl(conn, delay=5.0)
    state.seed_step([A, A + "1"])
    ending = Ending({}, record(A, "robots_disallowed", 0), slot=Slot("a.test"))
    assert urls(state.finish_step(A, ending).released) == [A + "1"]


def test_pushback_doubles_the_hosts_delay_and_each_success_halves_it(conn):
    """After 429s the gap shrinks back with the successes, down to the base delay."""
    state = crawl(conn, delay=0.1)
    state.seed_step([A])
    gaps = []
    for n, answer in enumerate(["push", "push", "ok", "ok", "ok"]):
        url = A if n == 0 else f"{A}{n}"
        ending = Ending({}, record(url, "fetched", 1), [(None, f"{A}{n + 1}")], 2,
                        slot=Slot("a.test", 0.01, answer))  # fmt: skip
        before = time.time()
        state.finish_step(url, ending)
        after = time.time()
        due = state.next_due()
        gaps.append((due - after, due - before))  # (the script read the clock in between)
        time.sleep(max(0.0, due - time.time()))
        assert urls(state.take_due()[1]) == [f"{A}{n + 1}"]
    wanted = [0.5, 1.0, 0.5, 0.25, 0.1]  # (at least 0.25 s: BACKOFF_MIN)
    within = [lo - 0.005 <= w <= hi + 0.005 for (lo, hi), w in zip(gaps, wanted, strict=True)]
    assert all(within), gaps


@pytest.mark.parametrize(
    ("fetch", "backoff", "base", "delay", "why"),
    [
        (0.0, 0.0, -1.0, 0.5, "setting"),
        (0.1, 0.0, 0.8, 0.8, "crawl-delay"),
        (0.1, 1.5, -1.0, 1.5, "back-off"),
        (0.6, 0.0, -1.0, 1.2, "delay_factor"),
        (0.1, 9.0, -1.0, 3.0, "back-off"),  # capped at max_backoff_delay
    ],
)
def test_status_shows_the_delay_the_script_applies(conn, fetch, backoff, base, delay, why):
    """The delay in force is computed once, by the Lua that applies it (lua/pacing.lua's
    in_force), and stored with its reason: the pace a snapshot (status, `rqcrawl hosts`)
    shows is the one the key's next request waits."""
    state = crawl(conn, delay=0.5, delay_factor=2.0, max_backoff_delay=3.0)
    conn.hset(state.keys.hosts, "a.test", f"0 {fetch} {backoff} {base}")  # (an older save)
    before = time.time()
    state.hop_ended("a.test")  # a request ended: the key waits the delay in force from now
    after = time.time()
    pace = state.snapshot().pace["a.test"]
    assert (pace.delay, pace.why) == (pytest.approx(delay), why)
    assert before + delay - 1e-6 <= pace.ready <= after + delay


def test_snapshot_groups_counters_by_family_and_host(conn):
    state = crawl(conn)
    state.seed_step([A, B])
    counts = {
        keys.FETCHED: 1,
        keys.per_host(keys.FETCHED, "a.test"): 1,
        keys.links_dropped("bad"): 2,
    }
    state.finish_step(A, Ending(counts, record(A, "fetched", 0)))
    snap = state.snapshot()
    assert snap.hosts["a.test"] == {keys.ADMITTED: 1, keys.FETCHED: 1}
    assert snap.hosts["b.test"] == {keys.ADMITTED: 1}
    assert snap.family(keys.LINKS) == {"bad": 2}
    assert snap.in_flight == [B] and snap.held == 0 and snap.deferred == 0


def test_scripts_take_named_arguments_and_survive_a_script_flush(conn):
    state = crawl(conn)
    with pytest.raises(TypeError, match="unknown script parameters"):
        scripts.DUE(conn, limit=1, x=1, **state.frontier_names())
    conn.script_flush()
    assert scripts.DUE(conn, limit=1, **state.frontier_names()) == [0]
    conn.script_flush()
    state.seed_step([A])
    _, job_id = job_of(state, A)
    conn.script_flush()  # the claim loads what a restarted Redis forgot
    assert state.claim_step(A, job_id).entry is not None
    with pytest.raises(NoScriptError):
        conn.script_flush()
        conn.evalsha(scripts.DUE.sha, 0)


def test_a_script_keeps_only_the_shared_functions_it_reaches():
    source = (
        "local function a()\n  return 1\nend\n"  # kept: b names it
        "local function b(x)\n  return a() + x\nend\n"
        "local function c()\n  return 3\nend\n"  # only d names it: both go
        "local function d()\n  return c()\nend\n"
        "local function e()\n  return 5\nend\n"  # named in a comment only
        "-- e() is not called\n"
        "return b(2)\n"
    )
    kept = scripts.reached(source)
    assert scripts.FUNCTION.findall(kept) == ["a", "b"] and kept.endswith("return b(2)\n")
    assert "c()" not in kept and "local function e" not in kept


def test_every_shared_function_is_a_block_the_composer_can_cut():
    """`reached` cuts a function at the first line that is `end` alone: every `local function`
    at a line's start must be such a block, its body indented (so no inner `end` ends it),
    and its name the only one of its kind (a script keeps a function by its name)."""
    names = []
    for path in scripts.LUA_DIR.glob("*.lua"):
        text = path.read_text(encoding="utf-8") + "\n"
        blocks = scripts.FUNCTION.findall(text)
        names += blocks
        starts = [line for line in text.splitlines() if line.startswith("local function ")]
        assert len(blocks) == len(starts), path.name
        for match in scripts.FUNCTION.finditer(text):
            body = match.group(0).splitlines()[1:-1]
            assert all(not line or line[0] in " \t" for line in body), (path.name, match[1])
    assert len(names) == len(set(names)) > 50


LUA_TOKEN = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"|--")


def strings_holding_a_comment_mark(line: str) -> list[str]:
    """The string literals of a Lua line, before its comment, that hold `--`."""
    found = []
    for token in LUA_TOKEN.findall(line):
        if token == "--":
            break
        if "--" in token:
            found.append(token)
    return found


def test_no_lua_string_holds_what_the_composer_would_read_as_a_comment():
    """`reached` reads from `--` to the line's end as a comment: a function named after
    `--` inside a string would be left out of a script that calls it."""
    assert strings_holding_a_comment_mark("x = '--' .. f() -- a 'note'") == ["'--'"]
    assert strings_holding_a_comment_mark("x = 'a' -- f('--')") == []
    for path in scripts.LUA_DIR.glob("*.lua"):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not strings_holding_a_comment_mark(line), (path.name, n, line)


def test_every_script_loads_with_what_it_reaches(conn):
    for name, script in vars(scripts).items():
        if isinstance(script, scripts.Script):
            assert conn.script_load(script.source) == script.sha, name


def test_the_skip_template_is_a_record_without_its_url_and_outcome():
    template = json.loads(skip_template(3))
    assert template["depth"] == 3 and template["attempts"] == 0 and "url" not in template


def test_readmit_brings_ended_urls_back_past_the_bloom_filter_once_until_they_end(conn):
    state = crawl(conn)
    state.seed_step([A])
    end(state, A, [A + "b"])
    end(state, A + "b", [], depth=2)
    assert state.unfinished() == 0
    added, released = state.readmit([(A, 0, 0), (A + "b", 1, 0), (A, 0, 0)])  # seen, not done
    assert added == 2 and urls(released) == [A]  # one request at a time to a.test
    assert waiting(state) == {A + "b": 1}
    assert state.readmit([(A, 0, 0), (A + "b", 1, 0)]) == (0, [])  # waiting: not twice
    end(state, A, [A + "b"])  # a revisit's links go through the filter: not admitted again
    assert state.snapshot().count(keys.ADMITTED) == 2
    end(state, A + "b", depth=2)
    assert state.readmit([(A, 0, 0)])[0] == 1  # ended: due again
    assert state.snapshot().count(keys.REVISITS) == 3


def test_a_cancelled_crawl_readmits_nothing_and_forgets_its_pending_revisits(conn):
    state = crawl(conn, window=1)
    state.seed_step([A, B])
    end(state, A)
    state.readmit([(A, 0, 0)])
    state.cancel()
    assert not conn.exists(state.keys.revisiting)
    assert state.readmit([(A, 0, 0)]) == (0, [])


def test_the_pump_takes_its_turn_once_per_period_whoever_asks(conn):
    state = crawl(conn)
    assert state.pump_due(5) and not state.pump_due(5)
    assert not crawl(conn).pump_due(5)  # another process


def test_a_time_stored_to_the_microsecond_is_never_past_the_time_it_stores(conn):
    """A key made ready `now` must be due at `now`: at(x) <= x for times like today's (x * 1e6
    rounds up to the next microsecond for about one time in 180)."""
    times = [repr(time.time() + i * 0.0000137) for i in range(20_000)]
    check = "local n = 0 for _, x in ipairs(ARGV) do if tonumber(at(tonumber(x))) > tonumber(x) then n = n + 1 end end return n"  # noqa: E501
    assert conn.eval(scripts.lua_source("time") + check, 0, *times) == 0


@pytest.mark.parametrize("links", [3, 100])  # in one finish call, and in two (64 links a call)
def test_a_page_with_the_body_of_an_earlier_one_is_its_duplicate_and_admits_its_links(conn, links):
    """A copy under another path links URLs found nowhere else (relative links): they are
    admitted, the copy recorded `duplicate_of` the first."""
    state = crawl(conn)
    state.seed_step([A, B, C])
    digest = hashlib.sha1(b"<html>the same page</html>").digest()

    def fetched(url: str, children: list[str]) -> Ending:
        return Ending(
            {keys.FETCHED: 1}, record(url, "fetched", 0), [(None, c) for c in children],
            digest=digest,
        )  # fmt: skip

    assert state.finish_step(A, fetched(A, [f"{A}{i}" for i in range(links)])).duplicate_of == ""
    ended = state.finish_step(B, fetched(B, [f"{B}{i}" for i in range(links)]))
    assert (ended.duplicate_of, ended.admitted) == (A, links)
    rows = {r["url"]: r for r in iter_records(conn, "s")}
    assert rows[B]["duplicate_of"] == A and rows[A]["duplicate_of"] is None
    assert state.snapshot().count(keys.ADMITTED) == 3 + 2 * links
    assert conn.hgetall(state.keys.digests) == {digest: A.encode()}

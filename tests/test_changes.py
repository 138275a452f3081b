"""Change detection (rqcrawl.parse.changes): the simhash of a page's visible text, its distance,
the change rule; what the task table keeps of a visit for the next one (validators, content
dedup); the change feed's time and kinds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from parsel import Selector

from rqcrawl import api
from rqcrawl.config import CrawlConfig
from rqcrawl.frontier.tasks import Known, TaskTable, schedule
from rqcrawl.parse.changes import (
    NEAR_BITS,
    Content,
    Prior,
    VisitEnd,
    change,
    distance,
    near,
    simhash,
    similarity,
    valid_etag,
    valid_last_modified,
    visible_text,
)

CFG = CrawlConfig.from_dict({"revisit": 100, "revisit_min": 20, "revisit_max": 400})

ARTICLE = """
<html><head><title>Harbour news</title><style>body {{ color: black }}</style>
<script>var views = {views};</script></head><body>
<p>Last updated {stamp}. {views} readers.</p>
<p>The harbour authority met on Tuesday to discuss the new breakwater. Engineers presented
three designs, each balancing the cost of concrete against the height of the winter waves
that reach the inner basin when the wind turns to the north west.</p>
<p>{edit}</p>
<p>Fishermen asked for a wider entrance so that the larger boats can come in at low tide, and
the council promised a public consultation before any contract is signed next spring.</p>
</body></html>
"""
FIRST = "A second paragraph tells of the ferry timetable, which stays as it was all summer."
REWRITTEN = (
    "The mayor resigned after the vote and a new election will be held in May; the budget of "
    "the breakwater is frozen until then and the engineers were sent home without a decision."
)


def page(stamp: str = "2026-11-23 17:39:33", views: int = 1041, edit: str = FIRST) -> int:
    html = ARTICLE.format(stamp=stamp, views=views, edit=edit)
    return simhash(visible_text(Selector(text=html)))


def test_visible_text_leaves_out_scripts_and_styles():
    text = visible_text(Selector(text=ARTICLE.format(stamp="now", views=3, edit="x")))
    assert "harbour authority" in text and "var views" not in text and "color" not in text


def test_a_timestamp_or_a_counter_is_near_the_page_and_an_edit_is_far():
    assert page() == page()
    assert distance(page(), page(stamp="2026-11-24 08:02:51", views=1099)) <= NEAR_BITS
    assert distance(page(), page(edit=REWRITTEN)) > NEAR_BITS
    assert -(2**63) <= page() < 2**63  # fits a signed BIGINT


def test_distance_counts_the_bits_that_differ():
    assert distance(0, 0) == 0 and distance(0, -1) == 64 and distance(0b1011, 0b0001) == 2


def test_the_change_rule_is_the_digest_and_the_simhash_gives_the_similarity():
    near_page, far = page(stamp="2026-11-24 09:00:00"), page(edit=REWRITTEN)
    assert change(None, "d1") == "new"
    assert change("d1", "d1") == "unchanged"
    assert change("d1", "d2") == "changed"  # however small the edit
    assert near(page(), near_page) and not near(page(), far) and not near(None, near_page)
    assert similarity(page(), page()) == 1.0 and similarity(None, far) is None
    assert similarity(page(), near_page) >= 1 - NEAR_BITS / 64 > similarity(page(), far)


def test_a_304_is_unchanged_a_timestamp_only_visit_changed_at_the_same_interval():
    known = Known(visits=1, interval=100, digest="d1", simhash=page())
    not_modified = schedule(known, "fetched", 304, Content("d1", not_modified=True), CFG, 0)
    later = page(stamp="2026-11-30 00:00:01")
    stamped = schedule(known, "fetched", 200, Content("d2", later), CFG, 0)
    edited = schedule(known, "fetched", 200, Content("d3", page(edit=REWRITTEN)), CFG, 0)
    assert (not_modified.change, not_modified.interval) == ("unchanged", 150)
    assert (stamped.change, stamped.interval) == ("changed", 100)  # a near duplicate
    assert (edited.change, edited.interval) == ("changed", 50)


def test_a_three_word_edit_is_changed_and_a_304_after_a_404_too():
    words = " ".join(f"word{i}" for i in range(400))
    edited = words.replace("word100", "alpha").replace("word200", "beta")
    edited = edited.replace("word300", "gamma")
    assert near(simhash(words), simhash(edited))  # what the old rule called unchanged
    known = Known(visits=1, interval=100, digest="d1", simhash=simhash(words))
    three = schedule(known, "fetched", 200, Content("d2", simhash(edited)), CFG, 0)
    assert three.change == "changed"
    after_404 = Known(visits=2, interval=100, failures=1, missing=1, digest="d1")
    back = schedule(after_404, "fetched", 304, Content("d1", not_modified=True), CFG, 0)
    assert back.change == "changed"


def test_only_rfc_9110_validators_are_kept():
    assert valid_etag('"v1"') == '"v1"' and valid_etag('W/"a-b"') == 'W/"a-b"'
    for bad in ('"a\x00b"', "unquoted", '"' + "a" * 60_000 + '"', '"caf\u00e9"', "", None):
        assert valid_etag(bad) is None, bad
    assert valid_last_modified("Sun, 06 Nov 1994 08:49:37 GMT") is not None
    for bad in ("yesterday", "Sun, 06 Nov 1994 08:49:37 GMT\x00", "x" * 100, None):
        assert valid_last_modified(bad) is None, bad


def test_conditional_headers_are_those_of_the_validators_the_server_sent():
    assert Prior('"v1"', None, "d").conditional_headers() == {"If-None-Match": '"v1"'}
    both = Prior('"v1"', "Mon, 23 Nov 2026 17:00:00 GMT", "d").conditional_headers()
    assert both["If-Modified-Since"] == "Mon, 23 Nov 2026 17:00:00 GMT" and len(both) == 2
    assert Prior(None, None, "d").conditional_headers() == {}


def test_the_table_keeps_validators_and_finds_an_earlier_url_with_the_same_body(db_url):
    table = TaskTable(db_url)
    table.delete("dup")
    first = table.visited(
        "dup", "http://a/1", 0, VisitEnd("fetched", 200, Content("d1", 5, '"e"')), CFG
    )
    copy = table.visited("dup", "http://a/2", 0, VisitEnd("fetched", 200, Content("d1", 5)), CFG)
    assert (first.duplicate_of, copy.duplicate_of) == (None, "http://a/1")
    again = table.visited(
        "dup", "http://a/1", 0, VisitEnd("fetched", 200, Content("d1", 5, '"e"')), CFG
    )
    assert again.duplicate_of is None  # the first is not a duplicate of its copy
    assert table.prior("dup", "http://a/1") == Prior('"e"', None, "d1")
    assert table.prior("dup", "http://a/none") is None
    lm = "Mon, 23 Nov 2026 17:00:00 GMT"
    kept = Content("d1", None, '"e"', lm, not_modified=True)  # a 304: the page as it was
    assert (
        table.visited("dup", "http://a/1", 0, VisitEnd("fetched", 304, kept), CFG).change
        == "unchanged"
    )
    assert table.prior("dup", "http://a/1") == Prior('"e"', lm, "d1")
    failed = table.visited("dup", "http://a/1", 0, VisitEnd("failed", 500, None), CFG)
    assert failed.change is None and table.prior("dup", "http://a/1") == Prior('"e"', lm, "d1")


def test_the_feed_takes_iso_times_and_durations_and_known_changes_only():
    now = datetime(2026, 11, 23, 18, 0, tzinfo=UTC).timestamp()
    assert api.since_time("1h", now) == now - 3600 and api.since_time("2d", now) == now - 172800
    assert api.since_time("2026-11-23T17:00:00Z") == now - 3600
    assert api.since_time("2026-11-23T17:00:00") == now - 3600  # UTC unless it says
    assert api.since_time("2026-11-23T18:00:00+01:00") == now - 3600
    assert api.since_time(None) is None
    with pytest.raises(api.InvalidInput, match="invalid time 'yesterday'"):
        api.since_time("yesterday")
    assert api.change_kinds("changed,new, gone") == {"changed", "new", "gone"}
    assert api.change_kinds(()) == set()
    with pytest.raises(api.InvalidInput, match="unknown change 'moved'"):
        api.change_kinds("new,moved")

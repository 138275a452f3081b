"""Change detection (rqcrawl.changes): the simhash of a page's visible text, its distance,
the change rule; what the task table keeps of a visit for the next one (validators, content
dedup); the change feed's time and kinds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from parsel import Selector

from rqcrawl import api
from rqcrawl.changes import NEAR_BITS, Content, Prior, change, distance, simhash, visible_text
from rqcrawl.config import CrawlConfig
from rqcrawl.tasks import Known, TaskTable, schedule

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


def test_the_change_rule_needs_a_new_digest_and_a_far_simhash():
    near, far = page(stamp="2026-11-24 09:00:00"), page(edit=REWRITTEN)
    assert change(None, None, "d1", page()) == "new"
    assert change("d1", page(), "d1", page()) == "unchanged"
    assert change("d1", page(), "d2", near) == "unchanged"
    assert change("d1", page(), "d2", far) == "changed"
    assert change("d1", None, "d2", near) == "changed"  # nothing to compare with: the digest


def test_a_304_and_a_timestamp_only_visit_are_unchanged_and_grow_the_interval():
    known = Known(visits=1, interval=100, digest="d1", simhash=page())
    not_modified = schedule(known, "fetched", 304, Content("d1", not_modified=True), CFG, 0)
    later = page(stamp="2026-11-30 00:00:01")
    stamped = schedule(known, "fetched", 200, Content("d2", later), CFG, 0)
    edited = schedule(known, "fetched", 200, Content("d3", page(edit=REWRITTEN)), CFG, 0)
    assert (not_modified.change, not_modified.interval) == ("unchanged", 150)
    assert (stamped.change, stamped.interval) == ("unchanged", 150)
    assert (edited.change, edited.interval) == ("changed", 50)


def test_conditional_headers_are_those_of_the_validators_the_server_sent():
    assert Prior('"v1"', None, "d").conditional_headers() == {"If-None-Match": '"v1"'}
    both = Prior('"v1"', "Mon, 23 Nov 2026 17:00:00 GMT", "d").conditional_headers()
    assert both["If-Modified-Since"] == "Mon, 23 Nov 2026 17:00:00 GMT" and len(both) == 2
    assert Prior(None, None, "d").conditional_headers() == {}


def test_the_table_keeps_validators_and_finds_an_earlier_url_with_the_same_body(db_url):
    table = TaskTable(db_url)
    table.delete("dup")
    first = table.visited("dup", "http://a/1", 0, "fetched", 200, Content("d1", 5, '"e"'), CFG)
    copy = table.visited("dup", "http://a/2", 0, "fetched", 200, Content("d1", 5), CFG)
    assert (first.duplicate_of, copy.duplicate_of) == (None, "http://a/1")
    again = table.visited("dup", "http://a/1", 0, "fetched", 200, Content("d1", 5, '"e"'), CFG)
    assert again.duplicate_of is None  # the first is not a duplicate of its copy
    assert table.prior("dup", "http://a/1") == Prior('"e"', None, "d1")
    assert table.prior("dup", "http://a/none") is None
    lm = "Mon, 23 Nov 2026 17:00:00 GMT"
    kept = Content("d1", None, '"e"', lm, not_modified=True)  # a 304: the page as it was
    assert table.visited("dup", "http://a/1", 0, "fetched", 304, kept, CFG).change == "unchanged"
    assert table.prior("dup", "http://a/1") == Prior('"e"', lm, "d1")
    failed = table.visited("dup", "http://a/1", 0, "failed", 500, None, CFG)
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

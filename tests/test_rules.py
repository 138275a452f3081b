"""Link rules: scope, length, and the user's allow/deny rules, as one verdict per link."""

from __future__ import annotations

import pytest

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier.rules import link_rules, link_verdict

HOST = "example.com"


def cfg(**settings) -> CrawlConfig:
    return CrawlConfig.from_dict(
        {"scope_hosts": [HOST, "sub.example.com", "example.org", "badexample.com"], **settings}
    )


def test_defaults_admit_pages_in_scope_and_drop_others():
    c = cfg()
    assert link_verdict("http://example.com/a/b.html", c) is None
    assert link_verdict("http://example.com/search?q=x", c) is None
    assert link_verdict("http://elsewhere.com/a", c) == "drop:out_of_scope"
    assert link_verdict("http://example.com/" + "a" * 3000, c) == "too_long"  # a trap rule


@pytest.mark.parametrize(
    "path",
    ["/f.pdf", "/F.PDF", "/img/photo.jpeg", "/a.tar.gz", "/style.css", "/app.js", "/x.docx"],
)
def test_default_denied_extensions(path):
    assert link_verdict("http://example.com" + path, cfg()) == "drop:denied_extension"


@pytest.mark.parametrize(
    "path", ["/pdf", "/a.html", "/a.pdf/", "/page?file=a.pdf", "/x.gzip", "/report.pdfx"]
)
def test_extension_is_the_end_of_the_path_only(path):
    assert link_verdict("http://example.com" + path, cfg()) is None


def test_extension_rule_ignores_the_query():
    assert link_verdict("http://example.com/a.pdf?download=1", cfg()) == "drop:denied_extension"


def test_extension_list_can_be_replaced_or_emptied():
    assert link_verdict("http://example.com/a.pdf", cfg(link_deny_extensions=[])) is None
    only = cfg(link_deny_extensions=[".HTML"])
    assert link_verdict("http://example.com/a.html", only) == "drop:denied_extension"
    assert link_verdict("http://example.com/a.pdf", only) is None


def test_deny_regex_is_searched_anywhere_in_the_url():
    c = cfg(link_deny=[r"/private/", r"[?&]sort="])
    assert link_verdict("http://example.com/private/x", c) == "drop:denied_url"
    assert link_verdict("http://example.com/list?page=2&sort=asc", c) == "drop:denied_url"
    assert link_verdict("http://example.com/public/x", c) is None


def test_allow_regex_admits_only_matching_links():
    c = cfg(link_allow=[r"/docs/", r"\.html$"])
    assert link_verdict("http://example.com/docs/intro", c) is None
    assert link_verdict("http://example.com/about.html", c) is None
    assert link_verdict("http://example.com/blog/post", c) == "drop:url_not_allowed"


def test_deny_wins_over_allow():
    c = cfg(link_allow=[r"/docs/"], link_deny=[r"/docs/old/"])
    assert link_verdict("http://example.com/docs/new", c) is None
    assert link_verdict("http://example.com/docs/old/a", c) == "drop:denied_url"


def test_allowed_domains_cover_subdomains_but_not_lookalikes():
    c = cfg(link_allow_domains=["Example.com"])
    assert link_verdict("http://example.com/", c) is None
    assert link_verdict("http://sub.example.com/", c) is None
    assert link_verdict("http://badexample.com/", c) == "drop:domain_not_allowed"
    assert link_verdict("http://example.org/", c) == "drop:domain_not_allowed"


def test_denied_domains_cover_subdomains():
    c = cfg(link_deny_domains=["sub.example.com"])
    assert link_verdict("http://sub.example.com/a", c) == "drop:denied_domain"
    assert link_verdict("http://example.com/a", c) is None


def test_domain_rules_ignore_the_port():
    c = CrawlConfig.from_dict(
        {"scope_hosts": ["example.com:8080"], "link_deny_domains": ["example.com"]}
    )
    assert link_verdict("http://example.com:8080/a", c) == "drop:denied_domain"


def test_scope_comes_before_the_user_rules():
    c = cfg(link_allow_domains=["elsewhere.com"])
    assert link_verdict("http://elsewhere.com/a", c) == "drop:out_of_scope"


def test_rules_are_compiled_once_per_config():
    c = cfg(link_deny=["/x"])
    assert link_rules(c) is link_rules(c)
    assert link_rules(c) is link_rules(CrawlConfig.from_dict({}, c))
    assert link_rules(c) is not link_rules(cfg(link_deny=["/y"]))

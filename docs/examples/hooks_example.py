"""A page hook: called by the workers on every fetched HTML page (setting `hook`)."""

from rqcrawl.parse.hooks import HookPage


def on_page(page: HookPage) -> dict:
    """Add the number of list items as a field, and crawl the page's <link rel=next>."""
    items = len(page.selector.css("li"))
    return {
        "fields": {"list_items": items},
        "links": page.selector.css('link[rel="next"]::attr(href)').getall(),
    }

"""Pages that only JavaScript builds: the render worker that loads them in the system's
Chromium with every request through the address guard (`browser`, which imports Playwright).
Which pages go to a browser is rqcrawl.parse.rendering's to say, light enough for every worker.

`rqcrawl.render.RenderWorker` (the render queue's worker class) and `rqcrawl.render.render_url`
(its job function) are imported on first use, so that plain workers never load Playwright.
"""

from __future__ import annotations

from typing import Any

from rqcrawl.extras import extra_for


def __getattr__(name: str) -> Any:
    if name in ("RenderWorker", "render_url"):
        with extra_for("rendering pages in a browser"):
            from rqcrawl.render import browser

        return getattr(browser, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

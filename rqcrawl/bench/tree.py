"""`rqcrawl bench --tree DIR`: the benchmark on a real static HTML tree (a documentation tree)
instead of the generated site. The tree is read into memory once and served by the bench
site's server (site.SiteServer: forked processes on one loopback socket, a Content-Type from
each file's extension), so both crawlers meet the same fast server; the crawls, the table and
the page-set check are the bench's own (command.py, runs.py, report.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from rqcrawl.parse.urls import canonicalize

INDEX = "index.html"


@dataclass(frozen=True)
class TreeSpec:
    """A directory's files by URL path (`/a/b.html`; a directory with an index.html also as
    `/a/`), and the seed: `/index.html` when there is one, else the first HTML file."""

    root: Path
    files: dict[str, bytes] = field(repr=False, compare=False)
    start: str = "/" + INDEX

    @classmethod
    def load(cls, root: str | Path) -> TreeSpec:
        root = Path(root)
        files: dict[str, bytes] = {}
        for folder, _, names in os.walk(root, followlinks=True):  # Debian links its trees
            for name in names:
                path = Path(folder, name)
                if path.is_file():  # not a dangling link
                    files["/" + quote(path.relative_to(root).as_posix())] = path.read_bytes()
        for path, body in list(files.items()):
            if path.endswith("/" + INDEX):
                files[path.removesuffix(INDEX)] = body
        html = sorted(p for p in files if p.endswith(".html"))
        if not html:
            raise ValueError(f"no .html file under {root}")
        return cls(root, files, "/" + INDEX if "/" + INDEX in files else html[0])

    def pages_at(self, origin: str) -> dict[str, bytes]:
        return self.files

    def urls_at(self, origin: str) -> list[str]:
        """Every HTML file's URL, as the memory measures seed them."""
        return [canonicalize(origin + p) for p in sorted(self.files) if p.endswith(".html")]

    def describe(self) -> str:
        files = {p: b for p, b in self.files.items() if not p.endswith("/")}  # no aliases
        html = sum(p.endswith(".html") for p in files)
        size = sum(len(b) for b in files.values())
        return f"tree {self.root}: {len(files)} files ({html} HTML), {size / 1e6:.0f} MB"

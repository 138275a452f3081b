"""Names in prose point at code that exists: every dotted name (`stats.host_pace`,
`CrawlState.finish_step`, `rqcrawl.frontier.keys.CRAWLS`) and file name (`render/browser.py`,
`docs/howto/shards.md`) in the package's comments and docstrings, the tests', and the docs.

A name counts when it starts with `rqcrawl`, a module's or package's own name (`state`,
`frontier`) or a class of the package (`Frontier`); anything else (`http.client`,
`example.com`, `robots.txt`) is not ours to check. The changelogs are history: they name
what was, and are left out.
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from helpers import ROOT
from test_layout import MODULES

# The last part of a dotted word that makes it a file or an address, not a name.
NOT_NAMES = {
    "txt", "xml", "json", "jsonl", "csv", "db", "gz", "html", "htm", "js", "yml", "yaml", "warc",
    "lua", "sh", "log", "parquet", "wacz", "cfg", "ini", "org", "com", "net", "io", "dev",
    "example", "test", "invalid", "local",
}  # fmt: skip
FILE_TYPES = ("py", "md", "toml")  # the files of the repository a name can point at
# A dotted word, maybe after a path (`docs/howto/shards.md`), not inside an address or a longer one.
WORD = re.compile(
    r"(?<![\w/@:.-])((?:[A-Za-z_][\w.-]*/)*[A-Za-z_][\w-]*(?:\.[A-Za-z_]\w*)+)(?![\w/-]|\.\w)"
)
SHORT: dict[str, list[str]] = {}
for _name in MODULES:
    SHORT.setdefault(_name.rpartition(".")[2], []).append(_name)


@cache
def tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"))


def _bound(nodes: list[ast.stmt]) -> set[str]:
    """Names a block of statements binds at its own level (imports under `if` included)."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).partition(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):
            names |= _bound(node.body)
    return names


def classes() -> dict[str, list[tuple[str, ast.ClassDef]]]:
    found: dict[str, list[tuple[str, ast.ClassDef]]] = {}
    for module in MODULES:
        for node in tree(module).body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append((module, node))
    return found


CLASSES = classes()


def class_has(module: str, node: ast.ClassDef, attr: str) -> bool:
    """`attr` is defined in the class body, set on `self` or `cls` in a method, or inherited
    (from a base outside the package: asked of the class itself)."""
    if attr in _bound(node.body):
        return True
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store):
            if isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"):
                if sub.attr == attr:
                    return True
    try:
        return hasattr(getattr(importlib.import_module(module), node.name), attr)
    except Exception:  # a module with an optional dependency that is not installed
        return False


def module_has(module: str, parts: list[str]) -> bool:
    if not parts:
        return True
    name, rest = parts[0], parts[1:]
    if f"{module}.{name}" in MODULES:
        return module_has(f"{module}.{name}", rest)
    if name not in _bound(tree(module).body):
        try:  # a package face's __getattr__ (rqcrawl.workers.CrawlWorker)
            return hasattr(importlib.import_module(module), name)
        except Exception:
            return False
    node = next((n for m, n in CLASSES.get(name, []) if m == module), None)
    return node is None or not rest or class_has(module, node, rest[0])


def external(parts: list[str]) -> bool:
    """A name of another package that happens to share a first part with ours
    (`http.client`, `json.dumps`)."""
    try:
        obj = importlib.import_module(parts[0])
    except ImportError:
        return False
    for part in parts[1:]:
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def name_exists(word: str) -> bool | None:
    """True or False for a name of ours, None for one that is not."""
    parts = word.split(".")
    if parts[0] == "rqcrawl":
        return module_has("rqcrawl", parts[1:])
    found = [module_has(m, parts[1:]) for m in SHORT.get(parts[0], [])]
    found += [not parts[1:] or class_has(m, n, parts[1]) for m, n in CLASSES.get(parts[0], [])]
    if not found:
        return None
    return any(found) or external(parts)


FILES = {p.name for p in ROOT.rglob("*") if not {".venv", ".git"} & set(p.parts)}


def file_exists(word: str) -> bool | None:
    """A path must exist (under the repository, from its root or any folder); a bare file
    name is ours when it is a page of the docs or names one of our modules."""
    if "/" in word:
        return (ROOT / word).exists() or any(ROOT.glob(f"**/{word}"))
    stem, _, suffix = word.rpartition(".")
    if suffix == "md" or stem in SHORT:
        return word in FILES
    return None


def stale(text: str) -> list[str]:
    """The names and file names in `text` that point at nothing."""
    bad = []
    for match in WORD.finditer(text):
        word = match[1]
        suffix = word.rpartition(".")[2]
        if suffix in NOT_NAMES:
            continue
        if "/" in word or (suffix in FILE_TYPES and word.count(".") == 1):
            exists = file_exists(word) if suffix in FILE_TYPES else None
        else:
            exists = name_exists(word)
        if exists is False:
            bad.append(word)
    return bad


def prose_of_python(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring."""
    source = path.read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield node.body[0].lineno, doc


def prose() -> Iterator[tuple[str, int, str]]:
    python = [*(ROOT / "rqcrawl").rglob("*.py"), *(ROOT / "tests").glob("*.py")]
    python += [ROOT / "setup.py", *(ROOT / "docs").rglob("*.py")]
    for path in sorted(python):
        for line, text in prose_of_python(path):
            yield str(path.relative_to(ROOT)), line, text
    docs = [*(ROOT / "docs").rglob("*.md"), ROOT / "README.md", ROOT / "conf" / "default.toml"]
    for path in sorted(p for p in docs if p.name != "changelog.md"):
        for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield str(path.relative_to(ROOT)), line, text


def test_every_name_in_comments_docstrings_and_docs_exists():
    found = [f"{where}:{line}: {word}" for where, line, text in prose() for word in stale(text)]
    assert not found, "names that point at nothing:\n" + "\n".join(found)


def test_the_check_tells_stale_names_from_live_ones():
    text = (
        "frontier.pump, Frontier.pump, stats.thin_crawl_warnings, stats.thin_crawl, render.py,"
        " render/browser.py, tests/rendersite.py, rqcrawl.parse.sitemaps,"
        " rqcrawl.frontier.sitemaps.read, Frontier.known, CrawlState.known,"
        " CrawlWorker.execute_job, rqcrawl.workers.CrawlWorker, http.client, robots.txt,"
        " example.com, myhooks.py, architecture.md, nowhere.md"
    )
    assert stale(text) == [
        "frontier.pump",
        "stats.thin_crawl_warnings",
        "render.py",
        "tests/rendersite.py",
        "rqcrawl.parse.sitemaps",
        "Frontier.known",
        "nowhere.md",
    ]

"""The package in layers: each part imports only its own modules and the layers below it.

Every import counts: at module level, inside functions, under `if TYPE_CHECKING:`, in a
package's `__getattr__`, and `import_module("rqcrawl...")` with a literal name. There is no
list of exceptions: a module that needs something above it is in the wrong room. The layers
are drawn on docs/explanation/architecture.md.
"""

from __future__ import annotations

import ast

from test_layout import MODULES

# Bottom first. A part is a subpackage or a top-level module; "rqcrawl" is the package's face
# (rqcrawl/__init__.py), which hands on the public API.
LAYERS = [
    {
        "defaults",
        "lru",
        "redisurl",
        "quickexit",
        "lazygroup",
        "untrusted",
        "processes",
        "loading",
        "extras",
        "options",
    },  # small utilities
    {"parse"},  # what a response says: pure functions
    {"config"},  # the settings and their checks
    {"fetch"},  # one request, and the rules every request obeys
    {"frontier"},  # a crawl's state, what it admits, its records, its jobs
    {"ops"},  # status, metrics, control, export
    {"workers"},  # the processes and the job of one URL
    {"render"},  # the render workers (a kind of worker)
    {"api"},  # the Python API
    {"bench", "demo"},  # tools that only the CLI loads
    {"cli"},
    {"rqcrawl"},
]
LEVEL = {part: level for level, parts in enumerate(LAYERS) for part in parts}


def part_of(module: str) -> str:
    """`rqcrawl.frontier.state` -> "frontier", `rqcrawl.config` -> "config"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def imports(name: str, source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of the package's modules in `source`, the code of
    module `name`; `from pkg import mod` imports pkg.mod, `from pkg import name` pkg."""
    is_package = name in MODULES and MODULES[name].name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                module = f"{base}.{alias.name}"
                found.append((node.lineno, module if module in MODULES else base))
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return sorted((line, m) for line, m in found if m == "rqcrawl" or m.startswith("rqcrawl."))


def upward(name: str, source: str) -> list[str]:
    """The imports of module `name` that reach a part of its own layer or above."""
    own = part_of(name)
    return [
        f"{name}:{line} imports {target} ({own} is not above {part_of(target)})"
        for line, target in imports(name, source)
        if part_of(target) != own and LEVEL[part_of(target)] >= LEVEL[own]
    ]


def test_every_part_has_a_layer():
    missing = sorted({part_of(name) for name in MODULES} - LEVEL.keys())
    assert not missing, f"give these a layer in LAYERS and on the architecture page: {missing}"


def test_no_module_imports_upward():
    found = [
        problem
        for name, path in sorted(MODULES.items())
        for problem in upward(name, path.read_text(encoding="utf-8"))
    ]
    assert not found, "\n".join(found)


def test_the_check_sees_imports_in_functions_type_checking_and_import_module():
    source = """
from typing import TYPE_CHECKING
from rqcrawl.parse.urls import host_of
if TYPE_CHECKING:
    from rqcrawl.workers.worker import CrawlWorker
def later():
    from rqcrawl import api
    import rqcrawl.ops.stats
    return importlib.import_module("rqcrawl.cli")
"""
    found = upward("rqcrawl.fetch.http", source)
    assert [f.split(" imports ")[1].split(" ")[0] for f in found] == [
        "rqcrawl.workers.worker",
        "rqcrawl.api",
        "rqcrawl.ops.stats",
        "rqcrawl.cli",
    ]


def test_relative_imports_resolve_against_the_package():
    assert imports("rqcrawl.fetch.http", "from ..frontier import keys") == [
        (1, "rqcrawl.frontier.keys")
    ]
    assert imports("rqcrawl.frontier", "from . import state") == [(1, "rqcrawl.frontier.state")]

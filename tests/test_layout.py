"""The package's layout: role subpackages that say their job, and no import cycle, counting
imports inside functions too (a lazy import hides a cycle, it does not remove it)."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "rqcrawl"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(name: str, path: Path) -> set[str]:
    """The package's modules that `name` imports, outside `if TYPE_CHECKING:` blocks and a
    package face's `__getattr__` (PEP 562: names it hands on when asked, which the package
    itself does not use). `from pkg import mod` imports pkg.mod; `from pkg import name`, pkg."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            node.body = []
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            modules = {f"{base}.{a.name}" for a in node.names} & MODULES.keys()
            found |= modules if len(modules) == len(node.names) else modules | {base}
    return {m for m in found if m in MODULES and m != name}


def test_no_import_cycles():
    graph = {name: imported(name, path) for name, path in MODULES.items()}
    graph = {
        name: {m for m in deps if not name.startswith(m + ".")} for name, deps in graph.items()
    }
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(trail[trail.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_every_subpackage_says_its_job():
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{init.relative_to(ROOT)} needs a docstring saying its job"

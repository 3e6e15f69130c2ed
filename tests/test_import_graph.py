"""The import graph of chatapp and gateway_client has no cycle, and gateway_client stands alone.

Every import counts: at module level, inside functions and under `if TYPE_CHECKING:`, since
each is a dependency a reader has to hold in mind, and a cycle that works only because one side
imports late is still a cycle. `from pkg import mod` is an import of `pkg.mod` when `mod` is a
module, and of `pkg` (its `__init__`) otherwise; `import pkg` is an import of `pkg`'s `__init__`.
Imported names are read off the source with `ast`, so nothing here imports the modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("chatapp", "gateway_client")


@dataclass(frozen=True, slots=True)
class Import:
    source: str
    target: str
    line: int


def module_files() -> dict[str, Path]:
    """Every module of the packages by dotted name; a package's name is its `__init__`."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> Iterator[Import]:
    """Every module `name` imports, internal or not, wherever in the file the import stands."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(name, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # A relative import is relative to the package holding the module.
                anchor = name.split(".")
                drop = node.level - 1 if is_package else node.level
                parts = anchor[: len(anchor) - drop] + ([node.module] if node.module else [])
                base = ".".join(parts)
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield Import(name, submodule if submodule in modules else base, node.lineno)


@cache
def import_graph() -> tuple[dict[str, set[str]], list[Import]]:
    """The graph among the packages' modules, and every import (external ones included)."""
    modules = module_files()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    every: list[Import] = []
    for name, path in modules.items():
        for found in imports_of(name, path, modules):
            every.append(found)
            if found.target in modules and found.target != name:
                graph[name].add(found.target)
    return graph, every


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively; only the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return sorted(components)


def describe(components: list[list[str]], imports: list[Import]) -> str:
    lines: list[str] = []
    for component in components:
        members = set(component)
        lines.append(f"cycle among {len(component)} modules: {', '.join(component)}")
        edges = sorted(
            {(i.source, i.target, i.line) for i in imports if i.source in members}
            & {(i.source, i.target, i.line) for i in imports if i.target in members}
        )
        lines.extend(f"    {source} -> {target} (line {line})" for source, target, line in edges)
    return "\n".join(lines)


def test_the_graph_is_read_from_every_module() -> None:
    graph, imports = import_graph()
    assert "chatapp.costs.models" in graph
    assert "gateway_client.emulator.app" in graph
    # A relative import inside a package resolves against that package.
    assert "gateway_client.errors" in graph["gateway_client.stream_parser"]
    assert any(i.source == "gateway_client" for i in imports)


def test_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from . import low\n")
    (package / "low.py").write_text("")
    source = package / "high.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import pkg\n"  # the package: its __init__
        "from pkg import low, helper\n"  # a module, and a name from the package
        "if TYPE_CHECKING:\n"
        "    from pkg.low import Thing\n"
        "def late():\n"
        "    from .low import other\n"
        "    import json\n"
    )
    modules = {"pkg": package / "__init__.py", "pkg.low": package / "low.py", "pkg.high": source}
    found = {(i.target, i.line) for i in imports_of("pkg.high", source, modules)}
    assert found == {
        ("typing", 1),
        ("pkg", 2),
        ("pkg.low", 3),
        ("pkg", 3),
        ("pkg.low", 5),
        ("pkg.low", 7),
        ("json", 8),
    }
    init = {i.target for i in imports_of("pkg", package / "__init__.py", modules)}
    assert init == {"pkg.low"}


def test_strongly_connected_components() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph, imports = import_graph()
    components = strongly_connected(graph)
    assert not components, "import cycles:\n" + describe(components, imports)


def test_gateway_client_imports_neither_django_nor_chatapp() -> None:
    _, imports = import_graph()
    offending = [
        f"{i.source} imports {i.target} (line {i.line})"
        for i in imports
        if i.source.partition(".")[0] == "gateway_client"
        and i.target.partition(".")[0] in {"django", "chatapp"}
    ]
    assert not offending, "\n".join(offending)

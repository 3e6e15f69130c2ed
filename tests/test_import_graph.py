"""The import graph of chatapp and gateway_client has no cycle, gateway_client stands alone, and
chatapp's packages stand in layers (`LAYERS`): no import goes up a layer, no two packages import
each other, and no module imports another's private (`_x`) names. Each failure prints the
offending imports as module:line.

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


# chatapp's packages and root modules in layers, bottom to top: a module imports only from its
# own unit and the layers below it (docs/architecture.md, "Where the code is", draws the same).
# `gateway_client` stands below them all. A unit is a package under `chatapp/` or a root
# module; `chatapp.models` only gathers every package's models for Django, at the top.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "errors",
        "log_format",
        "settings",
        "request_memo",
        "records_thread",
        "static_files",
        "static_vendor",
        "checks",
        "authenticated",
    ),
    ("messaging",),
    ("gateways",),
    ("costs",),
    ("shared_cache",),
    ("access",),
    ("patches",),
    ("middleware",),
    ("assistants",),
    ("rendering",),
    ("knowledge",),
    ("tools",),
    ("conversations",),
    ("streaming",),
    ("read_aloud", "transcription"),
    ("ws",),
    ("identity",),
    ("views",),
    ("templatetags", "management", "admin", "urls", "asgi", "apps", "models", "migrations"),
)
# The imports that still go up a layer, named until they are moved (each a debt, not a rule):
# an entry that no longer goes up fails `test_the_known_upward_imports_are_all_still_there`.
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()

# Private names still imported from another module, named until they are made public or moved.
KNOWN_PRIVATE: frozenset[tuple[str, str]] = frozenset()


def unit_of(module: str) -> str | None:
    """The layer unit of a chatapp module: its package under `chatapp/`, or its root module. A
    package's admin pages (`<package>/admin.py`, or `admin/`) stand with `chatapp/admin.py`,
    which registers them, at the top: they are pages, reading whatever they show."""
    parts = module.split(".")
    if parts[0] != "chatapp":
        return None
    if len(parts) > 2 and parts[2] == "admin":
        return "admin"
    return parts[1] if len(parts) > 1 else "chatapp"


def layer_of(unit: str) -> int:
    if unit == "chatapp":  # the package's own __init__: the top
        return len(LAYERS)
    for index, units in enumerate(LAYERS):
        if unit in units:
            return index
    raise AssertionError(f"chatapp.{unit} is in no layer: add it to LAYERS")


def unit_imports() -> list[tuple[str, str, Import]]:
    """Every import from one chatapp unit into another, with the two units."""
    graph, imports = import_graph()
    found: list[tuple[str, str, Import]] = []
    for i in imports:
        source, target = unit_of(i.source), unit_of(i.target)
        if source and target and source != target and i.target in graph:
            found.append((source, target, i))
    return found


def upward_imports() -> list[Import]:
    return [i for source, target, i in unit_imports() if layer_of(target) > layer_of(source)]


def both_way_pairs(
    known: frozenset[tuple[str, str]] = frozenset(),
) -> dict[tuple[str, str], list[Import]]:
    """Pairs of units importing each other, with the imports that make each pair (leaving out
    the `known` ones)."""
    edges: dict[tuple[str, str], list[Import]] = {}
    for source, target, i in unit_imports():
        if (i.source, i.target) in known:
            continue
        edges.setdefault((source, target), []).append(i)
    return {
        (a, b): edges[(a, b)] + edges[(b, a)] for a, b in sorted(edges) if a < b and (b, a) in edges
    }


def test_a_module_s_unit_is_its_package_or_the_admin() -> None:
    assert unit_of("chatapp.costs.ledger") == "costs"
    assert unit_of("chatapp.costs.admin.generations") == "admin"
    assert unit_of("chatapp.access.admin") == "admin"
    assert unit_of("chatapp.tools.mcp.calls") == "tools"
    assert unit_of("chatapp.models") == "models"
    assert unit_of("chatapp") == "chatapp"
    assert unit_of("gateway_client.sse") is None


def test_every_unit_is_in_a_layer() -> None:
    graph, _ = import_graph()
    for module in graph:
        unit = unit_of(module)
        if unit is not None:
            layer_of(unit)


def test_no_import_goes_up_a_layer() -> None:
    offending = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in upward_imports()
        if (i.source, i.target) not in KNOWN_UPWARD
    ]
    assert not offending, "imports that go up a layer:\n" + "\n".join(sorted(set(offending)))


def test_the_known_upward_imports_are_all_still_there() -> None:
    still = {(i.source, i.target) for i in upward_imports()}
    gone = sorted(KNOWN_UPWARD - still)
    assert not gone, f"no longer upward, strike from KNOWN_UPWARD: {gone}"


def test_no_two_units_import_each_other() -> None:
    pairs = both_way_pairs(known=KNOWN_UPWARD)
    lines = [f"{a} <-> {b}" for a, b in pairs]
    for imports in pairs.values():
        lines.extend(f"    {i.source}:{i.line} imports {i.target}" for i in imports)
    assert not pairs, "units importing each other:\n" + "\n".join(lines)


def private_imports() -> list[Import]:
    """A name its module keeps to itself (`_x`) used in another module of the packages: imported
    (`from chatapp.x import _name`) or read off an imported module (`x._name`)."""
    modules = module_files()
    found: list[Import] = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        bound: dict[str, str] = {}  # a local name of an imported module of the packages
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                if node.level == 0 and node.module.partition(".")[0] not in PACKAGES:
                    continue
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(Import(name, f"{node.module}.{alias.name}", node.lineno))
                    if f"{node.module}.{alias.name}" in modules:
                        bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in modules:
                        bound[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(Import(name, f"{bound[node.value.id]}.{node.attr}", node.lineno))
    return found


def test_no_private_name_is_imported_from_another_module() -> None:
    offending = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in private_imports()
        if (i.source, i.target) not in KNOWN_PRIVATE
    ]
    assert not offending, "private names imported across modules:\n" + "\n".join(offending)

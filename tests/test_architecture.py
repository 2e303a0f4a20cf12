"""The package map holds: ``format ← broker_core ← connector`` with no edge the other way, and no
runtime import cycle between modules or between folders.

The import graph is read from the source with ``ast``: module-level imports and imports inside
functions both count (a cycle hidden in a function is still a cycle); imports under
``if TYPE_CHECKING:`` do not, nor does a package ``__init__`` re-exporting its own modules.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("format", "broker_core", "connector")


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    module_level: bool


@functools.cache
def _modules() -> dict[str, tuple[Path, bool]]:
    found: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, module_level: bool):
    """Yield (import node, module_level), skipping ``if TYPE_CHECKING:`` bodies."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, module_level
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield from _walk(other, module_level)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(child, False)
        else:
            yield from _walk(child, module_level)


def _imports(name: str, path: Path, is_package: bool, known: set[str]) -> list[Import]:
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node, module_level in _walk(ast.parse(path.read_text(), str(path)), True):
        if isinstance(node, ast.Import):
            bases = [alias.name for alias in node.names]
            targets = bases
        else:
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.append(Import(name, target, node.lineno, module_level))
    return found


@functools.cache
def _graph() -> tuple[Import, ...]:
    modules = _modules()
    edges = []
    for name, (path, is_package) in modules.items():
        for edge in _imports(name, path, is_package, set(modules)):
            if is_package and edge.target.startswith(name + "."):
                continue  # a package __init__ re-exporting its own modules
            edges.append(edge)
    return tuple(edges)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(edges.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return components


def _folder(module: str) -> str:
    path, is_package = _modules()[module]
    return module if is_package else module.rpartition(".")[0]


def _describe(edges: Iterable[Import], members: list[str], key=lambda m: m) -> str:
    inside = set(members)
    return "\n".join(f"  {e.source} -> {e.target} (line {e.line})" for e in edges
                     if key(e.source) in inside and key(e.target) in inside and key(e.source) != key(e.target))


def test_format_imports_neither_broker_core_nor_connector():
    wrong = [e for e in _graph() if e.source.partition(".")[0] == "format"
             and e.target.partition(".")[0] in ("broker_core", "connector")]
    assert wrong == []


# ``seglog sql`` starts the connector's Spark shell and ``seglog tables`` its Delta table job from
# inside their commands: the only edges from ``broker_core`` to ``connector``, never at module
# level, so the broker runs without it.
PLUGGED_IN_EDGES = {("broker_core.cli.seglog_command", "connector.sql_shell"),
                    ("broker_core.cli.tables_command", "connector.tables_cli")}


def _plugged_in(edge: Import) -> bool:
    return (edge.source, edge.target) in PLUGGED_IN_EDGES and not edge.module_level


def test_broker_core_imports_connector_only_where_seglog_sql_and_seglog_tables_start_spark():
    wrong = [e for e in _graph() if e.source.partition(".")[0] == "broker_core"
             and e.target.partition(".")[0] == "connector" and not _plugged_in(e)]
    assert wrong == []


def test_only_the_connector_imports_spark():
    # The distributed cleaner's stages live in broker_core and run inside Spark tasks, but only
    # connector/compaction_job wires them into Spark.
    wrong = []
    for name, (path, _) in _modules().items():
        if name.partition(".")[0] == "connector":
            continue
        for node, _ in _walk(ast.parse(path.read_text(), str(path)), True):
            modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if not node.level else [])
            wrong += [f"{name} imports {m} (line {node.lineno})" for m in modules if m.partition(".")[0] == "pyspark"]
    assert wrong == []


def test_no_import_cycle_between_modules():
    graph = _graph()
    edges: dict[str, set[str]] = {}
    for edge in graph:
        edges.setdefault(edge.source, set()).add(edge.target)
    cycles = _cycles(edges)
    assert cycles == [], "\n".join(f"cycle {c}:\n{_describe(graph, c)}" for c in cycles)


def test_no_two_folders_import_each_other():
    graph = [edge for edge in _graph() if not _plugged_in(edge)]
    edges: dict[str, set[str]] = {}
    for edge in graph:
        source, target = _folder(edge.source), _folder(edge.target)
        if source != target and not target.startswith(source + "."):
            edges.setdefault(source, set()).add(target)
    cycles = _cycles(edges)
    assert cycles == [], "\n".join(f"cycle {c}:\n{_describe(graph, c, _folder)}" for c in cycles)

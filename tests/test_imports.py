"""The product's import graph: no cycles, and nothing imports upward.

DESIGN.md's layer rule is minibroker -> minibroker_storage -> minibroker_protocol. The
graph is read from the source with ``ast`` (module-level and function-level imports
alike: a cycle hidden in a function still makes the modules one unit); imports under
``if TYPE_CHECKING:`` are left out, as they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Import name -> source directory, lowest layer first.
PACKAGES = {
    "minibroker_protocol": ROOT / "protocol",
    "minibroker_storage": ROOT / "storage",
    "minibroker": ROOT / "minibroker",
}
LAYER = {name: n for n, name in enumerate(PACKAGES)}


def _modules() -> dict[str, Path]:
    out = {}
    for package, directory in PACKAGES.items():
        for path in directory.rglob("*.py"):
            rel = path.relative_to(directory).with_suffix("")
            parts = [package, *rel.parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """Product modules ``module`` imports when it runs."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def resolve(name: str) -> str | None:
        # The longest known module the dotted name starts with.
        while name:
            if name in known:
                return name
            name = name.rpartition(".")[0]
        return None

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:
                    visit_stmt(sub)
                continue
            visit_stmt(child)

    def visit_stmt(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = resolve(alias.name)
                if target:
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                target = resolve(f"{prefix}.{alias.name}") or resolve(prefix)
                if target:
                    found.add(target)
        visit(node)

    visit(tree)
    found.discard(module)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _package(module: str) -> str:
    return module.split(".")[0]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


GRAPH = _graph()


def test_graph_is_read():
    # A broken reader would pass the tests below vacuously.
    assert "minibroker_storage.segment" in GRAPH["minibroker_storage.log"]
    assert "minibroker_protocol.batch" in GRAPH["minibroker_storage.segment"]
    assert len(GRAPH) > 50


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_upward_imports(module):
    upward = sorted(t for t in GRAPH[module] if LAYER[_package(t)] > LAYER[_package(module)])
    assert upward == [], f"{module} imports a higher layer"


def test_cycle_finder_finds_a_hidden_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]

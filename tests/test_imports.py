"""The product's import graph: no cycles, nothing imports upward, and minibroker's packages
import only what docs/architecture.md's map allows.

DESIGN.md's layer rule is minibroker -> minibroker_storage -> minibroker_protocol; inside
minibroker, ``ALLOWED`` below is the map's table. The graph is read from the source with
``ast``: module-level and function-level imports alike (a cycle hidden in a function still
makes the modules one unit), and imports under ``if TYPE_CHECKING:`` too: a type one module
needs from another ties them as much as a call does, so a shared type belongs in a lower
module, not behind a flag.
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


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """Product modules ``module`` imports, when it runs or for its types."""
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


def _area(module: str) -> str | None:
    """The node of ALLOWED a minibroker module belongs to: its package under minibroker/
    (coordinator's txn/ and group/ each their own), or the top-level module itself."""
    parts = module.split(".")
    if parts[0] != "minibroker":
        return None
    if len(parts) == 1:
        return "minibroker"
    if parts[1] == "coordinator" and len(parts) > 2 and parts[2] in COORDINATORS:
        return f"coordinator.{parts[2]}"
    return parts[1]


# Each coordinator sub-package is its own area: one never imports another.
COORDINATORS = ("txn", "group", "share")
_BELOW_HANDLERS = {"core", "config", "security", "coordinator", "coordinator.txn", "coordinator.group",
                   "coordinator.share", "client_metrics", "cluster"}
# What each area of minibroker may import (besides itself, minibroker_storage,
# minibroker_protocol and the root package's __version__): docs/architecture.md draws it.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "config": {"core"},
    "security": {"core", "config"},
    "coordinator": {"core", "config", "cluster"},
    "coordinator.txn": {"core", "config", "coordinator"},
    "coordinator.group": {"core", "config", "coordinator"},
    "coordinator.share": {"core", "config", "coordinator"},
    "client_metrics": {"core", "config"},
    "cluster": {"core", "config"},
    "handlers": _BELOW_HANDLERS,
    "control": _BELOW_HANDLERS | {"handlers", "registry"},
    "net": _BELOW_HANDLERS | {"handlers", "control", "registry"},
    "background": {"core", "config", "coordinator"},
    # The Schema Registry (issue 34): its listener's TLS and basic auth come from security;
    # _schemas is read back with the coordinators' replay of an internal log.
    "registry": {"core", "config", "security", "coordinator"},
    "broker": _BELOW_HANDLERS | {"handlers", "control", "background", "registry"},
    "app": _BELOW_HANDLERS | {"handlers", "control", "net", "background", "broker", "registry"},
    "cli": _BELOW_HANDLERS | {"handlers", "control", "net", "background", "broker", "app", "testing",
                              "registry"},
    # The console script's entry point: signals caught before anything else is imported.
    "launch": {"core", "cli"},
    "__main__": {"launch"},
    # The public helpers stand alone: they talk to a broker over the wire or read its files.
    "testing": set(),
    "spark": set(),
}
# Packages whose __init__ is their public API (``from minibroker.testing import MiniBroker``,
# ``from minibroker.spark import register``), not a room of the broker.
PUBLIC_INITS = {"minibroker.testing", "minibroker.spark"}


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


def test_type_level_imports_are_counted(tmp_path):
    # A cycle through ``if TYPE_CHECKING:`` is still a cycle (issue 30).
    path = tmp_path / "m.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n"
                    "def f():\n    from .c import C\n", encoding="utf-8")
    assert _imports("pkg.m", path, {"pkg.m", "pkg.b", "pkg.c"}) == {"pkg.b", "pkg.c"}


def test_every_area_is_in_the_table():
    areas = {_area(m) for m in GRAPH} - {None, "minibroker"}
    assert areas == set(ALLOWED), "a new package or top-level module needs its row in ALLOWED"


def test_the_table_is_a_dag():
    assert _cycles({a: set(b) for a, b in ALLOWED.items()}) == []
    assert all(set(b) <= set(ALLOWED) for b in ALLOWED.values())


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _area(m) not in (None, "minibroker")))
def test_package_rules(module):
    area = _area(module)
    assert area is not None
    bad = sorted(t for t in GRAPH[module]
                 if _area(t) not in (None, "minibroker", area) and _area(t) not in ALLOWED[area])
    assert bad == [], f"{module} ({area}) may import only {sorted(ALLOWED[area])}"


def _rooms() -> list[Path]:
    return sorted(p for p in (ROOT / "minibroker").rglob("__init__.py")
                  if _dotted(p) not in PUBLIC_INITS and not any(_dotted(p).startswith(f"{q}.") for q in PUBLIC_INITS))


def _dotted(init: Path) -> str:
    return ".".join(("minibroker", *init.parent.relative_to(ROOT / "minibroker").parts)).rstrip(".")


@pytest.mark.parametrize("init", _rooms(), ids=lambda p: _dotted(p))
def test_package_init_is_a_docstring(init):
    """What lives in a package and what it may import, and nothing that runs: importing
    ``minibroker.net.early`` must not import the rest of ``net`` (the CLI's light path)."""
    tree = ast.parse(init.read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree)
    assert doc, f"{init} needs a docstring saying what lives there"
    body = tree.body[1:]
    if _dotted(init) == "minibroker":
        # The version setuptools reads (pyproject's dynamic version), and nothing else.
        assert [ast.unparse(n) for n in body] == [ast.unparse(n) for n in body
                                                  if isinstance(n, ast.Assign)
                                                  and ast.unparse(n).startswith("__version__ =")]
        assert len(body) == 1
        return
    assert "Imports:" in doc, f"{init}'s docstring says what the package may import"
    assert body == [], f"{init} runs code: {[ast.unparse(n)[:60] for n in body]}"


def test_cycle_finder_finds_a_hidden_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]

"""Layers point one way: no import cycle in the package, function-local imports included.

A cycle kept from failing by an import inside a function still ties the modules together: this reads every
``import`` of ``dagger`` (at module level or in a function; ``if TYPE_CHECKING:`` blocks aside, they never run)
and fails on any cycle, naming its modules. Importing ``a.b.c`` runs the packages ``a.b`` first, so those count
too, except a module's own parent packages (a package importing its modules is no cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dagger"
PLUGINS = ("dagger.sinks", "dagger.sources", "dagger.processors")


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (run-time imports only)."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        typing_only = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for name in names:
                target = resolve(name) if name.startswith("dagger") else None
                if target is None or target == module:
                    continue
                graph[module].add(target)
                parts = target.split(".")
                for i in range(2, len(parts)):  # the packages above the target run first
                    package = ".".join(parts[:i])
                    if package != module and not module.startswith(package + "."):
                        graph[module].add(package)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checker_finds_a_cycle_hidden_in_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles (move code to break them): " + "; ".join(" <-> ".join(c) for c in found)


def test_the_config_model_and_the_registries_import_no_plugin():
    graph = import_graph()
    below = [m for m in graph if m.startswith(("dagger.config", "dagger.registry"))]
    assert below
    reached: set[str] = set()
    todo = list(below)
    while todo:
        module = todo.pop()
        for target in graph[module]:
            if target not in reached:
                reached.add(target)
                todo.append(target)
    assert not sorted(m for m in reached if m.startswith(PLUGINS))

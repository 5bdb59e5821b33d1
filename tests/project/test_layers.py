"""Layers point one way: config below plugins below the job below the CLI, and no import cycle.

Every ``import`` of ``dagger`` counts: at module level or in a function, under ``if TYPE_CHECKING:`` (a type-only
import still ties the modules together for whoever reads or moves them), and every ``import_module`` /
``__import__`` call whose argument is a literal module name of the package. Importing ``a.b.c`` runs the packages
``a.b`` first, so those count too, except a module's own parent packages (a package importing its modules is no
cycle).

:data:`LAYERS` orders the package from the top down; a module belongs to the first layer one of whose prefixes it
starts with. An import may go to its own layer or one below it, never up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dagger"

#: the layers, from the top down: (name, module prefixes)
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("cli", ("dagger.__main__", "dagger.entry", "dagger.cli", "dagger.generate")),
    ("tester", ("dagger.testing",)),  # dagger test: runs a job's cases (below the CLI, above the runner)
    ("runner", ("dagger.runner", "dagger.progress", "dagger.telemetry")),
    ("job", ("dagger.job",)),
    (
        "plugins",
        (
            "dagger.catalog",
            "dagger.sinks",
            "dagger.processors",
            "dagger.longbow",
            "dagger.bigquery",
            "dagger.influx",
            "dagger.kafka.client",
            "dagger.kafka.dead_letters",
            "dagger.kafka.sink",
            "dagger.kafka.source",
            "dagger.kafka.spark_connector",
            "dagger.parquet",
            "dagger.functions",
            "dagger.python_udfs",
            "dagger.serde",
            "dagger.dead_letter",
            "dagger.formats",
            "dagger.bounded",
            "dagger.session",
        ),
    ),
    ("plugin API", ("dagger.plugins",)),
    ("config", ("dagger.config",)),
    (
        "base",
        (
            "dagger",  # the package root names itself only: every other module is placed on purpose
            "dagger.cache",
            "dagger.checkpoint",
            "dagger.container",
            "dagger.errors",
            "dagger.job_log",
            "dagger.kafka",
            "dagger.latency",
            "dagger.librdkafka_logs",
            "dagger.lenient_json",
            "dagger.optional",
            "dagger.schema",
            "dagger.sql",
            "dagger.worker_cache",
            "dagger.worker_logging",
        ),
    ),
]


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


def _imported_names(tree: ast.AST) -> list[str]:
    """Every module name ``tree`` imports: import statements (any block, ``TYPE_CHECKING`` included) and
    ``import_module("...")`` / ``__import__("...")`` calls with a literal name."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.append(node.args[0].value)
    return names


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for name in _imported_names(ast.parse(path.read_text())):
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


def layer_of(module: str) -> int:
    """The index of ``module``'s layer in :data:`LAYERS` (0 is the top)."""
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or (p != "dagger" and module.startswith(p + ".")) for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module in a layer above the importer's, as ``importer (layer) -> imported (layer)``."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if target == "dagger" or module.startswith(target + "."):
                continue  # the package itself, or a parent package
            if layer_of(target) < layer_of(module):
                found.append(f"{module} ({LAYERS[layer_of(module)][0]}) -> {target} ({LAYERS[layer_of(target)][0]})")
    return found


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


def test_the_checker_finds_a_cycle_an_upward_import_and_what_type_checking_and_import_module_hide():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    hidden = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dagger.job import Job\n"
        "def f():\n    import importlib\n    importlib.import_module('dagger.cli')\n    __import__('dagger.runner')\n"
    )
    assert {"dagger.job", "dagger.cli", "dagger.runner"} <= set(_imported_names(hidden))
    assert upward_imports({"dagger.config.model": {"dagger.kafka.sink"}, "dagger.kafka.sink": set()}) == [
        "dagger.config.model (config) -> dagger.kafka.sink (plugins)"
    ]


def test_every_module_is_in_a_layer():
    with pytest.raises(AssertionError, match="dagger.new_module is in no layer"):
        layer_of("dagger.new_module")  # a new top-level module must be placed in LAYERS
    unplaced = []
    for module in import_graph():
        try:
            layer_of(module)
        except AssertionError:
            unplaced.append(module)
    assert not unplaced, f"put these modules in a layer of LAYERS: {unplaced}"


def test_the_package_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles (move code to break them): " + "; ".join(" <-> ".join(c) for c in found)


def test_no_module_imports_a_layer_above_its_own():
    found = upward_imports(import_graph())
    assert not found, "upward imports (config < plugin API < plugins < job < runner < cli):\n  " + "\n  ".join(found)


def test_the_config_layer_imports_no_plugin():
    graph = import_graph()
    config = [m for m in graph if m.startswith("dagger.config")]
    assert config
    reached: set[str] = set()
    todo = list(config)
    while todo:
        for target in graph[todo.pop()]:
            if target not in reached:
                reached.add(target)
                todo.append(target)
    assert sorted(m for m in reached if layer_of(m) < layer_of("dagger.config.model")) == []


def test_a_module_over_300_lines_says_why_in_its_docstring():
    """The house rule: a module that grows past ~300 lines states why it is one module (``One module (...)``)."""
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > 320 and "One module (" not in (ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(f"{path.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    assert not unexplained, "split these or say in the docstring why they are one module: " + ", ".join(unexplained)

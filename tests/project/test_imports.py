"""Imports sit at the top of a module. An import inside a function stays only for an optional dependency or a
measured start-up cost (``dagger --help`` and ``dagger validate`` load neither pyspark nor the protobuf runtime),
or where a module-level import would close a cycle. The count may only go down: lower ``CEILING`` when it does.
Pure Python: no server, no Spark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: imports inside functions under dagger/ today (617 before issue 54 moved those of our own modules that close no
#: cycle and add no start-up cost to the top)
CEILING = 364


def _imports_in_functions() -> list[str]:
    found = []
    for path in sorted((ROOT / "dagger").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found += [
                    f"{path.relative_to(ROOT)}:{sub.lineno}"
                    for sub in ast.walk(node)
                    if isinstance(sub, ast.Import | ast.ImportFrom)
                ]
    return sorted(set(found))


def test_imports_inside_functions_do_not_grow():
    found = _imports_in_functions()
    assert len(found) <= CEILING, (
        f"{len(found)} imports inside functions under dagger/, more than the {CEILING} allowed: put new imports at "
        "the top of the module (inside a function only for an optional dependency or a measured start-up cost, "
        "with a comment saying which)"
    )


def test_the_command_line_starts_without_pyspark_or_protobuf():
    """What keeps the rest inside functions: the CLI's start (``--help``, argument errors) loads neither."""
    heavy = ("pyspark", "google.protobuf", "pyarrow", "sqlglot")
    code = f"import sys, dagger.cli; print([m for m in {heavy!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout

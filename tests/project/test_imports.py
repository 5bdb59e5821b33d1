"""Imports sit at the top of a module. An import inside a function stays only for an optional dependency or a
measured start-up cost (``dagger --help`` loads neither pyspark nor the protobuf runtime, pyarrow or sqlglot), or
where a module-level import would close a cycle, and says why:

* the standard library: never (it costs nothing worth deferring);
* another package: only one of :data:`DEFERRED`, each with its reason;
* a module of ours: with a comment on its line, or on the comment line right above a group of them
  (``# start-up: loads pyspark``, ``# cycle: dagger.config.model imports this module``).

The count may only go down: lower ``CEILING`` when it does. Pure Python: no server, no Spark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: imports inside functions under dagger/ today (617 before issue 54; 414 once those of our own modules that close
#: no cycle and add no start-up cost moved to the top; 357 once the standard library's did too)
CEILING = 357
#: the other packages imported inside functions, and why each waits
DEFERRED = {
    "pyspark": "about a second to import: the CLI, loading a config and validate's static path run without it",
    "py4j": "pyspark's bridge to the JVM, there once a session is",
    "pyarrow": "the CLI starts without it",
    "pandas": "only pyspark's pandas conversions need it",
    "google": "protobuf's runtime (the CLI starts without it); the bigquery, bigtable and gcs extras' clients",
    "sqlglot": "the CLI starts without it: SQL is parsed once a job is planned",
    "confluent_kafka": "librdkafka and the registry client, loaded where a Kafka client or a registry is used",
    "fastavro": "Avro streams and sinks only",
    "avro": "Confluent Avro subjects with references only",
    "ptars": "protobuf to Arrow, with pyarrow",
    "requests": "HTTP to a descriptor server or a registry, only where a job names one",
    "pycurl": "the HTTP lookup's client: post-processors only",
    "jsonpath_ng": "the lookups' JSON paths: post-processors only",
    "grpc": "the gRPC lookup: post-processors only",
    "cryptography": "Java key and trust stores, only where a stream names one",
    "prometheus_client": "the metrics endpoint, only where it is served",
    "json_source_map": "dagger test --update only",
    "udfs": "the built-in function library (it loads pyspark)",
    "influxdb_client": "the influx extra",
    "line_protocol_parser": "the influx extra (dagger test reads the points back)",
    "urllib3": "the influx sink's retries",
    "asyncpg": "the postgres extra",
    "fsspec": "remote checkpoints only",
}


def _imports_in_functions() -> list[tuple[str, int, str, bool]]:
    """Every import inside a function under dagger/: (file, line, module, whether a comment says why)."""
    found = {}
    for path in sorted((ROOT / "dagger").rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for sub in ast.walk(node):
                if isinstance(sub, ast.Import | ast.ImportFrom):
                    module = sub.module if isinstance(sub, ast.ImportFrom) else sub.names[0].name
                    statement = lines[sub.lineno - 1 : sub.end_lineno]  # ruff may wrap a comment into its brackets
                    said = any("#" in x for x in statement) or _in_commented_group(lines, sub.lineno)
                    found[(str(path.relative_to(ROOT)), sub.lineno)] = (module or "", said)
    return sorted((path, line, module, said) for (path, line), (module, said) in found.items())


def _in_commented_group(lines: list[str], lineno: int) -> bool:
    """Whether the import at ``lineno`` is one of a run of imports under a comment line."""
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith(("from ", "import ")):
        i -= 1
    return i >= 0 and lines[i].strip().startswith("#")


def test_imports_inside_functions_do_not_grow():
    found = _imports_in_functions()
    assert len(found) <= CEILING, (
        f"{len(found)} imports inside functions under dagger/, more than the {CEILING} allowed: put new imports at "
        "the top of the module (inside a function only for an optional dependency or a measured start-up cost, "
        "with a comment saying which)"
    )


def test_each_import_inside_a_function_says_why_it_waits():
    stdlib = set(sys.stdlib_module_names)
    problems = []
    for path, line, module, said in _imports_in_functions():
        top = module.split(".")[0]
        if top in stdlib:
            problems.append(f"{path}:{line}: {module} is the standard library: import it at the top")
        elif top == "dagger" and not said:
            problems.append(f"{path}:{line}: {module}: say why on its line (# start-up: ..., # cycle: ...)")
        elif top not in ("dagger", *DEFERRED):
            problems.append(f"{path}:{line}: {module}: import it at the top, or add it to DEFERRED with the reason")
    assert not problems, "\n".join(problems)


def test_the_command_line_starts_without_pyspark_or_protobuf():
    """What keeps the rest inside functions: the CLI's start (``--help``, argument errors) loads neither."""
    heavy = ("pyspark", "google.protobuf", "pyarrow", "sqlglot")
    code = f"import sys, dagger.cli; print([m for m in {heavy!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout

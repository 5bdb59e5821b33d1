"""A job's test cases found and checked before anything runs (runs in the ``dagger test`` process): the
config's ``TESTS`` or a file given with ``--tests``, narrowed by ``-k``; each case's job config with the case's
``ENVIRONMENT``; each case's tables and sinks checked against the job. Anything wrong here is an invalid test
file or config: :class:`CaseFileError`, exit 2.
"""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from dagger.config.cases import CaseConfig, check_names
from dagger.config.loader import read_config_file
from dagger.errors import DaggerConfigError
from dagger.plugins.source import source_of

if TYPE_CHECKING:
    from dagger.config.model import JobConfig

#: the key a single-sink job's records are expected under (its sink's name works too)
SINGLE_SINK = "SINK"


class CaseFileError(DaggerConfigError):
    """A test file or case that cannot be run as written (``dagger test`` exits 2)."""


def load_cases(config_path: str, tests_file: str | None = None, pattern: str | None = None) -> list[CaseConfig]:
    """The cases to run: ``tests_file``'s (a JSON list of cases, or an object with ``TESTS``), else the config's
    ``TESTS``; with ``pattern``, those whose name matches it (a glob, or a part of the name)."""

    if tests_file is not None:
        where = tests_file
        try:
            raw: Any = json.loads(Path(tests_file).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CaseFileError(f"--tests {tests_file}: no such file") from None
        except json.JSONDecodeError as exc:
            raise CaseFileError(f"--tests {tests_file}: not JSON: {exc}") from None
        if isinstance(raw, dict):
            raw = raw.get("TESTS")
    else:
        where = f"{config_path}: TESTS"
        raw = read_config_file(config_path).get("TESTS")
        if isinstance(raw, str):  # a .properties file holds it as JSON text
            raw = json.loads(raw)
    if not isinstance(raw, list) or not raw:
        raise CaseFileError(
            f"{where}: no test cases (TESTS is a list of cases, each with NAME, INPUT or INPUT_BATCHES, and "
            "EXPECTED; see docs/testing.md)"
        )
    try:
        cases = TypeAdapter(list[CaseConfig]).validate_python(raw)
        check_names(cases)
    except ValidationError as exc:
        raise CaseFileError(f"{where}: " + "; ".join(_problem(e, raw) for e in exc.errors())) from None
    except ValueError as exc:
        raise CaseFileError(f"{where}: {exc}") from None
    if pattern:
        cases = [c for c in cases if fnmatch.fnmatchcase(c.NAME, pattern) or pattern in c.NAME]
        if not cases:
            raise CaseFileError(f"-k {pattern}: no case of {where} matches")
    return cases


def _problem(error: Any, raw: list[Any]) -> str:
    loc = list(error["loc"])
    name = ""
    if loc and isinstance(loc[0], int) and isinstance(raw[loc[0]], dict):
        name = f"case {raw[loc[0]].get('NAME') or loc[0]!r}"
        loc = loc[1:]
    path = ".".join(str(p) for p in loc)
    message = error["msg"].removeprefix("Value error, ")
    return f"{name}{': ' + path if path else ''}: {message}" if name else f"{path}: {message}"


def case_config(config_path: str, overrides: list[str], case: CaseConfig) -> JobConfig:
    """The job's config as the case runs it: ``${VAR}``s from the case's ``ENVIRONMENT``, then the process's."""
    from dagger.job import load_config  # start-up: loads fastavro, google, pyarrow, pyspark, udfs

    return load_config(config_path, overrides, environ={**os.environ, **case.ENVIRONMENT})


def check_case(config: JobConfig, case: CaseConfig) -> None:
    """The case's tables are the job's, its expected sinks are the job's, and its streams can be fed."""

    tables = {s.INPUT_SCHEMA_TABLE: s for s in config.STREAMS}
    for batch in case.INPUT_BATCHES or [case.INPUT or {}]:
        for table in batch:
            if table not in tables:
                raise CaseFileError(
                    f"case {case.NAME!r}: INPUT names table {table!r}; the job's tables are {', '.join(tables)}"
                )
    for table, stream in tables.items():
        if not source_of(stream).test_input:
            raise CaseFileError(
                f"case {case.NAME!r}: stream {table!r} is read by {stream.source_name}; dagger test feeds Kafka "
                "streams only (a Parquet stream's rows are files: run the job over a small file instead)"
            )
    names = sink_names(config)
    for name in case.EXPECTED or {}:
        if name not in names:
            raise CaseFileError(f"case {case.NAME!r}: EXPECTED names sink {name!r}; expected one of {', '.join(names)}")


def sink_names(config: JobConfig) -> list[str]:
    """The names a case's ``EXPECTED`` may use: the sinks' names, and ``SINK`` for a single-sink job."""
    names = [named.name for named in config.sink_configs]
    return [SINGLE_SINK, *names] if config.SINKS is None else names


def expected_key(config: JobConfig, sink_name: str, expected: dict[str, Any]) -> str | None:
    """The key of ``expected`` that holds ``sink_name``'s records (None: the case expects nothing of it)."""
    if sink_name in expected:
        return sink_name
    if config.SINKS is None and SINGLE_SINK in expected:
        return SINGLE_SINK
    return None

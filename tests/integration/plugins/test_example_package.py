"""A package of plugins of every kind, each one class and one entry point (``example/``): installed from its
``pyproject.toml``'s entry points, it runs a job through ``dagger validate`` and ``dagger run`` with its source, SQL
function, lookup, transformer and sink, and nothing of it is registered by code."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

from tests.conftest import dagger, job

EXAMPLE = Path(__file__).parent / "example"

PEOPLE = [
    {"id": 1, "name": "alice", "team": "a", "seen": "2026-11-22T10:00:01Z"},
    {"id": 2, "name": "bob", "team": "b", "seen": "2026-11-22T10:00:02Z"},
    {"id": 3, "name": "carol", "team": "z", "seen": "2026-11-22T10:00:03Z"},
]
SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "team": {"type": "string"},
        "seen": {"type": "string", "format": "date-time"},
    },
}


def _install(tmp_path: Path) -> dict[str, str]:
    """The package and a dist-info holding its ``pyproject.toml``'s entry points, in a directory of its own; the
    environment that puts it on the path of ``dagger`` and of Spark's Python workers."""
    site = tmp_path / "site"
    shutil.copytree(EXAMPLE / "dagger_example", site / "dagger_example")
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    info = site / f"dagger_example-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items())
            for group, entries in project["entry-points"].items()
        )
    )
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def test_an_example_package_of_one_class_per_plugin_runs_a_job_with_each_of_them(tmp_path):
    env = _install(tmp_path)
    lines = tmp_path / "people.jsonl"
    lines.write_text("".join(json.dumps(p) + "\n" for p in PEOPLE))
    out = tmp_path / "out.jsonl"
    stream = {
        "SOURCE_DETAILS": [{"SOURCE_NAME": "LINES_SOURCE", "SOURCE_TYPE": "BOUNDED"}],
        "SOURCE_LINES_PATH": str(lines),
        "INPUT_SCHEMA_TABLE": "people",
        "INPUT_DATATYPE": "JSON",
        "INPUT_SCHEMA_JSON_SCHEMA": json.dumps(SCHEMA),
        "INPUT_SCHEMA_JSON_EVENT_TIMESTAMP_FIELD_NAME": "seen",
    }
    post = {
        "external_source": {
            "table": [
                {
                    "key": "team",
                    "rows": {"a": "Ants", "b": "Bees"},
                    "output": "team_name",
                    "stream_timeout": 1000,
                    "capacity": 10,
                }
            ]
        },
        "internal_source": [{"output_field": "*", "type": "sql", "value": "*"}],
        "transformers": [{"transformation_class": "ShoutTransformer", "transformation_arguments": {"column": "name"}}],
    }
    data = job(
        None,
        [stream],
        "SELECT id, name, team, Triple(id) AS tripled FROM people",
        SINK_TYPE="lines",
        SINK_LINES_PATH=str(out),
        PROCESSOR_POSTPROCESSOR_ENABLE="true",
        PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post),
    )
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))

    validated = dagger("validate", str(path), env=env)
    assert validated.returncode == 0, validated.stdout[-2000:] + validated.stderr[-2000:]
    assert "file " + str(lines) in validated.stdout, validated.stdout

    run = dagger("run", str(path), "--checkpoint-dir", str(tmp_path / "cp"), env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["id"])
    assert rows == [
        {"team_name": "Ants", "id": 1, "name": "ALICE", "team": "a", "tripled": 3},
        {"team_name": "Bees", "id": 2, "name": "BOB", "team": "b", "tripled": 6},
        {"team_name": None, "id": 3, "name": "CAROL", "team": "z", "tripled": 9},
    ]

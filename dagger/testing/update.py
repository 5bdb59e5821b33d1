"""``dagger test --update``: a file's expectations rewritten with what the job produced, in place (runs in the
``dagger test`` process, after the cases ran).

Only the values change: each updated case's ``EXPECTED`` (and the counts it states: ``EXPECTED_DEAD_LETTERS``,
``EXPECTED_INVALID``, ``EXPECTED_LATE``) is replaced where it stands in the file's text, found by
``json-source-map``; every other byte (other cases, key order, comments in strings, indentation) stays. A case
without ``EXPECTED`` gains one after its last key. Records are written one per line, indented one step deeper
than the key, or on the key's line when the old value was on one line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dagger.testing.loading import CaseFileError

#: the counts a case may state, with the outcome's name for each
COUNTS = {"EXPECTED_DEAD_LETTERS": "dead_letters", "EXPECTED_INVALID": "invalid", "EXPECTED_LATE": "late"}


def update_file(path: str, updates: dict[str, tuple[dict[str, list[dict[str, Any]]], dict[str, int]]]) -> list[str]:
    """Rewrite the cases named in ``updates`` (name → (each sink's records, the counts)) in the JSON file
    ``path`` (a job config with ``TESTS``, a list of cases, or an object with ``TESTS``); the names updated."""
    import json_source_map

    file = Path(path)
    if file.suffix == ".properties":
        raise CaseFileError(
            f"{path}: --update rewrites JSON; move the cases of a .properties config to a file given with --tests"
        )
    text = file.read_text(encoding="utf-8")
    data = json.loads(text)
    prefix = "" if isinstance(data, list) else "/TESTS"
    cases = data if isinstance(data, list) else data.get("TESTS")
    if isinstance(cases, str):
        raise CaseFileError(f"{path}: TESTS is JSON text inside a string; --update rewrites a JSON array of cases")
    places = json_source_map.calculate(text)
    edits: list[tuple[int, int, str]] = []
    done = []
    for i, case in enumerate(cases or []):
        name = case.get("NAME")
        if name not in updates:
            continue
        records, counts = updates[name]
        at = f"{prefix}/{i}"
        expected = places.get(f"{at}/EXPECTED")
        if expected is not None:
            old = text[expected.value_start.position : expected.value_end.position]
            indent = _indent(text, expected.key_start.position)
            edits.append((expected.value_start.position, expected.value_end.position, _render(records, indent, old)))
        else:  # a new key after the case's last one
            last = max((p for k, p in places.items() if _child(k, at)), key=lambda p: p.value_end.position)
            indent = _indent(text, last.key_start.position)
            value = _render(records, indent, "\n")
            edits.append((last.value_end.position, last.value_end.position, f',\n{indent}"EXPECTED": {value}'))
        for key, name_of in COUNTS.items():
            place = places.get(f"{at}/{key}")
            if place is not None:
                edits.append((place.value_start.position, place.value_end.position, str(counts[name_of])))
        done.append(name)
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    json.loads(text)  # what is written reads back
    file.write_text(text, encoding="utf-8")
    return done


def _child(pointer: str, parent: str) -> bool:
    return pointer.startswith(parent + "/") and "/" not in pointer[len(parent) + 1 :]


def _indent(text: str, position: int) -> str:
    line_start = text.rfind("\n", 0, position) + 1
    return re.match(r"[ \t]*", text[line_start:]).group(0)


def _render(records: dict[str, list[dict[str, Any]]], indent: str, old: str) -> str:
    """The new ``EXPECTED`` value: on one line where the old one was, else one record per line."""
    if "\n" not in old:
        return json.dumps(records, ensure_ascii=False)
    step = "  " if not indent or indent[0] == " " else "\t"
    inner = indent + step
    if len(records) == 1:
        ((sink, rows),) = records.items()
        return "{" + json.dumps(sink) + ": " + _rows(rows, indent, inner) + "}"
    entries = [f"{inner}{json.dumps(sink)}: {_rows(rows, inner, inner + step)}" for sink, rows in records.items()]
    return "{\n" + ",\n".join(entries) + f"\n{indent}}}"


def _rows(rows: list[dict[str, Any]], indent: str, inner: str) -> str:
    if not rows:
        return "[]"
    return "[\n" + ",\n".join(inner + json.dumps(r, ensure_ascii=False) for r in rows) + f"\n{indent}]"

"""``dagger test --update`` rewrites only the values it must: each updated case's EXPECTED and stated counts,
where they stand in the file; every other byte stays."""

from __future__ import annotations

import json

import pytest

from dagger.testing.loading import CaseFileError
from dagger.testing.update import update_file

CONFIG = """{
  "FLINK_JOB_ID": "x",
  "TESTS": [
    {
      "NAME": "first",
      "INPUT": {"t": [{"a": 1}]},
      "EXPECTED": {"SINK": [
        {"a": 2}
      ]},
      "EXPECTED_LATE": 5
    },
    {"NAME": "second", "INPUT": {"t": []}, "EXPECTED": {"SINK": []}},
    {
      "NAME": "third",
      "INPUT": {"t": []},
      "EXPECTED_INVALID": 0
    }
  ]
}
"""

COUNTS = {"dead_letters": 0, "invalid": 2, "late": 1}


def test_a_multi_line_expectation_is_rewritten_one_record_per_line_and_nothing_else_changes(tmp_path):
    path = tmp_path / "job.json"
    path.write_text(CONFIG)
    done = update_file(str(path), {"first": ({"SINK": [{"a": 1, "b": "é"}, {"a": 3}]}, COUNTS)})
    assert done == ["first"]
    assert path.read_text() == CONFIG.replace(
        '"EXPECTED": {"SINK": [\n        {"a": 2}\n      ]},\n      "EXPECTED_LATE": 5',
        '"EXPECTED": {"SINK": [\n        {"a": 1, "b": "é"},\n        {"a": 3}\n      ]},\n      "EXPECTED_LATE": 1',
    )


def test_a_one_line_expectation_stays_on_its_line(tmp_path):
    path = tmp_path / "job.json"
    path.write_text(CONFIG)
    update_file(str(path), {"second": ({"SINK": [{"a": 1}]}, COUNTS)})
    assert path.read_text() == CONFIG.replace('"EXPECTED": {"SINK": []}}', '"EXPECTED": {"SINK": [{"a": 1}]}}')


def test_a_case_without_expected_records_gains_them_after_its_last_key(tmp_path):
    path = tmp_path / "job.json"
    path.write_text(CONFIG)
    update_file(str(path), {"third": ({"SINK": [{"a": 1}], "other": []}, COUNTS)})
    text = path.read_text()
    assert text == CONFIG.replace(
        '      "EXPECTED_INVALID": 0\n',
        '      "EXPECTED_INVALID": 2,\n      "EXPECTED": {\n        "SINK": [\n          {"a": 1}\n        ],\n'
        '        "other": []\n      }\n',
    )
    assert json.loads(text)["TESTS"][2]["EXPECTED"] == {"SINK": [{"a": 1}], "other": []}


def test_a_file_of_cases_and_a_properties_config(tmp_path):
    cases = tmp_path / "cases.json"
    cases.write_text('[{"NAME": "n", "INPUT": {}, "EXPECTED": {"SINK": [{"a": 0}]}}]\n')
    update_file(str(cases), {"n": ({"SINK": [{"a": 7}]}, COUNTS)})
    assert cases.read_text() == '[{"NAME": "n", "INPUT": {}, "EXPECTED": {"SINK": [{"a": 7}]}}]\n'
    properties = tmp_path / "job.properties"
    properties.write_text("TESTS=[]\n")
    with pytest.raises(CaseFileError, match="move the cases of a .properties config to a file given with --tests"):
        update_file(str(properties), {"n": ({}, COUNTS)})

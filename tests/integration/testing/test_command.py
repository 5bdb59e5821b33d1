"""`dagger test` on real job configs: every example's cases pass, a wrong expectation fails with its diff, late
data and undecodable records are what the cases say, and the exit codes are the documented ones. Spark runs the
cases in the test process's session (the CLI's own process for the exit-code tests)."""

from __future__ import annotations

import argparse
import copy
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dagger.plugins.transformer import Transformer, TransformerArguments, register_transformer
from tests.conftest import ROOT, dagger

pytestmark = pytest.mark.integration

#: how many plans the broken transformer below was part of: state in a Python global, which a restart loses
PLANS = {"count": 0}


class PlanCountTransformer(Transformer):
    """Deliberately broken, for the restore check's test only: it keeps state in a Python global (the number of
    plans it was part of) and writes it into every row, so a job restarted from its checkpoint writes other
    values than the same job run in one go."""

    name = "PlanCountTransformer"

    def transform(self, df):
        from pyspark.sql import functions as F

        PLANS["count"] += 1
        return df.withColumn("plans", F.lit(PLANS["count"]))


register_transformer("PlanCountTransformer", TransformerArguments, PlanCountTransformer)

QUICKSTART = ROOT / "configs" / "quickstart.json"
LOOKUP = ROOT / "configs" / "customer_lookup.json"
EXAMPLES = sorted(p for p in (ROOT / "configs").glob("*.json") if "TESTS" in json.loads(p.read_text()))


def run(config: Path, tests: list | None = None, tmp_path: Path | None = None, **flags) -> tuple[int, list[str]]:
    """``dagger test`` in this process (the session the ``spark`` fixture started); exit code and output lines."""
    from dagger.testing.command import run_tests

    tests_file = Path(flags["tests_file"]) if "tests_file" in flags else None
    if tests is not None:
        tests_file = tmp_path / "cases.json"
        tests_file.write_text(json.dumps(tests, indent=2))
    args = argparse.Namespace(
        config=str(config),
        tests=str(tests_file) if tests_file else None,
        k=flags.get("k"),
        overrides=flags.get("overrides", []),
        verbose=False,
        update=flags.get("update", False),
        restore_check=flags.get("restore_check", False),
    )
    out = io.StringIO()
    code = run_tests(args, out)
    return code, out.getvalue().splitlines()


def quickstart_cases() -> list[dict]:
    return copy.deepcopy(json.loads(QUICKSTART.read_text())["TESTS"])


@pytest.mark.parametrize("config", EXAMPLES, ids=lambda p: p.name)
def test_every_example_configs_cases_pass(spark, config):
    code, lines = run(config)
    cases = len(json.loads(config.read_text())["TESTS"])
    assert lines[-1] == f"{cases} passed, 0 failed", "\n".join(lines)
    assert code == 0
    assert sum(line.startswith("PASS  ") for line in lines) == cases


def test_a_wrong_expectation_fails_with_the_diff_of_the_fields(spark, tmp_path):
    case = quickstart_cases()[0]
    case["EXPECTED"]["SINK"][0]["booking_count"] = 3  # jakarta's window holds 2 bookings
    del case["EXPECTED"]["SINK"][1]  # bandung's window is written and not expected
    code, lines = run(QUICKSTART, [case], tmp_path)
    assert code == 1
    assert lines[0].startswith("FAIL  counts bookings per area and minute (")
    text = "\n".join(lines)
    assert "booking_count: expected 3, got 2" in text
    assert '+ unexpected: {"service_area_id": "bandung", "booking_count": 1' in text
    assert lines[-1] == "0 passed, 1 failed"


def test_update_writes_what_the_job_produced_and_the_case_passes_after(spark, tmp_path):
    cases = quickstart_cases()
    cases[0]["EXPECTED"]["SINK"][0]["booking_count"] = 3
    cases[2]["EXPECTED_INVALID"] = 4
    partial = copy.deepcopy(cases[0])  # compares two fields, in the other order; one record's count is wrong
    partial.update(NAME="counts only", PARTIAL=True)
    partial["EXPECTED"]["SINK"] = [{"service_area_id": "bandung", "booking_count": 5}, {"service_area_id": "jakarta"}]
    code, lines = run(QUICKSTART, [cases[0], cases[2], partial], tmp_path)
    assert (code, lines[-1]) == (1, "0 passed, 3 failed")
    before = (tmp_path / "cases.json").read_text()
    code, lines = run(QUICKSTART, None, tmp_path, update=True, tests_file=str(tmp_path / "cases.json"))
    assert lines[-1] == "0 passed, 0 failed, 3 updated", "\n".join(lines)
    assert code == 0
    after = (tmp_path / "cases.json").read_text()
    cases[0]["EXPECTED"]["SINK"][0]["booking_count"] = 2
    cases[2]["EXPECTED_INVALID"] = 1
    # the partial case keeps its order and compares the fields it listed, now with what was written
    counts = [{"service_area_id": "bandung", "booking_count": 1}, {"service_area_id": "jakarta", "booking_count": 2}]
    partial["EXPECTED"]["SINK"] = counts
    assert json.loads(after) == [cases[0], cases[2], partial]
    assert after.split('"EXPECTED"')[0] == before.split('"EXPECTED"')[0]  # up to the first expectation, as it was
    code, lines = run(QUICKSTART, None, tmp_path, tests_file=str(tmp_path / "cases.json"))
    assert (code, lines[-1]) == (0, "3 passed, 0 failed"), "\n".join(lines)


def test_an_unmocked_lookup_fails_the_case_with_the_request_shown(spark, tmp_path):
    case = json.loads(LOOKUP.read_text())["TESTS"][0]
    case["MOCKS"] = case["MOCKS"][:1]  # c-9's lookup is not answered
    case["EXPECTED"]["SINK"] = case["EXPECTED"]["SINK"][:1]
    code, lines = run(LOOKUP, [case], tmp_path)
    text = "\n".join(lines)
    assert code == 1, text
    assert "HTTP.0: no mock answers GET http://customers.internal:8080/customers/c-9" in text
    assert lines[-1] == "0 passed, 1 failed"


def test_postgres_elasticsearch_and_grpc_lookups_are_answered_from_the_mocks(spark, tmp_path):
    config = json.loads(LOOKUP.read_text())
    common = {"connect_timeout": "500", "stream_timeout": "1000", "capacity": "4", "fail_on_errors": False}
    common["retain_response_type"] = True  # no proto types the answers: each value keeps its JSON type
    config["PROCESSOR_POSTPROCESSOR_CONFIG"]["external_source"] = {
        "pg": [
            {
                "host": "crm.internal",
                "port": "5432",
                "user": "reader",
                "password": "unused",
                "database": "crm",
                "query_pattern": "select name from customers where id = '%s'",
                "query_variables": "customer_id",
                "idle_timeout": "60000",
                "output_mapping": {"customer_name": "name"},
                **common,
            }
        ],
        "es": [
            {
                "host": "search.internal",
                "port": "9200",
                "endpoint_pattern": "/customers/_doc/%s",
                "endpoint_variables": "customer_id",
                "socket_timeout": "1000",
                "retry_timeout": "1000",
                "output_mapping": {"customer_tier": {"path": "$._source.tier"}},
                **common,
            }
        ],
        "grpc": [
            {
                "endpoint": "customers.internal",
                "service_port": "8980",
                "grpc_stencil_url": str(ROOT / "descriptors" / "lookup.desc"),
                "grpc_method_url": "dagger.examples.CustomerService/GetCustomer",
                "grpc_request_proto_schema": "dagger.examples.CustomerRequest",
                "grpc_response_proto_schema": "dagger.examples.CustomerReply",
                "request_pattern": "{'customer_id': '%s', 'fields': ['age']}",
                "request_variables": "customer_id",
                "output_mapping": {"customer_age": {"path": "$.age"}},
                **common,
            }
        ],
    }
    case = config["TESTS"][0]
    case["MOCKS"] = [
        {"QUERY": "select name from customers where id = 'c-7'", "RESPONSE": [{"name": "Ayu"}]},
        {"QUERY": "select name from customers where id = 'c-9'", "RESPONSE": []},
        {"REQUEST": "GET http://search.internal:9200/customers/_doc/c-7", "RESPONSE": {"_source": {"tier": "gold"}}},
        {"REQUEST": "GET http://search.internal:9200/customers/_doc/c-9", "STATUS": 404, "RESPONSE": {}},
        {
            "REQUEST": "dagger.examples.CustomerService/GetCustomer",
            "BODY": {"customerId": "c-7", "fields": ["age"]},  # compared as messages: the JSON names do
            "RESPONSE": {"customer_id": "c-7", "age": 31},
        },
        {
            "REQUEST": "dagger.examples.CustomerService/GetCustomer",
            "BODY": {"customer_id": "c-9", "fields": ["age"]},
            "STATUS": "NOT_FOUND",
        },
    ]
    case["EXPECTED"]["SINK"][0]["customer_age"] = 31
    job = tmp_path / "job.json"
    job.write_text(json.dumps(config))
    code, lines = run(job, None, tmp_path)
    assert (code, lines[-1]) == (0, "1 passed, 0 failed"), "\n".join(lines)
    case["MOCKS"] = case["MOCKS"][1:]  # c-7's query is not answered
    job.write_text(json.dumps(config))
    code, lines = run(job, None, tmp_path)
    text = "\n".join(lines)
    assert code == 1, text
    assert "PG.0: no mock answers the query select name from customers where id = 'c-7'" in text


def test_restore_check_catches_a_job_whose_output_changes_after_a_restart(spark, tmp_path):
    late = quickstart_cases()[1]
    code, lines = run(QUICKSTART, [late], tmp_path, restore_check=True)
    assert (code, lines[-1]) == (0, "1 passed, 0 failed"), "\n".join(lines)  # the quickstart keeps its state right
    config = json.loads(QUICKSTART.read_text())
    config["PROCESSOR_POSTPROCESSOR_ENABLE"] = True
    config["PROCESSOR_POSTPROCESSOR_CONFIG"] = {
        "internal_source": [{"output_field": "*", "type": "sql", "value": "*"}],
        "transformers": [{"transformation_class": "PlanCountTransformer", "transformation_arguments": {}}],
    }
    config["TESTS"] = [{**late, "PARTIAL": True}]  # the broken column is not expected: one run passes
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(config))
    code, lines = run(broken, None, tmp_path)
    assert (code, lines[-1]) == (0, "1 passed, 0 failed"), "\n".join(lines)
    before = PLANS["count"]
    code, lines = run(broken, None, tmp_path, restore_check=True)
    text = "\n".join(lines)
    assert code == 1, text
    assert PLANS["count"] - before == 1 + 4 + 1  # one run, four restarted ones, one of single-record batches
    assert "restore check: run stopped after every micro-batch and restarted from its checkpoint, sink SINK" in text
    assert f"plans: in one run {before + 1}, now " in text
    assert "restore check: run with every record in a micro-batch of its own, sink SINK" in text
    assert lines[-1] == "0 passed, 1 failed"


def test_late_data_is_dropped_only_in_streaming_mode_and_counted(spark, tmp_path):
    late = quickstart_cases()[1]
    wrong = {**copy.deepcopy(late), "NAME": "wrong count", "EXPECTED_LATE": 2}
    # the same records read at once: nothing is late, the jakarta window counts the straggler too
    records = [r for batch in late["INPUT_BATCHES"] for r in batch["data_stream_0"]]
    bounded = {
        "NAME": "bounded",
        "INPUT": {"data_stream_0": records},
        "EXPECTED": {"SINK": [{"service_area_id": "jakarta", "booking_count": 3}, {"booking_count": 2}]},
        "PARTIAL": True,
    }
    bounded_as_streaming = {**copy.deepcopy(bounded), "NAME": "bounded expectation, streamed", "MODE": "streaming"}
    bounded_as_streaming["INPUT_BATCHES"] = bounded_as_streaming.pop("INPUT") and late["INPUT_BATCHES"]
    bounded_as_streaming["EXPECTED"] = {"SINK": [{"service_area_id": "jakarta", "booking_count": 3}]}
    code, lines = run(QUICKSTART, [late, wrong, bounded, bounded_as_streaming], tmp_path)
    text = "\n".join(lines)
    assert code == 1
    assert lines[0].startswith("PASS  drops a booking that arrives after its minute closed")
    assert "FAIL  wrong count" in text and "records dropped as late: expected 2, got 1" in text
    assert any(line.startswith("PASS  bounded (") for line in lines), text
    assert "FAIL  bounded expectation, streamed" in text and "booking_count: expected 3, got 2" in text
    assert lines[-1] == "2 passed, 2 failed"


def test_undecodable_records_follow_the_streams_policy(spark, tmp_path):
    records = [
        {"service_area_id": "jakarta", "event_timestamp": "2026-11-22T10:00:10Z"},
        {"_RAW_BASE64": "CP8gbm90IGEgYm9va2luZw=="},
    ]
    window = {"service_area_id": "jakarta", "booking_count": 1}
    failing = {
        "NAME": "fails",
        "INPUT": {"data_stream_0": records},
        "EXPECTED_ERROR": "partition 0 offset 1 cannot be decoded",
    }
    code, lines = run(QUICKSTART, [failing], tmp_path, overrides=["STREAMS[0].SOURCE_KAFKA_INVALID_RECORD_POLICY=fail"])
    assert (code, lines[-1]) == (0, "1 passed, 0 failed"), "\n".join(lines)
    dead = {
        "NAME": "dead-lettered",
        "INPUT": {"data_stream_0": records},
        "EXPECTED": {"SINK": [window]},
        "PARTIAL": True,
        "EXPECTED_DEAD_LETTERS": 1,
        "EXPECTED_INVALID": 1,
    }
    wrong = {**copy.deepcopy(dead), "NAME": "two expected", "EXPECTED_DEAD_LETTERS": 2}
    production = tmp_path / "dead-letters"
    overrides = ["STREAMS[0].SOURCE_KAFKA_INVALID_RECORD_POLICY=dead-letter", f"DEAD_LETTER_PATH={production}"]
    code, lines = run(QUICKSTART, [dead, wrong], tmp_path, overrides=overrides)
    assert "dead letters: expected 2, got 1" in "\n".join(lines)
    assert (code, lines[-1]) == (1, "1 passed, 1 failed"), "\n".join(lines)
    assert not production.exists()  # a test's dead letters stay with the test


def test_exit_codes_of_the_command(tmp_path):
    passing = dagger("test", str(QUICKSTART), "-k", "counts bookings")
    assert passing.returncode == 0, passing.stdout + passing.stderr[-2000:]
    assert passing.stdout.splitlines()[-1] == "1 passed, 0 failed"
    cases = quickstart_cases()[:1]
    cases[0]["INPUT"] = {"bookings": cases[0]["INPUT"]["data_stream_0"]}  # no such table
    (tmp_path / "bad.json").write_text(json.dumps(cases))
    invalid = dagger("test", str(QUICKSTART), "--tests", str(tmp_path / "bad.json"))
    assert invalid.returncode == 2
    assert "INPUT names table 'bookings'; the job's tables are data_stream_0" in invalid.stdout
    assert invalid.stdout.splitlines()[-1] == "0 passed, 0 failed, 1 could not run"
    registry = json.loads((ROOT / "configs" / "avro_registry.json").read_text())["TESTS"]
    del registry[0]["SUBJECTS"]
    (tmp_path / "no-subjects.json").write_text(json.dumps(registry))
    unregistered = dagger("test", "configs/avro_registry.json", "--tests", str(tmp_path / "no-subjects.json"))
    assert unregistered.returncode == 2, unregistered.stdout + unregistered.stderr[-2000:]
    assert "reads 'shop-orders-value' (STREAMS[orders].SOURCE_KAFKA_TOPIC_NAMES" in unregistered.stdout
    assert "give each in the case's SUBJECTS" in unregistered.stdout
    (tmp_path / "shape.json").write_text(json.dumps([{"NAME": "x", "INPUT": {}, "EXPECTED": {}, "ORDER": True}]))
    shape = dagger("test", str(QUICKSTART), "--tests", str(tmp_path / "shape.json"))
    assert shape.returncode == 2
    assert "case 'x': ORDER: Extra inputs are not permitted" in shape.stderr


def test_the_pytest_plugin_collects_a_configs_cases_as_items(tmp_path):
    config = json.loads(QUICKSTART.read_text())
    config["TESTS"] = quickstart_cases()[:1] * 2
    config["TESTS"][1] = {**copy.deepcopy(config["TESTS"][0]), "NAME": "a wrong count"}
    config["TESTS"][1]["EXPECTED"]["SINK"][1]["booking_count"] = 7
    (tmp_path / "job.json").write_text(json.dumps(config))
    command = [sys.executable, "-m", "pytest", "-p", "dagger.testing", "-p", "no:cacheprovider", "-q"]
    command += ["--dagger-configs", str(tmp_path / "job.json"), str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 failed, 1 passed" in result.stdout, result.stdout[-3000:]
    assert "case 'a wrong count' of job.json failed:" in result.stdout
    assert "booking_count: expected 7, got 1" in result.stdout
    selected = subprocess.run([*command, "-k", "counts"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert selected.returncode == 0 and "1 passed, 1 deselected" in selected.stdout, selected.stdout[-3000:]


def test_a_bigquery_sink_is_tested_with_no_bigquery(spark, tmp_path):
    case = {**quickstart_cases()[0], "NAME": "to bigquery"}
    overrides = [
        "SINK_TYPE=bigquery",
        "SINK_BIGQUERY_GOOGLE_CLOUD_PROJECT_ID=nowhere",
        "SINK_BIGQUERY_DATASET_NAME=bookings",
        "SINK_BIGQUERY_TABLE_NAME=counts",
        "SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS=dagger.examples.BookingCountMessage",
    ]
    code, lines = run(QUICKSTART, [case], tmp_path, overrides=overrides)
    assert (code, lines[-1]) == (0, "1 passed, 0 failed"), "\n".join(lines)
    case["EXPECTED"]["SINK"][1]["total_distance_in_kms"] = 5.0
    code, lines = run(QUICKSTART, [case], tmp_path, overrides=overrides)
    assert "total_distance_in_kms: expected 5.0, got 4.0" in "\n".join(lines)
    assert (code, lines[-1]) == (1, "0 passed, 1 failed")

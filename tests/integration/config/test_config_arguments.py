"""The tests of tests/unit/config/test_config_arguments.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

import json

import pytest

from tests.unit.config.test_config import STREAM
from tests.unit.config.test_config_arguments import JOB, encoded


@pytest.mark.integration
def test_dagger_validate_takes_every_form(stencil, broker, tmp_path):
    from tests.conftest import dagger

    job = {
        **JOB,
        "SCHEMA_REGISTRY_STENCIL_URLS": stencil.url("examples.desc"),
        "SINK_KAFKA_BROKERS": broker.bootstrap,
        "STREAMS": json.dumps([{**STREAM, "SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS": broker.bootstrap}]),
    }
    encoded_run = dagger("validate", "--encodedArgs", encoded(job), "--FLINK_JOB_ID", "from-args")
    assert encoded_run.returncode == 0, encoded_run.stderr
    assert "config: OK (1 stream(s), sink(s): kafka (kafka))" in encoded_run.stdout
    missing = dagger("validate")
    assert missing.returncode == 2 and "no job config: give a file" in missing.stderr

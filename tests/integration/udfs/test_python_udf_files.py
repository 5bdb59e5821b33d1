"""The tests of tests/unit/udfs/test_python_udf_files.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

import json
import zipfile

import pytest

from testing.gcs_server import GcsServer
from testing.produce import produce
from testing.samples import bookings
from tests.conftest import START, job, json_sink, kafka_stream, output_rows, run_job
from tests.unit.udfs.test_python_udf_files import UDF_USING_EVERYTHING, make_wheel


@pytest.mark.integration
def test_udf_file_from_gcs_with_an_archive_and_requirements(spark, broker, stencil, topic, tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels)
    monkeypatch.setenv("DAGGER_CACHE_DIR", str(tmp_path / "cache"))
    archive = tmp_path / "words.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("greeting.txt", "hello")
    source, out = topic("udf-files-in"), topic("udf-files-out")
    produce(broker.bootstrap, source, ((None, v) for v in bookings(4, START)))
    with GcsServer("team-udfs") as gcs:
        for key, value in gcs.env.items():
            monkeypatch.setenv(key, value)
        files = gcs.put("udfs/greet.py", UDF_USING_EVERYTHING.encode())
        requirements = gcs.put("udfs/requirements.txt", f"--no-index\n--find-links {wheels}\ntinypkg==0.1\n".encode())
        udf_config = {
            "PYTHON_FILES": files,
            "PYTHON_ARCHIVES": f"{archive}#words",
            "PYTHON_REQUIREMENTS": requirements,
            "PYTHON_FN_EXECUTION_ARROW_BATCH_SIZE": "5000",
        }
        data = job(
            stencil,
            [kafka_stream(broker, source)],
            "SELECT order_number, GREET(customer_id) AS greeting FROM data_stream_0",
            PYTHON_UDF_ENABLE="true",
            PYTHON_UDF_CONFIG=json.dumps(udf_config),
            **json_sink(broker, out),
        )
        manager, query = run_job(spark, data, tmp_path / "cp")
    assert query.exception() is None, query.exception()
    rows = sorted(json.loads(m.value())["greeting"] for m in output_rows(broker, manager, out, 4))
    assert rows == sorted(f"hello c{i % 5}!" for i in range(4))
    assert spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") == "5000"
    installed = list((tmp_path / "cache" / "requirements").glob("*/tinypkg/__init__.py"))
    assert len(installed) == 1

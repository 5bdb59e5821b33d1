"""Protobuf jobs in Spark's real-time mode (`dagger run --real-time`): Dagger's own format decoded and encoded in the
JVM (dagger/jvm/Proto*.java), plain and in Confluent's wire format, on a topic with more partitions than the
machine has cores; a record that does not decode follows the stream's policy; the sink's librdkafka settings
reach Spark's Kafka sink translated for the Java client, through SASL_SSL."""

from __future__ import annotations

import json
import signal
import time

import pytest
from google.protobuf import message_factory

from testing.produce import consume_all, produce, topic_size
from testing.samples import bookings, example_descriptors
from tests.conftest import START, dagger, job, kafka_sink, kafka_stream, validate_here
from tests.integration.kafka.test_realtime import _start_real_time, _wait_for
from tests.integration.kafka.test_security import PASSWORD, STORE_PASSWORD, USER, Secured, _sasl
from tests.integration.kafka.test_security import ca as ca  # the fixture: a throwaway CA

pytestmark = pytest.mark.integration
SQL = (
    "SELECT order_number, service_type, driver_pickup_location AS pickup, event_timestamp, amount_paid_by_cash "
    "FROM data_stream_0 WHERE amount_paid_by_cash < 500"
)
SUMMARY = "dagger.examples.BookingSummaryMessage"
DESCRIPTORS = example_descriptors()
Summary = message_factory.GetMessageClass(DESCRIPTORS.find_message(SUMMARY))
Booking = message_factory.GetMessageClass(DESCRIPTORS.find_message("dagger.examples.BookingLogMessage"))


def _expected(values: list[bytes]) -> list[tuple]:
    """What the SQL makes of the bookings: (order, service, pickup name, event time, amount), sorted."""
    out = []
    for value in values:
        b = Booking.FromString(value)
        if b.amount_paid_by_cash < 500:
            out.append(
                (
                    b.order_number,
                    Booking.DESCRIPTOR.fields_by_name["service_type"].enum_type.values_by_number[b.service_type].name,
                    b.driver_pickup_location.name,
                    b.event_timestamp.ToMicroseconds(),
                    b.amount_paid_by_cash,
                )
            )
    return sorted(out)


def _written(records: list) -> list[tuple]:
    out = []
    for record in records:
        s = Summary.FromString(record)
        service = Summary.DESCRIPTOR.fields_by_name["service_type"].enum_type.values_by_number[s.service_type].name
        out.append((s.order_number, service, s.pickup.name, s.event_timestamp.ToMicroseconds(), s.amount_paid_by_cash))
    return sorted(out)


def _run(config_path, checkpoint, log, wait) -> str:
    process = _start_real_time(config_path, checkpoint, log)
    try:
        wait()
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(120)
    output = log.read_text()
    assert code == 0, output[-3000:]
    return output


def test_a_protobuf_job_runs_in_real_time_mode_on_more_partitions_than_cores(spark, broker, stencil, topic, tmp_path):
    source, out = topic("rtp-in", 4), topic("rtp-out")
    values = bookings(600, START)
    broken = [b"\xff\xff\xff not a booking", b"\x0a\x05ab"]
    produce(broker.bootstrap, source, ((None, v) for v in values[:300] + broken), partitions=4)
    data = job(
        stencil,
        [kafka_stream(broker, source, SOURCE_KAFKA_INVALID_RECORD_POLICY="drop")],
        SQL,
        SPARK_REALTIME_CHECKPOINT_INTERVAL_MS="5000",
        **kafka_sink(broker, out, SUMMARY),
    )
    path, log = tmp_path / "job.json", tmp_path / "run.log"
    path.write_text(json.dumps(data))
    validated = validate_here(spark, str(path), "--real-time")
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "it holds 4 task slot(s) while it runs, one per Kafka partition (data_stream_0 4)" in validated.stdout
    assert "`dagger run` starts its local session with local[4]" in validated.stdout
    expected = _expected(values)

    def wait() -> None:
        _wait_for(broker.bootstrap, out, len(_expected(values[:300])))
        produce(broker.bootstrap, source, ((None, v) for v in values[300:]), partitions=4)  # while it runs
        _wait_for(broker.bootstrap, out, len(expected))
        deadline = time.monotonic() + 60  # the batch that read them ends at the next checkpoint interval
        while "invalid records {'data_stream_0': 2}" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.5)

    output = _run(path, tmp_path / "cp", log, wait)
    assert "in real-time mode" in output
    assert "the local session runs local[4]" in output
    assert _written([m.value() for m in consume_all(broker.bootstrap, out, expected=len(expected))]) == expected
    assert topic_size(broker.bootstrap, out) == len(expected)  # each once: the two broken records dropped
    assert "invalid records {'data_stream_0': 2}" in output, output[-2000:]  # counted, as in micro-batches


def test_a_protobuf_record_that_does_not_decode_stops_a_real_time_job_naming_it(broker, stencil, topic, tmp_path):
    source, out = topic("rtp-bad"), topic("rtp-bad-out")
    produce(broker.bootstrap, source, ((None, v) for v in [*bookings(3, START), b"\xff\xff not a booking"]))
    data = job(
        stencil, [kafka_stream(broker, source)], SQL, SPARK_REALTIME_CHECKPOINT_INTERVAL_MS="5000",
        **kafka_sink(broker, out, SUMMARY),
    )  # fmt: skip
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    ran = dagger("run", str(path), "--real-time", "--checkpoint-dir", str(tmp_path / "cp"), timeout=240)
    assert ran.returncode == 1, ran.stderr[-3000:]
    last = ran.stderr.strip().splitlines()[-1]
    assert f"record at topic {source} partition 0 offset 3 cannot be decoded" in last, ran.stderr[-3000:]
    assert "not a valid dagger.examples.BookingLogMessage" in last
    assert "Traceback" not in ran.stderr


def test_confluent_framed_protobuf_in_and_out_in_real_time_mode(broker, stencil, topic, tmp_path, schema_registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    source, out = topic("rtc-in", 2), topic("rtc-out")
    client = SchemaRegistryClient({"url": schema_registry.url})
    serializer = ProtobufSerializer(Booking, client, {"use.deprecated.format": False})
    values = bookings(200, START)
    framed = [serializer(Booking.FromString(v), SerializationContext(source, MessageField.VALUE)) for v in values]
    produce(broker.bootstrap, source, ((None, v) for v in framed), partitions=2)
    stream = kafka_stream(broker, source, INPUT_SCHEMA_WIRE_FORMAT="confluent")
    data = job(
        stencil,
        [stream],
        SQL,
        SPARK_REALTIME_CHECKPOINT_INTERVAL_MS="5000",
        SCHEMA_REGISTRY_CONFLUENT_URL=schema_registry.url,
        **kafka_sink(broker, out, SUMMARY, SINK_KAFKA_WIRE_FORMAT="confluent", SINK_KAFKA_SCHEMA_AUTO_REGISTER="true"),
    )
    path, log = tmp_path / "job.json", tmp_path / "run.log"
    path.write_text(json.dumps(data))
    expected = _expected(values)
    _run(path, tmp_path / "cp", log, lambda: _wait_for(broker.bootstrap, out, len(expected)))
    records = [m.value() for m in consume_all(broker.bootstrap, out, expected=len(expected))]
    registered = client.get_latest_version(f"{out}-value")
    assert {int.from_bytes(r[1:5], "big") for r in records} == {registered.schema_id}
    reader = ProtobufDeserializer(Summary, {"use.deprecated.format": False})
    read = [reader(r, SerializationContext(out, MessageField.VALUE)) for r in records]
    assert _written([m.SerializeToString() for m in read]) == expected


def test_a_real_time_job_logs_in_through_sasl_ssl_with_the_sinks_librdkafka_settings(stencil, tmp_path, ca):
    """The stream's Java client keys reach Spark's Kafka source as they are; the sink's ``SINK_KAFKA_PRODUCER_CONFIG``
    (librdkafka's names: a PEM CA file, SCRAM user and password) reaches Spark's Kafka sink translated for the Java
    client (a PEM trust store, a JAAS login), and no secret is printed."""
    truststore = ca.truststore("JKS", STORE_PASSWORD)
    with Secured(ca, sasl=True) as secured:
        source, out = secured.topic("rts-in"), secured.topic("rts-out")
        values = bookings(40, START)
        secured.produce(source, values)
        stream = kafka_stream(
            secured,
            source,
            SOURCE_KAFKA_CONSUMER_CONFIG_SECURITY_PROTOCOL="SASL_SSL",
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_LOCATION=str(truststore),
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_TYPE="JKS",
            SOURCE_KAFKA_CONSUMER_CONFIG_SSL_TRUSTSTORE_PASSWORD=STORE_PASSWORD,
            SOURCE_KAFKA_CONSUMER_CONFIG_AUTO_OFFSET_RESET="earliest",
            **_sasl("SCRAM-SHA-512"),
        )
        producer = {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(ca.cert),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": USER,
            "sasl.password": PASSWORD,
        }
        data = job(
            stencil,
            [stream],
            SQL,
            SPARK_REALTIME_CHECKPOINT_INTERVAL_MS="5000",
            **kafka_sink(secured, out, SUMMARY, SINK_KAFKA_PRODUCER_CONFIG=json.dumps(producer)),
        )
        path, log = tmp_path / "job.json", tmp_path / "run.log"
        path.write_text(json.dumps(data))
        expected = _expected(values)
        # the job is given the secured listener only; the test counts through the broker's plaintext one
        output = _run(path, tmp_path / "cp", log, lambda: _wait_for(secured.broker.bootstrap, out, len(expected)))
        written = _written([m.value() for m in secured.read(out, len(expected))])
    assert written == expected
    assert "in real-time mode" in output
    assert PASSWORD not in output and STORE_PASSWORD not in output

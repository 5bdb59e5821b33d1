"""The columnar partition fetchers (native C helper and confluent-kafka fallback) against the real broker."""

from __future__ import annotations

import logging
import uuid

import numpy as np
import pyarrow as pa
import pytest

from dagger.kafka import native as arrow_kafka
from dagger.kafka.source import fetcher as kafka_fetcher
from dagger.kafka.source.fetcher import ConfluentFetcher, FetchError, NativeFetcher

pytestmark = pytest.mark.integration

KINDS = ["native", "confluent"]


def _records(n: int) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, timestamp ms): record 3 is a tombstone, record 5 has no key, one value is empty."""
    out = []
    for i in range(n):
        key = None if i == 5 else f"k{i}".encode()
        value = None if i == 3 else (b"" if i == 7 else f"value-{i}-".encode() * (i % 4 + 1))
        out.append((key, value, 1_700_000_000_000 + i))
    return out


@pytest.fixture
def filled(broker, topic):
    from confluent_kafka import Producer

    name = topic("batch")
    records = _records(40)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": "5"})
    for key, value, stamp in records:
        producer.produce(name, key=key, value=value, timestamp=stamp)
    assert producer.flush(30) == 0
    return name, records


def _config(broker) -> dict[str, str]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "group.id": f"g-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": "false",
        "enable.partition.eof": "true",
        "fetch.wait.max.ms": "50",
    }


def _open(kind: str, broker, name: str, start: int):
    if kind == "native":
        library = arrow_kafka.native_library()
        assert library is not None, "the C helper did not build: is a C compiler (gcc) installed?"
        return NativeFetcher(library, _config(broker), name, 0, start)
    return ConfluentFetcher(_config(broker), name, 0, start)


def _rows(chunk) -> list[tuple]:
    columns = (chunk.offsets.tolist(), chunk.keys.to_pylist(), chunk.values.to_pylist(), chunk.timestamps.tolist())
    return list(zip(*columns, strict=True))


def _read(fetcher, end: int, max_records: int) -> tuple[list, bool]:
    """All records below ``end`` as (offset, key, value, timestamp), and whether end-of-partition was seen."""
    rows, eof = [], False
    for _ in range(200):
        chunk = fetcher.fetch(max_records, 0.5, end)
        assert chunk.offsets.dtype == np.int64 and len(chunk.values) == len(chunk.keys) == len(chunk)
        rows += _rows(chunk)
        eof = eof or chunk.eof
        if (rows and rows[-1][0] == end - 1) or chunk.eof:
            break
    fetcher.close()
    return rows, eof


@pytest.mark.parametrize("kind", KINDS)
def test_a_range_is_read_exactly_with_keys_tombstones_and_timestamps(broker, filled, kind):
    name, records = filled
    rows, _ = _read(_open(kind, broker, name, 2), 30, 7)
    assert [r[0] for r in rows] == list(range(2, 30))
    assert [(k, v, t) for _, k, v, t in rows] == records[2:30]
    assert rows[1][2] is None and rows[3][1] is None and rows[5][2] == b""


@pytest.mark.parametrize("kind", KINDS)
def test_reading_past_the_last_record_reports_end_of_partition(broker, filled, kind):
    name, records = filled
    rows, eof = _read(_open(kind, broker, name, 35), 1_000, 1_000)
    assert eof
    assert [r[0] for r in rows] == list(range(35, len(records)))


def test_both_fetchers_give_identical_chunks(broker, filled):
    name, _ = filled
    native, _ = _read(_open("native", broker, name, 0), 40, 1_000)
    portable, _ = _read(_open("confluent", broker, name, 0), 40, 1_000)
    assert native == portable and len(native) == 40


def test_a_chunk_keeps_only_the_masked_records(broker, filled):
    name, records = filled
    fetcher = _open("native", broker, name, 0)
    chunk = fetcher.fetch(20, 5.0, 20)
    fetcher.close()
    assert len(chunk) > 0
    kept = chunk.take(chunk.offsets % 2 == 1)
    expected = [(i, *records[i]) for i in chunk.offsets.tolist() if i % 2 == 1]
    assert _rows(kept) == expected


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_client_setting_is_a_fetch_error_naming_it(broker, kind):
    config = _config(broker) | {"fetch.wait.max.mz": "50"}
    with pytest.raises(FetchError, match="fetch.wait.max.mz"):
        if kind == "native":
            NativeFetcher(arrow_kafka.native_library(), config, "any", 0, 0)
        else:
            ConfluentFetcher(config, "any", 0, 0)


def test_without_a_compiler_the_reader_falls_back_with_one_warning(monkeypatch, tmp_path, broker, filled, caplog):
    monkeypatch.setattr(arrow_kafka, "_LIBRARY", [])
    monkeypatch.setenv("DAGGER_NATIVE_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "/bin/false")
    with caplog.at_level(logging.WARNING, logger="dagger.kafka.native"):
        assert arrow_kafka.native_library() is None
        assert arrow_kafka.native_library() is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "/bin/false" in warnings[0] and "confluent-kafka" in warnings[0]
    fetcher = kafka_fetcher.open_fetcher(_config(broker), filled[0], 0, 0)
    assert isinstance(fetcher, ConfluentFetcher)
    rows, _ = _read(fetcher, 4, 100)
    assert [r[0] for r in rows] == [0, 1, 2, 3]


def test_the_switch_turns_the_native_reader_off(monkeypatch):
    monkeypatch.setattr(arrow_kafka, "_LIBRARY", [])
    monkeypatch.setenv("DAGGER_KAFKA_NATIVE", "0")
    assert arrow_kafka.native_library() is None


def test_the_helper_is_compiled_once_and_cached(monkeypatch, tmp_path):
    monkeypatch.setattr(arrow_kafka, "_LIBRARY", [])
    monkeypatch.setenv("DAGGER_NATIVE_CACHE", str(tmp_path))
    assert arrow_kafka.native_library() is not None
    built = list(tmp_path.glob("arrow_kafka-*.so"))
    assert len(built) == 1
    monkeypatch.setattr(arrow_kafka, "_LIBRARY", [])
    monkeypatch.setenv("CC", "/bin/false")  # a second load must not compile again
    assert arrow_kafka.native_library() is not None


# -- producers ----------------------------------------------------------------------------------------------


def _producer(kind: str, config: dict, name: str):
    from dagger.kafka.producer import ConfluentProducer, NativeProducer

    if kind == "native":
        return NativeProducer(arrow_kafka.native_library(), config, name)
    return ConfluentProducer(config, name)


@pytest.mark.parametrize("kind", KINDS)
def test_producers_write_values_and_keys_in_order_through_a_full_local_queue(broker, topic, kind):
    name = topic("produce")
    values = pa.array([f"v{i}".encode() * (i % 3) for i in range(3_000)], pa.binary())  # some empty values
    keys = pa.array([None if i % 7 == 0 else f"k{i}".encode() for i in range(3_000)], pa.binary())
    # a 100-record local queue forces the wait-and-retry path many times over
    producer = _producer(kind, {"bootstrap.servers": broker.bootstrap, "queue.buffering.max.messages": "100"}, name)
    producer.produce(values[:1_000], keys[:1_000], partition=0)
    producer.produce(values[1_000:], keys[1_000:])  # sliced arrays, the default partitioner
    assert producer.flush(30) == 0
    assert producer.take_failed() == (0, "")
    producer.close()
    rows, _ = _read(_open("native", broker, name, 0), 3_000, 10_000)
    assert [r[0] for r in rows] == list(range(3_000))
    assert [r[2] for r in rows] == values.to_pylist()
    assert [r[1] for r in rows] == keys.to_pylist()


@pytest.mark.parametrize("kind", KINDS)
def test_a_record_over_the_size_limit_is_a_produce_error(broker, topic, kind):
    from dagger.kafka.producer import ProduceError

    producer = _producer(kind, {"bootstrap.servers": broker.bootstrap, "message.max.bytes": "2000"}, topic("big"))
    with pytest.raises(ProduceError, match="(?i)too large"):
        producer.produce(pa.array([b"small", b"x" * 5_000], pa.binary()))
    producer.close(0)


@pytest.mark.parametrize("kind", KINDS)
def test_undeliverable_records_are_counted_with_the_reason(kind):
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = {"bootstrap.servers": f"127.0.0.1:{port}", "message.timeout.ms": "300"}
    producer = _producer(kind, config, "nowhere")
    producer.produce(pa.array([b"a", b"b", b"c"], pa.binary()))
    assert producer.flush(10) == 0
    failed, reason = producer.take_failed()
    assert failed == 3 and "timed out" in reason.lower()
    assert producer.take_failed() == (0, "")
    producer.close(0)


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_producer_setting_is_a_produce_error_naming_it(broker, kind):
    from dagger.kafka.producer import ProduceError

    with pytest.raises(ProduceError, match="linger.mz"):
        _producer(kind, {"bootstrap.servers": broker.bootstrap, "linger.mz": "5"}, "any")


def test_the_kafka_sink_names_the_config_key_a_bad_producer_setting_came_from(broker):
    from dagger.errors import SinkError
    from dagger.kafka.sink import KafkaSink

    sink = KafkaSink("out", {"bootstrap.servers": broker.bootstrap, "linger.mz": "5"}, data_type="JSON")
    with pytest.raises(SinkError, match=r"linger\.mz.*SINK_KAFKA_PRODUCER_CONFIG"):
        sink.writer(0, 0)


def test_the_json_sink_writes_every_double_bit_for_bit(broker):
    """Doubles in their shortest round-trip form (pandas' to_json had rounded them to 10 decimal places:
    -0.0308270677 for -0.030827067669172932), floats as the float's own digits, uint64 decimals exactly."""
    import decimal
    import json
    import struct
    import uuid

    import numpy as np

    from dagger.kafka.sink import KafkaSink
    from testing.produce import consume_all

    topic = f"json-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 1)
    rng = np.random.default_rng(7)
    doubles = [-0.030827067669172932, 0.1 + 0.2, 5e-324, 1.7976931348623157e308, -0.0, 1 / 3, 6.02214076e23]
    doubles += list(rng.standard_normal(40) * 10.0 ** rng.integers(-30, 30, 40))
    floats = np.array(rng.standard_normal(len(doubles)), dtype=np.float32)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(doubles, pa.float64()),
            pa.array(floats, pa.float32()),
            pa.array([decimal.Decimal(2**64 - 1 - i) for i in range(len(doubles))], pa.decimal128(20, 0)),
        ],
        names=["d", "f", "u"],
    )
    sink = KafkaSink(topic, {"bootstrap.servers": broker.bootstrap}, data_type="JSON")
    writer = sink.writer(0, 0)
    writer.write(batch)
    assert writer.flush() == len(doubles)
    rows = [json.loads(m.value()) for m in consume_all(broker.bootstrap, topic, expected=len(doubles))]
    assert [struct.pack("<d", r["d"]) for r in rows] == [struct.pack("<d", d) for d in doubles]
    assert [np.float32(r["f"]).tobytes() for r in rows] == [f.tobytes() for f in floats]
    assert [r["u"] for r in rows] == [2**64 - 1 - i for i in range(len(doubles))]


@pytest.mark.parametrize("kind", KINDS)
def test_a_producer_closed_without_waiting_delivers_nothing_it_still_held(broker, topic, kind):
    """What a sink writer's abort relies on: after a failed task, queued records are dropped, not sent later."""
    from testing.produce import consume_all

    name = topic("abort")
    held = _producer(kind, {"bootstrap.servers": broker.bootstrap, "linger.ms": "5000"}, name)
    held.produce(pa.array([b"dropped"] * 50, pa.binary()))
    held.close(0)
    sent = _producer(kind, {"bootstrap.servers": broker.bootstrap}, name)
    sent.produce(pa.array([b"delivered"], pa.binary()))
    assert sent.flush(30) == 0
    sent.close()
    assert [m.value() for m in consume_all(broker.bootstrap, name, expected=1)] == [b"delivered"]

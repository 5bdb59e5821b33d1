"""Avro records (``INPUT_DATATYPE=AVRO``), decoded in the JVM. One module (about 370 lines, over the 300 aimed
at: the two halves of one hand-over, whose columns the one writes and the other reads).

Two halves, one per side of the Arrow hand-over:

* **In the Python reader** (executors), :class:`AvroFrames` reads the headers of a column of records
  (:mod:`dagger.serde.confluent`; a plain stream has none) and hands Spark the payloads with their writer schema
  ids and coordinates: no Python object per record. Records that are not in the wire format, and ids the
  registry does not know, are invalid there and follow the stream's policy like any undecodable record. An id
  the job did not know when it started, but the registry does, ends the micro-batch with an error that says to
  restart (the next start reads every version of the subject): a schema registered while the job runs is never
  read as invalid.
* **In the JVM**, :func:`avro_table` turns the payloads into the table's columns with Dagger's decoder
  (``dagger/jvm/AvroRows.java``), which reads each writer schema the job knows resolved against the reader
  schema by Avro's rules (a field added with a default, a field removed, ``int`` promoted to ``long``…) straight
  into Spark's rows: 4.4× Spark's ``from_avro`` on nested records, which builds Avro's records first and then
  Spark's slowly (``docs/investigations/spark_nested_rows.md``). ``from_avro`` decodes when Dagger's JVM classes
  are not on the class path. A payload that does not decode makes the row invalid (``fail``: the micro-batch ends
  naming topic, partition and offset).

Why the JVM: Spark's reader decodes each record within its own bytes. The columnar Python readers measured
(``docs/investigations/avro_decoders.md``) read a batch as one Avro container block, where one record with a
byte too many or too few shifts every record after it: arrow-avro (polars-avro) then loops without end, DuckDB
and polars return wrong rows without an error, and fastavro decodes 10× slower than the JVM.
"""

from __future__ import annotations

import datetime as dt
import functools
import io
import json
import logging
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from dagger.errors import DescriptorFetchError
from dagger.formats.avro.types import avro_struct
from dagger.schema.confluent import ConfluentSettings, schema_by_id
from dagger.serde.confluent import HEADER, read_frames
from dagger.serde.decode import DecodeResult, validity_and_rowtime
from dagger.serde.jvm_frames import (
    OFFSET,
    PARTITION,
    PAYLOAD,
    RECORD,
    SCHEMA_ID,
    TOPIC,
    decoded_table,
    frame_columns,
    frames_schema,
)
from dagger.session.pandas_free import lit

__all__ = ["OFFSET", "PARTITION", "PAYLOAD", "SCHEMA_ID", "TOPIC", "AvroFrames", "avro_table", "jvm_rows"]

log = logging.getLogger("dagger")

#: true where the JVM decoded the payload (a field of the reader schema no writer has, default true)
DECODED = "__dagger_decoded"


class UnknownSchemaError(Exception):
    """A record names a schema id the registry has, which the job did not know when it started."""


class AvroFrames:
    """The Python reader's half: headers read, the records' values and ids handed on.

    Parameters
    ----------
    writers:
        Schema id → writer schema (Avro JSON text) the job knows (plain streams: ``{0: schema}``).
    confluent:
        The registry's settings (a :class:`~dagger.schema.confluent.ConfluentSettings`' fields), or None for a
        plain stream (each record is one bare datum).
    rowtime_field:
        The record field that becomes rowtime (only read here by the event-time probe, :meth:`rowtimes`).
    """

    def __init__(
        self,
        writers: dict[int, str],
        reader: str,
        confluent: dict[str, Any] | None,
        rowtime_field: str | None,
        rowtime: str = "rowtime",
    ):
        self.writers = writers
        self.reader = reader
        self.confluent = confluent
        self.rowtime = rowtime
        self.rowtime_source = rowtime_field
        self.spark_schema = frames_schema(rowtime)
        self.arrow_schema = to_arrow_schema(self.spark_schema, timezone="UTC")
        self._known = np.array(sorted(writers), dtype=np.int64)
        self._checked: dict[int, str | None] = {}  # ids looked up in the registry: None, or why invalid
        self._parsed: dict[int, Any] = {}

    def decode(self, values: pa.BinaryArray | list, coordinates: tuple[str, int, Any] | None = None) -> Any:
        """Read ``values``' headers; ``coordinates`` = (topic, partition, offsets) go along for error messages."""

        if not isinstance(values, pa.Array):
            values = pa.array(values, pa.binary())
        n = len(values)
        if self.confluent is None:
            valid = values.is_valid().to_numpy(zero_copy_only=False)
            invalid = [int(i) for i in np.flatnonzero(~valid)]
            reasons = ["record value is null (tombstone)"] * len(invalid)
            ids = pa.array(np.zeros(n, dtype=np.int32))
            payload = values
        else:
            frames = read_frames(values)
            unknown = (frames.ids >= 0) & ~np.isin(frames.ids, self._known)
            for schema_id in np.unique(frames.ids[unknown]):
                why = self._unknown(int(schema_id))
                if why is not None:
                    frames.bad.update({int(i): why for i in np.flatnonzero(frames.ids == schema_id)})
                    frames.ids[frames.ids == schema_id] = -1
            invalid = sorted(frames.bad)
            reasons = [frames.bad[i] for i in invalid]
            ids = pa.array(np.where(frames.ids >= 0, frames.ids, -1).astype(np.int32))
            payload = values  # the JVM's decoder starts past the header

        starts = pa.array(np.full(n, HEADER if self.confluent is not None else 0, dtype=np.int32))
        columns = frame_columns(ids, payload, starts, coordinates, validity_and_rowtime(n, invalid, None))
        return DecodeResult(pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema), invalid, reasons)

    def _unknown(self, schema_id: int) -> str | None:
        """Why records of ``schema_id`` (not known at start) are invalid; raises when the registry has it."""
        if schema_id not in self._checked:
            settings = ConfluentSettings(**self.confluent)
            try:
                entry = schema_by_id(settings, schema_id, "AVRO")
            except LookupError as exc:
                self._checked[schema_id] = f"unknown schema id {schema_id}: {exc}"
            except DescriptorFetchError as exc:
                return f"schema id {schema_id} cannot be looked up: {exc}"  # asked again for the next records
            else:
                raise UnknownSchemaError(
                    f"records carry schema id {schema_id} (subject {', '.join(entry['subjects']) or '?'}), "
                    "registered after the job started. Restart the job to read them: it resumes from its "
                    "checkpoint and reads every version the subject has then; nothing is lost"
                )
        return self._checked[schema_id]

    # -- the event-time probe (driver, a few records) ----------------------------------------------------------

    def rowtimes(self, values: list[bytes | None]) -> list[int | None]:
        """Each record's rowtime in microseconds (None when unreadable): fastavro, for the few records the
        event-time probe reads."""
        import fastavro

        reader = self._schema(None)
        out: list[int | None] = []
        for value in values:
            try:
                if self.confluent is None:
                    writer, body = self._schema(0), value
                else:
                    if value is None or len(value) < HEADER or value[0] != 0:
                        out.append(None)
                        continue
                    writer, body = self._schema(int.from_bytes(value[1:HEADER], "big")), value[HEADER:]
                record = fastavro.schemaless_reader(io.BytesIO(body), writer, reader)
                stamp = record.get(self.rowtime_source)
            except Exception:  # noqa: BLE001 - an unreadable record holds nothing back
                out.append(None)
                continue
            if isinstance(stamp, dt.datetime):
                stamp = stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
                out.append(int(stamp.timestamp() * 1_000_000))
            else:
                out.append(None)
        return out

    def _schema(self, schema_id: int | None) -> Any:
        import fastavro

        if schema_id not in self._parsed:
            text = self.reader if schema_id is None else self.writers.get(schema_id)
            if text is None:
                raise KeyError(schema_id)
            self._parsed[schema_id] = fastavro.parse_schema(json.loads(text))
        return self._parsed[schema_id]


def avro_table(
    df: Any,
    writers: dict[int, str],
    reader: str,
    table: str,
    policy: str,
    rowtime: str,
    rowtime_field: str | None,
    fields: list[str] | None = None,
    dead_letter: dict[str, Any] | None = None,
    framed: bool = True,
) -> Any:
    """The JVM's half: ``df`` (:func:`frames_schema`) → the table: the reader schema's fields (those in ``fields``
    when given), the validity flag and rowtime. With ``dead_letter`` (a ``DeadLetterSpec``'s fields, policy
    ``dead-letter``) the rows whose payload did not decode pass through Python once, column-wise, to be written
    there with their reason and coordinates (``framed``: their raw value had Confluent's header)."""
    from pyspark.sql import functions as F

    # the reader schema gains a field no writer has, whose default (true) marks the records that did decode
    expected = json.loads(reader)
    if fields is not None:  # only the fields the query reads are decoded; the others are skipped over
        kept = {
            **expected,
            "fields": [f for f in expected["fields"] if f["name"] in fields or f["name"] == rowtime_field],
        }
        try:
            import fastavro

            fastavro.parse_schema(kept)
            expected = kept
        except Exception:  # noqa: BLE001, S110 - a kept field names a type a pruned one defined: decode them all
            pass
    expected["fields"] = [*expected["fields"], {"name": DECODED, "type": "boolean", "default": True}]

    header = HEADER if framed else 0  # the payload column holds the records' whole values
    rows = jvm_rows(df.sparkSession)
    if rows is not None:
        from pyspark.sql.classic.column import Column

        dtype = avro_struct(expected, table)
        ids, payloads = F.col(SCHEMA_ID)._jc, F.col(PAYLOAD)._jc
        decoded = Column(rows.column(ids, payloads, header, json.dumps(expected), dtype.json(), writers))
    else:
        decoded = _from_avro(writers, expected, header)
    reason = F.when(
        F.col(f"{RECORD}.{DECODED}").isNull(),
        F.concat(lit("not an Avro datum of schema id "), F.col(SCHEMA_ID).cast("string"))
        if framed
        else lit("not an Avro datum"),
    )
    names = [f.name for f in avro_struct(reader, table).fields]
    if fields is not None:
        names = [n for n in names if n in fields or n == rowtime_field]
    return decoded_table(df, decoded, reason, names, table, policy, rowtime, rowtime_field, dead_letter)


def jvm_rows(spark: Any) -> Any:
    """Dagger's Avro decoder in the JVM (``dagger/jvm/AvroRows.java``), or None when Dagger's JVM classes are not
    on the session's class path (a spark-submit without ``--jars`` of the helper): ``from_avro`` decodes then."""
    from py4j.java_gateway import JavaClass

    found = spark._jvm.dagger.avro.AvroRows
    if isinstance(found, JavaClass):
        return found
    _say_from_avro()
    return None


@functools.cache
def _say_from_avro() -> None:
    """One line per process, not one per stream."""
    log.warning(
        "Avro input: Dagger's JVM classes (dagger-jvm-*.jar) are not on the class path, so Spark's from_avro "
        "decodes, about 3x slower on nested records; `python -m dagger.session.jars helper` prints the jar for "
        "spark-submit --jars"
    )


def _from_avro(writers: dict[int, str], expected: dict, header: int = 0) -> Any:
    """Spark's own decoder: one ``from_avro`` per writer schema, chosen by the record's id, over the payloads past
    their first ``header`` bytes (PERMISSIVE gives a payload that does not decode as a record whose fields are all
    null, the decoded flag false)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    options = {"mode": "PERMISSIVE", "avroSchema": json.dumps(expected)}
    decoded = None
    for schema_id, writer in sorted(writers.items()):
        payload = F.col(PAYLOAD) if not header else F.substring(F.col(PAYLOAD), header + 1, 2**31 - 1)
        value = from_avro(payload, writer, options)
        when = F.col(SCHEMA_ID) == schema_id
        decoded = F.when(when, value) if decoded is None else decoded.when(when, value)
    return decoded

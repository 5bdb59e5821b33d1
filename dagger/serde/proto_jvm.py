"""Protobuf records decoded in the JVM, by Dagger's own decoder (``dagger/jvm/ProtoRows.java``): Maven Central serves
no ``spark-protobuf``, and a decoder in Python workers costs their memory and a hand-over per micro-batch.

Two halves, one per side of the hand-over, as Avro's (:mod:`dagger.formats.avro.decode`):

* **In the Python reader** (executors), :class:`ProtoFrames` hands Spark each record's value with where its message
  starts: no Python object per record. With Confluent's wire format it reads the headers column-wise first (the
  schema id must be one of the subject's, the message-index path the stream's message; an id registered since
  the job started is looked up in the registry), and records that fail that are invalid there and follow the
  stream's policy like any undecodable record.
* **In the JVM**, :func:`proto_table` turns the values into the table's columns: the reader reads the wire format
  straight into Spark's rows with the type mapping of docs/types.md, only the fields the query reads. A record that
  does not decode follows the stream's policy (``fail``: the micro-batch ends naming topic, partition and offset).

:func:`proto_record` is the decoder's column on its own: Spark's Kafka source (real-time mode, and micro-batches
that need no Python) reads Confluent's header in the JVM too.

Runs on the driver (planning) and in the Python reader (:class:`ProtoFrames`).
"""

from __future__ import annotations

import base64
import functools
import logging
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from dagger.serde.confluent import read_frames
from dagger.serde.confluent_decode import ConfluentVerdicts
from dagger.serde.decode import DecodeResult, validity_and_rowtime
from dagger.serde.jvm_frames import PAYLOAD, RECORD, START, decoded_table, frame_columns, frames_schema
from dagger.session.pandas_free import lit

log = logging.getLogger("dagger")

#: the decoded struct's last field: why the record did not decode (null where it did)
ERROR = "__dagger_error"


class ProtoFrames:
    """The Python reader's half for a protobuf stream decoded in the JVM.

    Parameters
    ----------
    confluent:
        The registry's settings (a :class:`~dagger.schema.confluent.ConfluentSettings`' fields), or None for a
        plain stream (each record is one bare message).
    writers:
        Confluent's format: schema id → its serialized files (imports first), the versions known at start.
    message:
        The stream's message (full name).
    rowtime_source:
        The field that becomes rowtime (read here only by the event-time probe, which decodes its few records with
        the Python decoder).
    """

    def __init__(
        self,
        confluent: dict[str, Any] | None,
        writers: dict[int, list[bytes]],
        message: str,
        rowtime_source: str | None,
        rowtime: str = "rowtime",
    ):
        self.confluent = confluent
        self.message = message
        self.rowtime = rowtime
        self.rowtime_source = rowtime_source
        self.spark_schema = frames_schema(rowtime)
        self.arrow_schema = to_arrow_schema(self.spark_schema, timezone="UTC")
        self._verdicts = ConfluentVerdicts(True, writers, confluent, message) if confluent is not None else None

    def decode(self, values: pa.BinaryArray | list, coordinates: tuple[str, int, Any] | None = None) -> DecodeResult:
        """Read ``values``' headers; ``coordinates`` = (topic, partition, offsets) go along for error messages."""

        if not isinstance(values, pa.Array):
            values = pa.array(values, pa.binary())
        n = len(values)
        if self._verdicts is None:
            valid = values.is_valid().to_numpy(zero_copy_only=False)
            invalid = [int(i) for i in np.flatnonzero(~valid)]
            reasons = ["record value is null (tombstone)"] * len(invalid)
            ids = pa.array(np.zeros(n, dtype=np.int32))
            starts = pa.array(np.zeros(n, dtype=np.int32))
        else:
            frames = read_frames(values, protobuf=True)
            bad = dict(frames.bad)
            for (schema_id, path_at, _), positions in frames.groups().items():
                why = self._verdicts.verdict(schema_id, frames.path_table[path_at])
                if why is not None:
                    bad.update({int(i): why for i in positions})
            invalid = sorted(bad)
            reasons = [bad[i] for i in invalid]
            ids = pa.array(np.where(frames.ids >= 0, frames.ids, -1).astype(np.int32))
            starts = pa.array(frames.starts.astype(np.int32))
        columns = frame_columns(ids, values, starts, coordinates, validity_and_rowtime(n, invalid, None))
        return DecodeResult(pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema), invalid, reasons)


def jvm_protobuf(spark: Any) -> Any:
    """Dagger's protobuf decoder in the JVM (``ProtoRows``), or None when Dagger's JVM classes are not on the
    session's class path (a spark-submit without ``--jars`` of the helper and protobuf-java)."""
    from py4j.java_gateway import JavaClass

    found = spark._jvm.dagger.proto.ProtoRows
    return found if isinstance(found, JavaClass) else None


def jvm_codec_or_warn(spark: Any) -> bool:
    """Whether the session has Dagger's protobuf codec in the JVM; a warning, once per process, when not."""
    if jvm_protobuf(spark) is not None:
        return True
    _say_ptars()
    return False


@functools.cache
def _say_ptars() -> None:
    log.warning(
        "protobuf: Dagger's JVM classes (dagger-jvm-*.jar, protobuf-java) are not on the class path, so ptars "
        "decodes and encodes in the Python workers (SPARK_PROTOBUF_CODEC=jvm asks for the JVM); %s",
        _MISSING_HINT,
    )


def proto_record(
    spark: Any,
    payload: Any,
    descriptor_set: bytes,
    message: str,
    fields: list[str] | None = None,
    start: Any = None,
    confluent: dict[int, list[int]] | None = None,
) -> Any:
    """The column of ``payload``'s records decoded: a struct of the message's fields (those in ``fields`` when
    given) and :data:`ERROR` last. ``start``: a column saying where each message begins; ``confluent``: schema id
    → the message's index path, for Confluent's header to be read in the JVM."""
    from pyspark.sql.classic.column import Column

    rows = jvm_protobuf(spark)
    if rows is None:
        raise RuntimeError(_MISSING)
    paths = {int(k): [int(i) for i in v] for k, v in confluent.items()} if confluent is not None else None
    return Column(
        rows.column(payload._jc, None if start is None else start._jc, descriptor_set, message, fields, paths)
    )


_MISSING_HINT = (
    "`make install` builds them; under spark-submit, pass `--jars $(python -m dagger.session.jars helper)` and "
    "`--packages $(python -m dagger.session.jars packages)`"
)
_MISSING = f"Dagger's JVM classes (dagger-jvm-*.jar and protobuf-java) are not on the Spark session's class path: {_MISSING_HINT}"


def proto_table(
    df: Any,
    descriptor_set_b64: str,
    message: str,
    table: str,
    policy: str,
    rowtime: str,
    rowtime_field: str | None,
    fields: list[str] | None = None,
    dead_letter: dict[str, Any] | None = None,
) -> Any:
    """The JVM's half: ``df`` (frames) → the table: the message's fields (those in ``fields`` when given), the
    validity flag and rowtime. With ``dead_letter`` (policy ``dead-letter``) the rows whose value did not decode
    pass through Python once, column-wise, to be written there with their reason and coordinates."""
    from pyspark.sql import functions as F

    descriptor_set = base64.b64decode(descriptor_set_b64)
    decoded = proto_record(df.sparkSession, F.col(PAYLOAD), descriptor_set, message, fields, start=F.col(START))
    names = record_names(df.sparkSession, descriptor_set, message, fields)
    reason = F.col(f"{RECORD}.{ERROR}")
    return decoded_table(
        df, decoded, reason, names, table, policy, rowtime, rowtime_field, dead_letter, named={"message": message}
    )


def record_names(spark: Any, descriptor_set: bytes, message: str, fields: list[str] | None) -> list[str]:
    """The names of the fields the decoder reads, in declaration order."""
    return [f.name for f in record_struct(spark, descriptor_set, message, fields).fields]


def record_struct(spark: Any, descriptor_set: bytes, message: str, fields: list[str] | None) -> Any:
    """The Spark type of the decoded records (without :data:`ERROR`), as the JVM computes it."""
    from pyspark.sql.types import StructType, _parse_datatype_json_string

    rows = jvm_protobuf(spark)
    if rows is None:
        raise RuntimeError(_MISSING)
    parsed = _parse_datatype_json_string(rows.recordType(descriptor_set, message, fields))
    assert isinstance(parsed, StructType)
    return parsed


# -- the encoder: output rows → protobuf records (dagger/jvm/ProtoBytes.java) --------------------------------


def proto_bytes(
    spark: Any,
    schema: Any,
    descriptor_set: bytes,
    message: str,
    header: bytes | None,
    key: str,
    columns: Any = None,
    refusal: tuple[str, str] | None = None,
) -> Any:
    """The JVM column of each output row as a ``message`` record (behind ``header``): a struct of the serialized
    record (``value``) and why the row cannot be written (``error``, null when it can). Output columns map to
    fields by name, dotted ones to nested fields, as the Python encoder maps them (:mod:`dagger.serde.encode`);
    ``columns`` (names) limits them (a key's). A value a field cannot hold (an overflow, an enum name the enum
    lacks) is the row's error, naming the column (``key``: the setting that names the message).
    With ``refusal`` (words before and after the error) the column is the record alone, and a row that cannot be
    written fails the query (``SinkError: <before><why><after>``): one expression, not a CASE over the struct."""
    from pyspark.sql import functions as F
    from pyspark.sql.classic.column import Column

    found = spark._jvm.dagger.proto.ProtoBytes
    target = record_struct(spark, descriptor_set, message, None)
    fields = [f for f in schema.fields if columns is None or f.name in columns]
    given = {f.name: (F.col(f"`{f.name}`"), f.dataType) for f in fields}
    problems: list[Any] = []
    row = _conformed(given, target, message, "", problems)
    problem = (F.coalesce(*problems) if len(problems) > 1 else problems[0]) if problems else None
    if refusal is not None:
        before, after = refusal
        found_problem = None if problem is None else problem._jc
        return Column(found.refusing(row._jc, found_problem, descriptor_set, message, header, before, after))
    encoded = Column(found.column(row._jc, descriptor_set, message, header))
    if problem is None:
        return encoded
    return F.when(problem.isNull(), encoded).otherwise(
        F.struct(lit(None).cast("binary").alias("value"), problem.alias("error"))
    )


def refused_rows(errors: pa.Array) -> tuple[str, list[int]]:
    """The first reason among a batch's rows the encoder refused (``errors``: null where a row was written), and
    the rows refused for it."""
    import pyarrow.compute as pc

    reason = pc.drop_null(errors)[0].as_py()
    rows = pc.indices_nonzero(pc.equal(errors, reason).fill_null(False)).to_pylist()
    return reason, [int(r) for r in rows]


def _conformed(given: dict[str, tuple[Any, Any]], target: Any, message: str, prefix: str, problems: list) -> Any:
    """A struct of ``target``'s type from the ``given`` columns (name → (column, type)), dotted names filling
    nested fields; fields no column maps to are null."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    nested: dict[str, dict[str, tuple[Any, Any]]] = {}
    for name, value in given.items():
        head, dot, rest = name.partition(".")
        if dot:
            nested.setdefault(head, {})[rest] = value
    values = []
    for field in target.fields:
        path = prefix + field.name
        if field.name in given:
            column, dtype = given[field.name]
            values.append(_cast(column, dtype, field.dataType, path, message, problems).alias(field.name))
        elif field.name in nested and isinstance(field.dataType, StructType):
            inner = _conformed(nested[field.name], field.dataType, message, path + ".", problems)
            values.append(inner.alias(field.name))
        else:
            values.append(lit(None).cast(field.dataType).alias(field.name))
    return F.struct(*values)


def _cast(column: Any, source: Any, target: Any, path: str, message: str, problems: list) -> Any:
    """``column`` as ``target``'s type: as it is when the types match; a number into a TIMESTAMP as epoch seconds
    (as Dagger reads one); other scalars by Spark's cast, where a value that does not fit is a problem of its row
    (``problems`` gains why); lists, maps and structs by Spark's cast (a value that does not fit fails the batch)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, NullType, NumericType, StructType, TimestampType

    if _same_type(source, target):
        return column
    if isinstance(source, NullType):
        return lit(None).cast(target)
    if isinstance(target, TimestampType) and isinstance(source, NumericType):
        return F.timestamp_micros(F.round(column.cast("double") * 1_000_000).cast("long"))
    if isinstance(target, (ArrayType, MapType, StructType)) or isinstance(source, (ArrayType, MapType, StructType)):
        return column.cast(target)
    cast = column.try_cast(target)
    problems.append(
        F.when(
            column.isNotNull() & cast.isNull(),
            F.concat(
                lit(f"column '{path}' ({source.simpleString().upper()}) holds "),
                column.cast("string"),
                lit(f", which field '{path}' of {message} ({target.simpleString().upper()}) cannot hold"),
            ),
        )
    )
    return cast


def _same_type(a: Any, b: Any) -> bool:
    """Whether two Spark types are the same but for nullability."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same_type(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields, strict=True)
        )
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same_type(a.elementType, b.elementType)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return _same_type(a.keyType, b.keyType) and _same_type(a.valueType, b.valueType)
    return a == b

"""Parquet source (``PARQUET_SOURCE`` + ``BOUNDED``): history read by Spark's native Parquet reader.

* **Files**: every path of ``SOURCE_PARQUET_FILE_PATHS`` is listed through Spark's Hadoop file system layer
  (local paths, ``file:``, ``hdfs:``, ``gs:``/``s3a:`` when the cluster has their connectors); directories are
  searched recursively and, as Spark does, the files writers leave beside the data are skipped (names starting
  with ``_`` or ``.``, such as ``_SUCCESS``; ``*.crc``; ``*._COPYING_``). Any other file must sit in the
  ``dt=/hr=`` layout: a stray one is an error naming it.
* **Order and range** (:mod:`dagger.parquet.time_partitions`): files are read in chronological order of their
  ``dt=YYYY-MM-DD[/hr=HH]`` path partition, filtered by ``SOURCE_PARQUET_FILE_DATE_RANGE``. Each time
  partition is one scan, and the scans are concatenated in time order, so Spark's partition index (and the
  task order of a stateless job) follows time.
* **Rows** are mapped onto the stream's proto schema by name with Spark column expressions (no Python per
  row): fields missing from the files get proto defaults (``0``, ``""``, ``false``, enum value #0, empty
  lists and maps; ``NULL`` for messages, as the Kafka decoder gives for an unset message), extra columns are
  ignored, Timestamps may be INT64 epoch milliseconds, a ``seconds``/``nanos`` group or a Parquet timestamp,
  maps may use the standard ``MAP`` layout or the legacy ``repeated group {key; value}``, enums are stored as
  names (an unknown name becomes value #0) or numbers. A type that cannot be converted is a config error
  naming the column, its Parquet type and the proto field.

The result has exactly the columns a Kafka stream of the same message has, so the same SQL gives the same
results over history.

One module (~430 lines) because it is one source: its keys, file listing and date partitions, and the
mapping of Parquet's two layouts onto the message's columns.
"""

from __future__ import annotations

import logging
from functools import reduce
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pydantic import Field

from dagger.config.model import Json
from dagger.errors import DaggerConfigError
from dagger.parquet.time_partitions import order_files, parse_date_ranges
from dagger.plugins.source import Source, SourceEnv, SourceSettings
from dagger.serde.types import (
    DURATION,
    JSON_TYPES,
    TIMESTAMP,
    VALIDITY_COLUMN,
    WRAPPERS,
    field_type,
    is_map,
    table_schema,
    timestamp_field,
)
from dagger.session.pandas_free import lit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dagger.config.model import JobConfig, StreamConfig
    from dagger.schema.descriptor_sets import DescriptorSet

log = logging.getLogger(__name__)

#: time partitions per scan are merged when a range holds more than this many (keeps the plan small)
MAX_SCANS = 256


def list_files(spark: SparkSession, paths: list[str], where: str) -> list[str]:
    """Every data file under ``paths`` through Hadoop's FileSystem, in the order given (directories sorted)."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    files: list[str] = []
    for text in paths:
        path = jvm.org.apache.hadoop.fs.Path(text)
        try:
            fs = path.getFileSystem(conf)
            if not fs.exists(path):
                raise DaggerConfigError(f"{where}: {text} does not exist")
            status = fs.getFileStatus(path)
            if status.isFile():
                files.append(status.getPath().toString())
                continue
            found = []
            iterator = fs.listFiles(path, True)
            while iterator.hasNext():
                file_path = iterator.next().getPath()
                relative = file_path.toString()[len(status.getPath().toString()) :]
                if _is_marker(relative):
                    continue
                found.append(file_path.toString())
        except DaggerConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - py4j wraps Hadoop's IOException
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DaggerConfigError(
                f"{where}: cannot list {text}: {reason} (local paths and any URL Spark's Hadoop layer can read, "
                "e.g. file:/data/bookings, gs://bucket/bookings with the GCS connector on the classpath)"
            ) from None
        if not found:
            log.warning("%s: %s holds no data files", where, text)
        files.extend(sorted(found))
    return files


def _is_marker(relative: str) -> bool:
    """Files Spark's and Hadoop's writers leave beside the data, which Spark's own reader skips: anything under a
    name starting with ``_`` or ``.`` (``_SUCCESS``, ``_temporary/``, ``_metadata``, ``.part-0.parquet.crc``;
    ``_`` names holding ``=`` are partition directories), checksums (``*.crc``) and files being copied
    (``*._COPYING_``)."""
    parts = [p for p in relative.split("/") if p]
    name = parts[-1] if parts else ""
    hidden = any(p.startswith(("_", ".")) and "=" not in p for p in parts)
    return hidden or name.endswith((".crc", "._COPYING_"))


class ParquetSourceSettings(SourceSettings):
    """Parquet files in the `dt=/hr=` layout, read in time order by Spark's Parquet reader."""

    ignored_keys: ClassVar[dict[str, str]] = {
        "SOURCE_PARQUET_SCHEMA_MATCH_STRATEGY": "unused by Dagger too: columns are matched to the message by name",
    }

    SOURCE_PARQUET_FILE_PATHS: Annotated[list[str], Json] | None = Field(
        None, description="Parquet files or directories (searched recursively)."
    )
    SOURCE_PARQUET_READ_ORDER_STRATEGY: Literal["EARLIEST_TIME_URL_FIRST", "EARLIEST_INDEX_FIRST"] = Field(
        "EARLIEST_TIME_URL_FIRST", description="Order in which Parquet files are read."
    )
    SOURCE_PARQUET_FILE_DATE_RANGE: str | None = Field(
        None, description="`start,end;start,end` inclusive UTC ranges of `dt=`/`hr=` partitions to read."
    )
    SOURCE_PARQUET_SCHEMA_MATCH_STRATEGY: (
        Literal["SAME_SCHEMA_WITH_FAIL_ON_MISMATCH", "BACKWARD_COMPATIBLE_SCHEMA_WITH_FAIL_ON_TYPE_MISMATCH"] | None
    ) = Field(None, description="Accepted for compatibility (unused by Dagger too).")


class ParquetSource(Source):
    """History in Parquet files (``SOURCE_PARQUET_FILE_PATHS``), always bounded."""

    names = ("PARQUET_SOURCE",)
    source_type = "BOUNDED"
    settings = ParquetSourceSettings
    formats = ("PROTO",)
    formats_rule = "takes its columns from INPUT_SCHEMA_PROTO_CLASS (leave INPUT_DATATYPE out or set it to PROTO)"

    def check(self, stream: StreamConfig) -> None:
        stream.settings.require(f"Parquet stream '{stream.INPUT_SCHEMA_TABLE}'", "SOURCE_PARQUET_FILE_PATHS")
        try:
            parse_date_ranges(stream.settings.SOURCE_PARQUET_FILE_DATE_RANGE, "SOURCE_PARQUET_FILE_DATE_RANGE")
        except DaggerConfigError as exc:
            raise ValueError(str(exc)) from None

    def is_bounded(self, stream: StreamConfig, to_ms: int | None = None) -> bool:
        return True

    def location(self, stream: StreamConfig) -> str:
        return f"files {', '.join(stream.settings.SOURCE_PARQUET_FILE_PATHS or [])}"

    def input_description(
        self, spark: SparkSession, stream: StreamConfig, from_ms: int | None, to_ms: int | None
    ) -> dict[str, Any]:
        files = list_files(spark, stream.settings.SOURCE_PARQUET_FILE_PATHS, stream.INPUT_SCHEMA_TABLE)
        return {
            "table": stream.INPUT_SCHEMA_TABLE,
            "files": files,
            "range": stream.settings.SOURCE_PARQUET_FILE_DATE_RANGE,
        }

    def build(self, stream: StreamConfig, env: SourceEnv) -> DataFrame:
        return parquet_stream(env.spark, stream, env.config, env.descriptors)


def parquet_stream(
    spark: SparkSession, stream: StreamConfig, config: JobConfig, descriptors: DescriptorSet
) -> DataFrame:
    """A PARQUET_SOURCE stream as a (bounded) DataFrame with the table's columns."""
    table = stream.INPUT_SCHEMA_TABLE
    where = f"STREAMS[{table}].SOURCE_PARQUET_FILE_PATHS"
    descriptor = descriptors.find_message(stream.format.INPUT_SCHEMA_PROTO_CLASS)
    ranges = parse_date_ranges(
        stream.settings.SOURCE_PARQUET_FILE_DATE_RANGE, f"STREAMS[{table}].SOURCE_PARQUET_FILE_DATE_RANGE"
    )
    files = list_files(spark, stream.settings.SOURCE_PARQUET_FILE_PATHS, where)
    ordered = order_files(files, stream.settings.SOURCE_PARQUET_READ_ORDER_STRATEGY, ranges, where)
    rowtime_field = None
    if stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX is not None:
        rowtime_field = timestamp_field(descriptor, stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX).name
    rowtime = config.FLINK_ROWTIME_ATTRIBUTE_NAME
    if not ordered:
        log.warning("stream '%s': no Parquet file in %s matches the date range", table, where)
        return spark.createDataFrame([], table_schema(descriptor, rowtime))
    paths = [p for _, p in ordered]
    log.info(
        "stream '%s': %d Parquet file(s) from %s to %s",
        table,
        len(paths),
        ordered[0][0].isoformat() if ordered[0][0] else paths[0],
        ordered[-1][0].isoformat() if ordered[-1][0] else paths[-1],
    )
    frames = [
        conform(scan, descriptor, rowtime_field, rowtime, table)
        for group in _groups(ordered)
        for scan in _scans(spark, group)
    ]
    return reduce(lambda a, b: a.union(b), frames)


def _scans(spark: SparkSession, files: list[str]) -> list[Any]:
    """One DataFrame over ``files`` (schemas merged); one per file when their schemas cannot merge.

    Files written over years may differ (a Timestamp as INT64 millis in one, as a seconds/nanos group in
    another); each is mapped onto the proto schema on its own, so they still end up in one table.
    """
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import AnalysisException

    try:
        return [spark.read.option("mergeSchema", "true").parquet(*files)]
    except (AnalysisException, Py4JJavaError) as exc:
        if len(files) == 1 or "CANNOT_MERGE" not in str(exc):
            reason = str(exc).strip().splitlines()[0]
            raise DaggerConfigError(f"cannot read Parquet file(s) {', '.join(files[:3])}: {reason}") from None
        return [frame for path in files for frame in _scans(spark, [path])]


def _groups(ordered: list[tuple[Any, str]]) -> list[list[str]]:
    """One scan per time partition (adjacent ones merged beyond ``MAX_SCANS``), in read order."""
    groups: list[list[str]] = []
    last = object()
    for instant, path in ordered:
        if instant != last or instant is None:
            groups.append([])
            last = instant
        groups[-1].append(path)
    if len(groups) > MAX_SCANS:
        per = -(-len(groups) // MAX_SCANS)
        groups = [sum(groups[i : i + per], []) for i in range(0, len(groups), per)]
    return groups


# -- mapping Parquet columns onto the proto schema ---------------------------------------------------------


def conform(df: Any, descriptor: Descriptor, rowtime_field: str | None, rowtime: str, table: str) -> Any:
    """Select the message's fields from ``df`` by name, typed as the Kafka decoder types them."""
    from pyspark.sql import functions as F

    present = {f.name: f.dataType for f in df.schema.fields}
    fields = [
        _field(F.col(f"`{f.name}`"), present.get(f.name), f, f"stream '{table}': Parquet column '{f.name}'").alias(
            f.name
        )
        for f in descriptor.fields
    ]
    if rowtime_field is not None:
        time = F.coalesce(F.col(f"`{rowtime_field}`"), F.timestamp_seconds(lit(0)))
    else:
        time = lit(None).cast("timestamp")
    out = df.select(*fields).select("*", lit(True).alias(VALIDITY_COLUMN), time.alias(rowtime))
    return out.to(table_schema(descriptor, rowtime))  # the nullability a Kafka stream of the message has


def _field(col: Any, ptype: Any, field: FieldDescriptor, where: str) -> Any:
    """One proto field (with repeated/map) from a Parquet column of Spark type ``ptype`` (None: missing)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType

    target = field_type(field)
    if ptype is None:
        return _default(field, target)
    if is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        if isinstance(ptype, MapType):
            keys = F.transform(F.map_keys(col), lambda k: _single(k, ptype.keyType, key, f"{where} (key)"))
            values = F.transform(F.map_values(col), lambda v: _single(v, ptype.valueType, value, f"{where} (value)"))
        elif _is_legacy_map(ptype):
            entry = ptype.elementType
            kt, vt = entry["key"].dataType, entry["value"].dataType
            keys = F.transform(col, lambda e: _single(e["key"], kt, key, f"{where} (key)"))
            values = F.transform(col, lambda e: _single(e["value"], vt, value, f"{where} (value)"))
        else:
            raise _mismatch(where, ptype, field, "a MAP or a repeated group of {key; value}")
        mapped = F.map_from_arrays(keys, values)
        return F.coalesce(mapped, F.create_map().cast(target))
    if field.is_repeated:
        if not isinstance(ptype, ArrayType):
            raise _mismatch(where, ptype, field, "a repeated (LIST) column")
        element = ptype.elementType
        items = F.transform(col, lambda x: _single(x, element, field, f"{where} (element)"))
        return F.coalesce(items, F.array().cast(target))
    return _single(col, ptype, field, where)


def _is_legacy_map(ptype: Any) -> bool:
    from pyspark.sql.types import ArrayType, StructType

    return (
        isinstance(ptype, ArrayType)
        and isinstance(ptype.elementType, StructType)
        and {f.name for f in ptype.elementType.fields} >= {"key", "value"}
    )


def _single(col: Any, ptype: Any, field: FieldDescriptor, where: str) -> Any:
    """A non-repeated value of ``field`` from a column of Spark type ``ptype``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        BooleanType,
        MapType,
        NumericType,
        StringType,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    if field.type == FieldDescriptor.TYPE_MESSAGE:
        name = field.message_type.full_name
        if name in (TIMESTAMP, DURATION):
            micros = None
            if isinstance(ptype, StructType) and {"seconds"} <= {f.name for f in ptype.fields}:
                nanos = col["nanos"] if "nanos" in {f.name for f in ptype.fields} else lit(0)
                micros = col["seconds"].cast("long") * 1_000_000 + F.floor(F.coalesce(nanos, lit(0)) / 1000)
            if name == DURATION:
                if micros is not None:
                    return micros.cast("long")
                if isinstance(ptype, NumericType):
                    return col.cast("long")
                raise _mismatch(where, ptype, field, "a {seconds; nanos} group or INT64 microseconds")
            if micros is not None:
                return F.when(col.isNull(), None).otherwise(F.timestamp_micros(micros))
            if isinstance(ptype, (TimestampType, TimestampNTZType)):
                return col.cast("timestamp")
            if isinstance(ptype, NumericType) and not isinstance(ptype, BooleanType):
                return F.timestamp_millis(col.cast("long"))
            raise _mismatch(where, ptype, field, "INT64 epoch milliseconds, a {seconds; nanos} group or a timestamp")
        if name in JSON_TYPES:
            return col if isinstance(ptype, StringType) else F.to_json(col)
        if name in WRAPPERS:
            inner = field.message_type.fields_by_name["value"]
            if isinstance(ptype, StructType):
                if "value" not in {f.name for f in ptype.fields}:
                    raise _mismatch(where, ptype, field, "a group with a 'value' field, or the scalar itself")
                return _scalar(col["value"], ptype["value"].dataType, inner, where, keep_null=True)
            return _scalar(col, ptype, inner, where, keep_null=True)
        if field_type(field).typeName() == "binary":  # a recursive message stays serialized
            if isinstance(ptype, BinaryType):
                return col
            raise _mismatch(where, ptype, field, "BINARY (a recursive message is kept serialized)")
        if not isinstance(ptype, StructType):
            raise _mismatch(where, ptype, field, "a group (struct)")
        present = {f.name: f.dataType for f in ptype.fields}
        members = [
            _field(col[sub.name], present.get(sub.name), sub, f"{where}.{sub.name}").alias(sub.name)
            for sub in field.message_type.fields
        ]
        return F.when(col.isNull(), None).otherwise(F.struct(*members))
    if isinstance(ptype, (StructType, ArrayType, MapType)):
        raise _mismatch(where, ptype, field, "a scalar column")
    return _scalar(col, ptype, field, where, keep_null=field.has_presence)


def _scalar(col: Any, ptype: Any, field: FieldDescriptor, where: str, keep_null: bool) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, BooleanType, NumericType, StringType

    target = field_type(field) if not field.is_repeated else field_type(field).elementType
    if field.type == FieldDescriptor.TYPE_ENUM:
        names = [v.name for v in field.enum_type.values]
        default = field.enum_type.values[0].name
        if isinstance(ptype, StringType):
            value = F.when(col.isin(names), col).otherwise(F.when(col.isNotNull(), lit(default)))
        elif isinstance(ptype, NumericType):
            lookup = F.create_map(*[x for v in field.enum_type.values for x in (lit(v.number), lit(v.name))])
            value = F.coalesce(F.element_at(lookup, col.cast("int")), col.cast("string"))
        else:
            raise _mismatch(where, ptype, field, "enum names (STRING) or numbers")
        return value if keep_null else F.coalesce(value, lit(default))
    kind = target.typeName()
    compatible = {
        "string": (StringType, BinaryType),
        "binary": (BinaryType, StringType),
        "boolean": (BooleanType,),
    }.get(kind)
    if compatible is None:  # a number
        ok = isinstance(ptype, NumericType) and not isinstance(ptype, BooleanType)
    else:
        ok = isinstance(ptype, compatible)
    if not ok:
        raise _mismatch(where, ptype, field, target.simpleString().upper())
    value = col.cast(target)
    if keep_null:
        return value
    return F.coalesce(value, _scalar_default(field, target))


def _scalar_default(field: FieldDescriptor, target: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return lit(field.enum_type.values[0].name)
    kind = target.typeName()
    if kind == "string":
        return lit("")
    if kind == "binary":
        return lit(b"").cast("binary")
    if kind == "boolean":
        return lit(False)
    return lit(0).cast(target)


def _default(field: FieldDescriptor, target: Any) -> Any:
    """The proto default of a field the files do not have."""
    from pyspark.sql import functions as F

    if is_map(field):
        return F.create_map().cast(target)
    if field.is_repeated:
        return F.array().cast(target)
    if field.type == FieldDescriptor.TYPE_MESSAGE or field.has_presence:
        return lit(None).cast(target)
    return _scalar_default(field, target)


def _mismatch(where: str, ptype: Any, field: FieldDescriptor, accepted: str) -> DaggerConfigError:
    return DaggerConfigError(
        f"{where} is {ptype.simpleString().upper()} but proto field {field.full_name} needs {accepted}; "
        "Parquet types must match the stream's INPUT_SCHEMA_PROTO_CLASS"
    )

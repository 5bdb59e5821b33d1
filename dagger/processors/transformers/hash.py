"""``HashTransformer``: replace sensitive fields with SHA-256 hashes (to clone production data safely)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dagger.errors import DaggerConfigError
from dagger.plugins.transformer import Transformer, TransformerArguments, register_transformer
from dagger.session.pandas_free import lit


def _little_endian(hex_text: Any, width: int) -> Any:
    """Reverse the byte order of a hex string of ``width`` bytes."""
    from pyspark.sql import functions as F

    return F.concat(*[F.substring(hex_text, 2 * i + 1, 2) for i in reversed(range(width))])


def sha256_hash(column: Any, kind: str) -> Any:
    """Guava's ``Hashing.sha256()`` as Dagger applies it, as Spark expressions (no Python per row).

    STRING → the digest's lowercase hex; INT → ``hashInt(v).asInt()``; BIGINT → ``hashLong(v).asLong()`` (the
    value's little-endian bytes hashed, the digest's first 4/8 bytes read little-endian).
    """
    from pyspark.sql import functions as F

    if kind == "string":
        return F.sha2(column.cast("binary"), 256)
    width = 4 if kind == "integer" else 8
    if kind == "integer":
        raw = F.lpad(F.hex(column.cast("bigint").bitwiseAND(lit(0xFFFFFFFF))), 8, "0")
    else:
        raw = F.lpad(F.hex(column.cast("bigint")), 16, "0")
    digest = F.sha2(F.unhex(_little_endian(raw, width)), 256)
    head = _little_endian(F.substring(digest, 1, 2 * width), width)
    unsigned = F.conv(head, 16, 10).cast("decimal(21,0)")
    bound = 2 ** (8 * width)
    half, full = (lit(str(b)).cast("decimal(21,0)") for b in (bound // 2, bound))
    signed = F.when(unsigned >= half, unsigned - full).otherwise(unsigned)
    result = signed.cast("int" if kind == "integer" else "bigint")
    return F.when(column.isNull(), None).otherwise(result)


class HashArguments(TransformerArguments):
    """HashTransformer's arguments."""

    maskColumns: list[str] = Field(description="The columns (dotted paths reach nested fields) to hash.")  # noqa: N815


class HashTransformer(Transformer):
    """Replaces each of ``maskColumns`` (dotted paths reach into nested fields) with its SHA-256 hash:
    strings become the hex digest, INT and BIGINT stay numbers (Guava's ``asInt``/``asLong``). Other types
    are a config error, as Dagger supports only these."""

    name = "HashTransformer"
    stages = ("post",)

    def transform(self, df: Any) -> Any:
        from pyspark.sql import functions as F

        columns = self.settings.maskColumns
        for path in columns:
            if not isinstance(path, str):
                raise DaggerConfigError(f"{self.where}: HashTransformer maskColumns holds {path!r}, not a column name")
            self.column(path, "maskColumns")
            kind = _type_at(df.schema, path.split("."), self.where)
            hashed = sha256_hash(F.col(path), kind)
            top, _, rest = path.partition(".")
            df = df.withColumn(top, F.col(top).withField(rest, hashed) if rest else hashed)
        return df


def _type_at(schema: Any, parts: list[str], where: str) -> str:
    from pyspark.sql.types import StructType

    current: Any = schema
    for i, part in enumerate(parts):
        if not isinstance(current, StructType) or part not in current.names:
            raise DaggerConfigError(f"{where}: HashTransformer maskColumns: no field {'.'.join(parts[: i + 1])!r}")
        current = current[part].dataType
    kind = current.typeName()
    if kind not in ("string", "integer", "long"):
        raise DaggerConfigError(
            f"{where}: HashTransformer cannot hash {'.'.join(parts)!r} of type {current.simpleString()}; "
            "accepted: STRING, INT, BIGINT"
        )
    return kind


register_transformer("HashTransformer", HashArguments, HashTransformer)

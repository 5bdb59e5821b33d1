"""The driver's PySpark calls without the import of pandas PySpark makes on them.

``pyspark.functions.lit`` and two of PySpark's py4j input converters (``NumpyScalarConverter``,
``NumpyArrayConverter``; PySpark 4.2) first import ``pyspark.testing.utils`` to ask whether numpy is installed;
that test module imports pandas (and grpc) to check their versions. Every py4j call offers its arguments to the
converters, so the first one of a session (``SparkConf()``) pays it, and every driver then holds pandas, about
45 MiB RSS, although a job whose records never meet Python has no use for it. Reproduced with nothing of ours in
the path: ``SparkSession.builder.master("local[1]").getOrCreate()`` peaks at 127 MiB RSS with pandas imported,
82 MiB with pandas made unimportable. :func:`install` swaps the two converters for ones that answer from
``sys.modules`` (an object can be a numpy array or scalar only once numpy is imported); :func:`lit` is
``F.lit`` for the values our code passes. (pyarrow imports pandas too, on ``pa.array`` of a Python list: code
that runs on the driver of every job builds its arrays another way, e.g. ``pa.nulls``.)
"""

from __future__ import annotations

import sys
from typing import Any


def _numpy() -> Any:
    return sys.modules.get("numpy")


def install() -> None:
    """Replace PySpark's two numpy converters among py4j's input converters (where not replaced already)."""
    from py4j import protocol
    from pyspark.sql import types

    class NumpyScalar(types.NumpyScalarConverter):
        def can_convert(self, obj: Any) -> bool:
            np = _numpy()
            return np is not None and isinstance(obj, np.generic)

    class NumpyArray(types.NumpyArrayConverter):
        def can_convert(self, obj: Any) -> bool:
            np = _numpy()
            return np is not None and isinstance(obj, np.ndarray) and obj.ndim == 1

    replacements = {types.NumpyScalarConverter: NumpyScalar, types.NumpyArrayConverter: NumpyArray}
    protocol.INPUT_CONVERTER[:] = [
        replacements[type(c)]() if type(c) in replacements else c for c in protocol.INPUT_CONVERTER
    ]


def lit(value: Any) -> Any:
    """``pyspark.sql.functions.lit(value)`` for a Column, a Python scalar (bytes included) or a list of them."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F
    from pyspark.sql.functions import builtin

    if isinstance(value, Column):
        return value
    if isinstance(value, list):
        return F.array(*[lit(v) for v in value])
    return builtin._invoke_function("lit", value)

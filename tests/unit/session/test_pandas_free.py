"""A driver that never needs pandas does not import it (``dagger.session.pandas_free``): a session of ours, the
literals our code builds, py4j calls, and the sink encoder's planning check, in a fresh interpreter; then numpy
arrays and scalars still reach the JVM, and our literals equal PySpark's."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

DRIVER = textwrap.dedent(
    """
    import json, sys
    import pyarrow as pa
    from dagger.config.model import JobConfig
    from dagger.serde.encode import ProtoEncoder
    from dagger.session.pandas_free import lit
    from dagger.session.spark import get_session
    from testing.samples import example_descriptors

    spark = get_session(JobConfig.model_construct(SPARK_MASTER="local[1]"))
    values = [7, "a", b"\\x00\\xff", None, [1, 2], 1.5, True]
    ours = spark.range(1).select(*[lit(v).alias(f"c{i}") for i, v in enumerate(values)])
    row = ours.collect()[0]
    summary = example_descriptors().find_message("dagger.examples.BookingSummaryMessage")
    fits = ProtoEncoder(summary).check(pa.schema([("order_number", pa.string()), ("service_type", pa.string())]))
    misfit = ProtoEncoder(summary).check(pa.schema([("pickup", pa.int64())]))
    out = {"pandas": "pandas" in sys.modules, "fits": fits, "misfit": misfit}

    import numpy as np
    from pyspark.sql import functions as F

    jvm = spark.sparkContext._jvm
    out["array"] = jvm.java.util.Arrays.toString(np.array([3, 4], dtype=np.int64))
    out["scalar"] = jvm.java.lang.String.valueOf(np.int64(5))
    theirs = spark.range(1).select(*[F.lit(v).alias(f"c{i}") for i, v in enumerate(values)])
    out["same"] = ours.schema == theirs.schema and row == theirs.collect()[0]
    out["row"] = [list(v) if isinstance(v, (list, bytes, bytearray)) else v for v in row]
    print(json.dumps(out))
    """
)


def test_a_driver_of_ours_keeps_pandas_out_and_numpy_still_converts():
    done = subprocess.run([sys.executable, "-c", DRIVER], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["pandas"] is False
    assert out["fits"] == []
    assert len(out["misfit"]) == 1 and "pickup" in out["misfit"][0], out["misfit"]
    assert out["array"] == "[3, 4]" and out["scalar"] == "5"
    assert out["same"] is True
    assert out["row"] == [7, "a", [0, 255], None, [1, 2], 1.5, True]

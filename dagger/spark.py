"""Creating the Spark session a job runs in."""

from __future__ import annotations

import os
import sys
from typing import Any

DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "50000",
    "spark.sql.streaming.noDataMicroBatches.enabled": "true",
    "spark.python.worker.reuse": "true",
    "spark.python.daemon.module": "dagger.spark_daemon",  # workers forked with pyarrow, ptars, ... loaded
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
}


def get_session(config: Any, extra: dict[str, str] | None = None) -> Any:
    """A SparkSession for ``config``: the one spark-submit created, or a local one on all cores."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("TZ", "UTC")
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(config.FLINK_JOB_ID)
    # under spark-submit the JVM is already up (PYSPARK_GATEWAY_PORT): its --master and --conf win
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if submitted:
        SparkContext._ensure_initialized()
    given = SparkConf()  # spark-submit's settings once the gateway is initialised, else spark-defaults
    if not given.contains("spark.master"):
        builder = builder.master(config.SPARK_MASTER)
    conf = dict(DEFAULT_CONF)
    conf.update(extra or {})
    conf.update(config.SPARK_CONF)
    for key, value in conf.items():
        if not (submitted and given.contains(key)):
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("DAGGER_SPARK_LOG_LEVEL", "WARN"))
    return spark

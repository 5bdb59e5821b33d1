"""Spark session settings a job chooses for itself, per job.

A session may run several jobs one after another (the benchmark, the tests, a notebook), and the user may have
chosen a setting themselves (``SPARK_CONF``, or spark-submit's ``--conf``). Each setting here is therefore set to
the job's value when the job wants it and back to Spark's default when it does not, unless the user chose it
(:func:`own_setting`). :func:`tune` applies all of them before a query starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dagger.config.model import JobConfig

ARROW_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
CHECKPOINT_WRITER = "spark.sql.streaming.checkpointFileManagerClass"
FILESYSTEM_WRITER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
STATE_STORE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
HDFS_STATE_STORE = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_STATE_STORE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def own_setting(
    spark: SparkSession, user_conf: dict[str, str], key: str, ours: str, wanted: bool, default: str | None
) -> None:
    """Set ``key`` to ``ours`` (``wanted``) or back to Spark's default, unless the user chose it: named in
    ``user_conf`` (``SPARK_CONF``), or set to anything other than ours or Spark's ``default`` (``--conf``)."""
    conf = spark.conf
    if key in user_conf or conf.get(key, None) not in (None, ours, default):
        return
    if wanted:
        conf.set(key, ours)
    else:
        conf.unset(key)


def tune(spark: SparkSession, config: JobConfig, checkpoint_local: bool, processor_settings: dict[str, str]) -> None:
    """Every per-job setting, for a job about to start.

    * **Arrow batches to Python workers are capped by rows only**, unless records may be large. Spark also caps
      them at ``spark.sql.execution.arrow.maxBytesPerBatch`` (64 MiB) and checks that cap by re-measuring the
      batch being built after every row (``ArrowWriter.sizeInBytes``, which walks every struct column's
      children): on the stateless benchmark that check was ~40 % of the JVM's CPU (2.1 vs 3.6-4.0 s per 2M
      records). With the 50,000-row cap a batch of 2 KB rows is 100 MB, so jobs that enable large messages
      (``SOURCE_KAFKA_CONSUME_LARGE_MESSAGE_ENABLE``, ``SINK_KAFKA_PRODUCE_LARGE_MESSAGE_ENABLE``) keep Spark's cap.
    * **A local checkpoint is written through Hadoop's FileSystem API** instead of its FileContext API: without
      Hadoop's native library (never shipped with pyspark) FileContext starts a ``chmod`` or ``readlink`` process
      for most files it writes, about 30 per run of the window benchmark, 40-90 ms of each micro-batch's commits.
      The FileSystem-based writer (a temporary file renamed, atomic on a local disk) starts no ``readlink``; the
      ``chmod`` of each file goes with ``dagger.session.spark.LOCAL_FILE_SYSTEM``. Remote checkpoints (HDFS, S3,
      GCS) keep Spark's default.
    * **The state store provider** a processor asked for (RocksDB for the DeDuplication transformer's TTL state).
    """
    user = config.SPARK_CONF
    large = config.SOURCE_KAFKA_CONSUME_LARGE_MESSAGE_ENABLE or any(
        entry.settings.large_messages for _, entry in config.sink_configs
    )
    own_setting(spark, user, ARROW_BYTES, "2147483647", not large, "67108864b")  # Int.MaxValue: no per-row check
    own_setting(spark, user, CHECKPOINT_WRITER, FILESYSTEM_WRITER, checkpoint_local, None)
    provider = processor_settings.get(STATE_STORE_PROVIDER)
    own_setting(
        spark, user, STATE_STORE_PROVIDER, provider or ROCKSDB_STATE_STORE, provider is not None, HDFS_STATE_STORE
    )

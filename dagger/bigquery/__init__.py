"""``SINK_TYPE=bigquery``: rows typed through a proto message, written with the Storage Write API.

* **Typing**: output columns map to the fields of ``SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS`` by name, as in
  the Kafka sink (dotted columns fill nested fields, other columns are ignored). The table schema is the
  message's, through the project's type mapping in reverse: nested message → RECORD, repeated → REPEATED,
  map → REPEATED RECORD(key, value), ``google.protobuf.Timestamp`` → TIMESTAMP, Duration →
  RECORD(seconds, nanos), Struct → STRING (JSON), wrappers → their scalar, enum → STRING (value name),
  integers → INTEGER, float/double → FLOAT, bytes → BYTES.
* **Table management** (on start, on the driver): the dataset and table are created if missing (labels,
  location, optional day partitioning on a Timestamp field with expiry); fields added to the proto since
  are added to the table schema.
* **Delivery: exactly-once per micro-batch.** Each Spark task appends its rows as Arrow record batches to a
  PENDING write stream (with offsets, so a retried append cannot duplicate) and finalizes it; when every
  task of the micro-batch succeeded, the driver commits all the batch's streams atomically
  (``BatchCommitWriteStreams``). Before committing, it records the stream names under the checkpoint
  (``<checkpoint>/sinks/<SINK_NAME>/batch-<id>.json``); when Spark re-runs a micro-batch after a crash
  between the BigQuery commit and its own commit log, the recorded streams are found already committed
  (or are committed now: they hold the batch complete) and the re-run's streams are abandoned, so no row
  is written twice. Abandoned PENDING streams hold no visible rows and expire on their own.
* **Rejected rows**: a value the message cannot take (``INVALID_MESSAGE_ERROR``: an unknown enum name, an
  impossible cast) or rows BigQuery refuses (``SINK_4XX_ERROR``; a refused request is split until the
  refused rows are isolated) fail the job when their type is in ``SINK_ERROR_TYPES_FOR_FAILURE``; otherwise
  they go to the dead-letter output, counted. Server errors (5xx, unavailable) are retried with backoff
  until ``SINK_BIGQUERY_RETRY_DEADLINE_MS`` and then become ``SINK_5XX_ERROR`` rows.

The package: its keys (:mod:`~dagger.bigquery.settings`), the protobuf → BigQuery schema and the Arrow conversion
(:mod:`~dagger.bigquery.schema`), and the sink with its clients, the Storage Write API writer and the table set-up
(:mod:`~dagger.bigquery.sink`).
"""

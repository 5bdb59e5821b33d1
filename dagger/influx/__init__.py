"""``SINK_TYPE=influx``: rows as InfluxDB points, Dagger's point model, line protocol built column-wise.

Point model (Raystack Dagger's, column names decide):

* ``window_timestamp`` (a TIMESTAMP, e.g. ``TUMBLE_END(...) AS window_timestamp``) is the point's time,
  millisecond precision. Without it, the server's receive time is used.
* ``tag_*`` columns are tags whose name keeps the ``tag_`` prefix; ``label_*`` columns are tags named
  without the ``label_`` prefix. Null or empty tag values are left out (InfluxDB has no empty tags).
* Every other non-null column is a field: integers as integers (``42i``), floating point as floats
  (NaN and infinities are left out: InfluxDB cannot store them), booleans, strings; TIMESTAMP and DATE
  columns are written as ISO-8601 strings (Dagger needed ``CAST(... AS VARCHAR)`` for them); arrays, maps
  and structs as JSON strings.
* A row with no field is rejected (``INVALID_MESSAGE_ERROR``): it fails the batch, or goes to the
  dead-letter output when the job has one and the type is not in ``SINK_ERROR_TYPES_FOR_FAILURE``.

Server generations (``SINK_INFLUX_API_VERSION``): ``1`` posts to ``/write?db=&rp=&precision=ms`` with
the user and password (InfluxDB 1.x, what Dagger's influx-java client speaks); ``2`` writes through
``influxdb-client`` to ``/api/v2/write`` with a token and a bucket (InfluxDB 2.x, 3.x and 1.8+).

Delivery: every task sends its points before the micro-batch commits (in requests of
``SINK_INFLUX_BATCH_SIZE`` points). A point with the same measurement, tag set and time as an existing one
replaces it, so a re-run micro-batch (after a failure, or a replay) rewrites the same points:
**idempotent** as long as the rows carry ``window_timestamp``. The partial-write error "points beyond
retention policy dropped=N" is counted (``dropped``) and tolerated, as in Dagger; any other error fails the
micro-batch with the server's message. An unreachable server, a timeout, 429 or 5xx is retried with back-off
(``SINK_INFLUX_RETRIES``, ``SINK_INFLUX_RETRY_BACKOFF_MS``) before the micro-batch fails: never a silent drop.

The package: its keys (:mod:`~dagger.influx.settings`), Arrow → line protocol, column-wise
(:mod:`~dagger.influx.line_protocol`), and the sink with its writer and retries (:mod:`~dagger.influx.sink`).
"""

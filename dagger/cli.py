"""The ``dagger`` command line.

``dagger run CONFIG``       run a job (local mode on all cores, or inside spark-submit)
``dagger validate CONFIG``  check config, descriptors, SQL and sink mapping without consuming anything
``dagger test CONFIG``      run the job's test cases (``TESTS``) through its real path, with no broker
``dagger generate``         produce synthetic protobuf records of any message type to a Kafka topic
``dagger config-docs``      print the config reference generated from the config model
``dagger function-docs``    print the function reference generated from the udfs library

One module (~460 lines) because ``--help`` is the parser: every command's flags and help text sit together, and
each command's body is a short call into the job, the generator or the references.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dagger import job_log
from dagger.config.arguments import parse_arguments, split_config_tokens
from dagger.config.ignored import ignored_keys_set
from dagger.config.instants import parse_instant
from dagger.container import exec_role
from dagger.errors import DaggerConfigError, DaggerError
from dagger.kafka.client import client_config
from dagger.kafka.dead_letters import job_dead_letters
from dagger.longbow.classic import table_name
from dagger.longbow.plus import input_message
from dagger.longbow.schema import LongbowKind
from dagger.plugins.format import format_of
from dagger.plugins.source import source_of
from dagger.testing.command import run_tests
from dagger.worker_logging import DATE_FORMAT, FORMAT
from udfs.docs import render_functions

if TYPE_CHECKING:
    from dagger.config.model import JobConfig

EXAMPLES = """
examples:
  dagger validate configs/quickstart.json
  dagger test configs/quickstart.json            # the job's TESTS: records in, each sink's records out
  dagger run configs/quickstart.json --available-now
  dagger run job.json --from 2026-11-01T00:00:00Z --to 2026-11-02T00:00:00Z   # replay one day of Kafka, exit
  dagger run configs/parquet_backfill.json      # Parquet streams: the same SQL over history, then exit
  dagger run job.json --set SINK_TYPE=log --set 'STREAMS[0].SOURCE_KAFKA_TOPIC_NAMES=bookings-.*'
  spark-submit dagger/entry.py job.json          # the same job under spark-submit
  dagger generate --config configs/quickstart.json --count 100000   # load for the job's first stream

Config the way Dagger deployments pass it (combinable; each overrides the one before):
  CONFIG file  <  ConfigSource=ENVIRONMENT (every known key from the environment)
               <  --KEY value arguments, or --encodedArgs <base64 of ["--KEY","value",...]>  <  --set KEY=VALUE
  dagger run --encodedArgs "$(echo -n '["--FLINK_JOB_ID","bookings","--SINK_TYPE","log"]' | base64 -w0)" ...
  ConfigSource=ENVIRONMENT dagger run          # FLINK_SQL_QUERY, STREAMS, SINK_* ... from the environment

Config values may use ${ENV_VAR} (or ${ENV_VAR:-default}) for secrets.
Exit codes: 0 done, 1 the query failed while running, 2 invalid config (nothing was started).
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dagger",
        description="Dagger on Spark: run a Raystack-Dagger-style JSON job (Kafka protobuf streams -> "
        "Spark SQL -> sinks) on Apache Spark.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def job_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "config",
            metavar="CONFIG",
            nargs="?",
            help="job file: JSON object of Dagger keys (or .properties); or give the keys as Dagger does (below)",
        )
        p.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a config key (repeatable); STREAMS[i].KEY=VALUE sets a stream key",
        )

    run = sub.add_parser(
        "run",
        help="run a job",
        description="Run a job until it is stopped (Ctrl-C finishes the current micro-batch, then stops).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    job_args(run)
    run.add_argument(
        "--available-now",
        action="store_true",
        help="process everything the sources hold now, emit every event-time window the watermark closes, exit 0",
    )
    real_time_help = (
        "Spark's real-time mode (SPARK_TRIGGER_MODE=real-time): milliseconds of latency for Kafka streams of "
        "protobuf (plain or Confluent-framed) or JSON, a stateless SQL and one Kafka sink, all in the JVM; "
        "refused with the reasons otherwise"
    )
    run.add_argument("--real-time", action="store_true", help=real_time_help)
    run.add_argument(
        "--checkpoint-dir", metavar="DIR", help="checkpoint directory (overrides SPARK_CHECKPOINT_LOCATION)"
    )
    run.add_argument(
        "--from",
        dest="from_time",
        metavar="INSTANT",
        help="replay: start every Kafka stream at its first record at or after INSTANT (ISO-8601 such as "
        "2026-11-01T00:00:00Z, or epoch ms); uses its own checkpoint and commits no offsets to the group",
    )
    run.add_argument(
        "--to",
        dest="to_time",
        metavar="INSTANT",
        help="replay: stop before INSTANT (exclusive) and exit once the range is written; the range runs as "
        "one batch query, so every event-time window with data is emitted",
    )
    run.add_argument("--progress-interval", type=float, default=10.0, metavar="SECONDS", help="status line period")
    run.add_argument(
        "--log-file",
        metavar="PATH",
        help="the run's whole log, with every stack trace (the console shows one line per event and the cause "
        "last); default $DAGGER_LOG_FILE, else <tmp>/dagger/<job>.log",
    )

    validate = sub.add_parser(
        "validate",
        help="check a job without consuming anything",
        description="Check config, descriptors, SQL analysis and the SQL output against the sink message; "
        "print the final Spark SQL. Exit 0 when the job can run, 2 otherwise.",
    )
    job_args(validate)
    validate.add_argument(
        "--real-time",
        action="store_true",
        help="check the job for Spark's real-time mode (SPARK_TRIGGER_MODE=real-time): every reason it cannot run "
        "in it, and the task slots it holds",
    )
    validate.add_argument(
        "--full",
        action="store_true",
        help="always run Spark's own analysis (seconds more); by default a job whose plan can be read from its "
        "descriptors and SQL alone is checked without starting Spark, and any other with Spark",
    )

    _test_parser(sub, job_args)
    _generate_parser(sub)
    sub.add_parser("config-docs", help="print the config reference (markdown) generated from the config model")
    sub.add_parser("function-docs", help="print the function reference (markdown) generated from the udfs library")
    sub.add_parser("metrics-docs", help="print the metrics reference (markdown) generated from the telemetry module")
    return parser


TEST_EXAMPLES = """
examples:
  dagger test configs/quickstart.json                   # every case of the config's TESTS
  dagger test job.json --tests job.tests.json -k late   # the cases of a file whose name has "late" in it
  dagger test job.json --update                         # write what the job produced into EXPECTED, then read the diff
  dagger test job.json --restore-check                  # streaming cases again, restarted after every batch

A case (docs/testing.md) gives each table's records (INPUT, or INPUT_BATCHES in MODE streaming) and what each
sink must write (EXPECTED), or EXPECTED_DEAD_LETTERS / EXPECTED_LATE / EXPECTED_INVALID / EXPECTED_ERROR:
  "TESTS": [{"NAME": "counts a window",
             "INPUT": {"data_stream_0": [{"service_area_id": 7, "event_timestamp": "2026-01-01T00:00:10Z"}]},
             "EXPECTED": {"SINK": [{"service_area_id": 7, "booking_count": 1}]}, "PARTIAL": true}]
Records are encoded with each stream's schema and decoded by the job as records from Kafka; the SQL, UDFs and
processors run as in production; each sink's encoder writes and its records are read back. No broker, registry
server or destination is needed (descriptor sets may be local files).
Exit codes: 0 all passed, 1 a case failed, 2 invalid config or test file. The last line: N passed, N failed.
"""


def _test_parser(sub: argparse._SubParsersAction, job_args) -> None:  # noqa: ANN001
    test = sub.add_parser(
        "test",
        help="run a job's test cases through its real path, with no broker",
        description="Run the test cases of a job (its TESTS key, or --tests FILE): each case's records go "
        "through the job's decoding, SQL, processors and sink encoders in one local Spark session; one line per "
        "case, a diff for each failure.",
        epilog=TEST_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    job_args(test)
    test.add_argument("--tests", metavar="FILE", help="a JSON file of cases (a list, or an object with TESTS)")
    test.add_argument("-k", metavar="PATTERN", help="only the cases whose NAME matches (a glob, or part of it)")
    test.add_argument(
        "--update",
        action="store_true",
        help="rewrite each failing case's EXPECTED (and the counts it states) with what the job produced, in "
        "place: the file's formatting and key order stay; a case whose job fails is not touched",
    )
    test.add_argument(
        "--restore-check",
        action="store_true",
        help="run each streaming case twice more, stopped and restarted from its checkpoint after every "
        "micro-batch, and with every record in a micro-batch of its own: all three must write the same (state "
        "or watermark bugs)",
    )


GENERATE_EXAMPLES = """
examples:
  # the message, topic, brokers and descriptors of a job's first stream; 2 minutes of event time
  dagger generate --config configs/quickstart.json --count 120000 --events-per-second 1000
  # any message from a descriptor set, 20k records/s until Ctrl-C, 1% undecodable records
  dagger generate --stencil-url http://localhost:8000/examples.desc --message dagger.examples.BookingLogMessage \\
      --topic bookings --bootstrap-servers localhost:9092 --partitions 4 --count 0 --rate 20000 --malformed-ratio 0.01

Fields are filled by type: strings from a small vocabulary per field (<field>-0 .. <field>-N) so that GROUP BY
keys repeat, enums from their values, nested, repeated and map fields populated, one member of each oneof; the
event Timestamp advances at --events-per-second from --start. The same --seed gives the same records.
"""


def _generate_parser(sub: argparse._SubParsersAction) -> None:
    gen = sub.add_parser(
        "generate",
        help="produce synthetic protobuf records of any message type to a Kafka topic",
        description="Produce synthetic, valid protobuf records (optionally some malformed) to a Kafka topic, "
        "for load tests, benchmarks and trying a job out.",
        epilog=GENERATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gen.add_argument("--config", metavar="CONFIG", help="take message, topic, brokers and descriptors from a job")
    gen.add_argument("--stream", type=int, default=0, metavar="I", help="which of the job's STREAMS (default 0)")
    gen.add_argument("--stencil-url", action="append", default=[], metavar="URL", help="descriptor set (repeatable)")
    gen.add_argument("--message", metavar="NAME", help="fully qualified message name")
    gen.add_argument("--topic", metavar="TOPIC", help="topic to produce to (created if missing)")
    gen.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="Kafka brokers")
    gen.add_argument("--count", type=int, default=100_000, metavar="N", help="records (0: until Ctrl-C; 100000)")
    gen.add_argument("--rate", type=float, default=0.0, metavar="R", help="records/s (0: unthrottled, the default)")
    gen.add_argument("--partitions", type=int, metavar="P", help="create a missing topic with P partitions (1)")
    gen.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (0)")
    gen.add_argument(
        "--malformed-ratio", type=float, default=0.0, metavar="X", help="fraction of undecodable records (0)"
    )
    gen.add_argument(
        "--events-per-second", type=float, default=1000.0, metavar="E", help="event-time records per second (1000)"
    )
    gen.add_argument("--start", metavar="INSTANT", help="event time of the first record (ISO-8601; default now)")
    gen.add_argument(
        "--timestamp-field",
        metavar="FIELD",
        help="the event Timestamp field, by name or number (default: the job's INPUT_SCHEMA_EVENT_TIMESTAMP_"
        "FIELD_INDEX, else event_timestamp, else the first Timestamp field)",
    )
    gen.add_argument("--vocabulary", type=int, default=20, metavar="N", help="distinct values per string field (20)")


def _generate(args: argparse.Namespace) -> int:
    """``dagger generate``: resolve the target, then produce with a progress line every second."""
    from dagger.generate import RecordGenerator, produce_generated  # start-up: loads google, numpy, pyarrow
    from dagger.kafka.source import KafkaSource  # start-up: loads google, pyspark
    from dagger.schema.descriptor_sets import SchemaRegistry, StencilSettings  # start-up: loads google

    message, topic, bootstrap, timestamp_field = args.message, args.topic, args.bootstrap_servers, args.timestamp_field
    settings = StencilSettings(urls=list(args.stencil_url))
    connection: dict[str, str] = {}  # the stream's security settings (--config), as its consumers connect
    if args.config:
        from dagger.job import load_config  # start-up: loads fastavro, google, pyarrow, pyspark

        config = load_config(args.config)
        if not 0 <= args.stream < len(config.STREAMS):
            raise DaggerConfigError(f"--stream {args.stream}: {args.config} has {len(config.STREAMS)} stream(s)")
        stream = config.STREAMS[args.stream]
        if stream.source_name not in KafkaSource.names:
            raise DaggerConfigError(f"--stream {args.stream} of {args.config} is not a Kafka stream")
        if not format_of(stream).generates:
            raise DaggerConfigError(
                f"--stream {args.stream} of {args.config} reads {stream.INPUT_DATATYPE} records; dagger generate "
                "writes protobuf records only"
            )
        message = message or stream.format.INPUT_SCHEMA_PROTO_CLASS
        topic = topic or stream.settings.SOURCE_KAFKA_TOPIC_NAMES.split(",")[0].strip()
        bootstrap = bootstrap or stream.settings.SOURCE_KAFKA_CONSUMER_CONFIG_BOOTSTRAP_SERVERS
        connection = client_config(stream.settings, "stream_producer", table=stream.INPUT_SCHEMA_TABLE)
        connection = {k: v for k, v in connection.items() if k != "bootstrap.servers"}
        if timestamp_field is None and stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX is not None:
            timestamp_field = str(stream.format.INPUT_SCHEMA_EVENT_TIMESTAMP_FIELD_INDEX)
        if not settings.urls:
            settings = StencilSettings.from_config(config)
    missing = [
        flag
        for flag, value in (
            ("--message", message),
            ("--topic", topic),
            ("--bootstrap-servers", bootstrap),
            ("--stencil-url", settings.urls),
        )
        if not value
    ]
    if missing:
        raise DaggerConfigError(f"dagger generate needs {', '.join(missing)} (or --config with a Kafka stream)")
    if any(ch in topic for ch in "*|()[]^$\\"):
        raise DaggerConfigError(f"topic {topic!r} looks like a pattern; name one topic with --topic")
    start = None
    if args.start:
        start = parse_instant(args.start, "--start")
    descriptor = SchemaRegistry(settings).get().find_message(message, "--message")
    generator = RecordGenerator(
        descriptor,
        seed=args.seed,
        vocabulary=args.vocabulary,
        events_per_second=args.events_per_second,
        start=start,
        timestamp_field=timestamp_field,
        malformed_ratio=args.malformed_ratio,
    )
    log = logging.getLogger("dagger.generate")
    total = f"/{args.count:,}" if args.count else ""
    log.info(
        "producing %s %s records to %s on %s (event time field: %s)",
        f"{args.count:,}" if args.count else "unbounded",
        message,
        topic,
        bootstrap,
        generator.timestamp_field or "none",
    )

    def progress(produced: int, seconds: float) -> None:
        log.info(
            "produced %s%s records (%s records/s)", f"{produced:,}", total, f"{produced / max(seconds, 1e-9):,.0f}"
        )

    try:
        produce_generated(
            generator,
            bootstrap,
            topic,
            args.count,
            rate=args.rate,
            partitions=args.partitions,
            producer_config=connection,
            progress=progress,
        )
    except KeyboardInterrupt:
        log.info("stopped after %s records", f"{generator.produced:,}")
    except RuntimeError as exc:  # the broker refused or lost records
        print(f"dagger generate: {exc}", file=sys.stderr)
        return 1
    return 0


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format=FORMAT,
        datefmt=DATE_FORMAT,
        stream=sys.stderr,
        force=True,  # under spark-submit the root logger already has a handler at WARNING
    )
    for noisy in ("py4j", "urllib3", "httpx", "httpx2", "httpcore"):  # httpx*: the schema registry client
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dagger`` console script."""

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("driver", "executor"):  # a Spark-on-Kubernetes pod started from the image
        exec_role(argv)
    config_tokens: list[str] = []
    if argv and argv[0] in ("run", "validate"):
        rest, config_tokens = split_config_tokens(argv[1:])
        argv = [argv[0], *rest]
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 2
    _setup_logging(args.verbose)
    if args.command == "config-docs":
        from dagger.job.reference import render_reference  # start-up: loads fastavro, google, pyarrow, pyspark

        sys.stdout.write(render_reference())
        return 0
    if args.command == "metrics-docs":
        from dagger.telemetry.docs import render_metrics  # start-up: loads pyspark

        sys.stdout.write(render_metrics())
        return 0
    if args.command == "function-docs":
        sys.stdout.write(render_functions())
        return 0
    if args.command == "test":
        return run_tests(args)
    try:
        if args.command == "generate":
            return _generate(args)
        from dagger.job import load_config  # start-up: loads fastavro, google, pyarrow, pyspark

        if getattr(args, "real_time", False):
            args.overrides.append("SPARK_TRIGGER_MODE=real-time")
        config = load_config(args.config, args.overrides, arguments=parse_arguments(config_tokens, os.environ))
        if args.command == "validate":
            return _validate(config, full=args.full)

        job_log.start(
            args.log_file or os.environ.get(job_log.ENV) or job_log.default_path(config.job_slug), args.verbose
        )
        return _run(config, args)
    except DaggerConfigError as exc:
        print(f"dagger: {exc}", file=sys.stderr)
        return exc.exit_code
    except DaggerError as exc:  # a source, sink or server that failed the job's start: its message says it all
        job_log.write_trace("the job could not start:")
        print(f"dagger: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if args.verbose:
            raise

        job_log.write_trace("the job failed:")
        where = job_log.where()
        if where:
            print(f"dagger: {where}", file=sys.stderr)
        text = str(exc).strip().splitlines()
        print(f"dagger: {type(exc).__name__}: {text[0] if text else ''}", file=sys.stderr)
        return 1


def _run(config, args) -> int:  # noqa: ANN001
    from dagger.job import Job  # start-up: loads fastavro, google, pyarrow, pyspark

    from_ms, to_ms, checkpoint = _replay_range(config, args)
    job = Job(config, checkpoint_dir=checkpoint, available_now=args.available_now, from_ms=from_ms, to_ms=to_ms)
    job.check()  # config errors surface before Spark starts
    from dagger.runner import JobRunner  # start-up: loads pyspark

    return JobRunner(job, progress_interval=args.progress_interval).run()


def _replay_range(config, args) -> tuple[int | None, int | None, str | None]:  # noqa: ANN001
    """``--from``/``--to`` as epoch ms, and the replay's own checkpoint directory (unless one was given)."""

    if args.from_time is None and args.to_time is None:
        return None, None, args.checkpoint_dir
    start = parse_instant(args.from_time, "--from") if args.from_time else None
    end = parse_instant(args.to_time, "--to") if args.to_time else None
    if start and end and start >= end:
        raise DaggerConfigError(f"--from {args.from_time} must be before --to {args.to_time}")

    if not any(source_of(s).replayable for s in config.STREAMS):
        raise DaggerConfigError(
            "--from/--to replay Kafka streams; this job has none (Parquet streams use SOURCE_PARQUET_FILE_DATE_RANGE)"
        )

    def compact(instant) -> str:  # noqa: ANN001
        return instant.strftime("%Y%m%dT%H%M%SZ") if instant else "open"

    checkpoint = args.checkpoint_dir
    if checkpoint is None:
        live = config.SPARK_CHECKPOINT_LOCATION or str(Path("checkpoints") / config.job_slug)
        checkpoint = f"{live.rstrip('/')}-replay-{compact(start)}-{compact(end)}"
    logging.getLogger("dagger").info(
        "replay %s .. %s with checkpoint %s (the live job's checkpoint and consumer group are left alone)",
        args.from_time or "the configured start",
        args.to_time or "open end",
        checkpoint,
    )
    ms = lambda t: int(t.timestamp() * 1000) if t else None  # noqa: E731
    return ms(start), ms(end), checkpoint


def _validate(config: JobConfig, full: bool = False) -> int:
    from dagger.job import Job  # start-up: loads fastavro, google, pyarrow, pyspark

    job = Job(config, validating=True)
    job.check()
    plan, why = (None, "--full") if full else job.plan_without_spark()
    checked = "without Spark: read from the descriptors and the SQL (--full runs Spark's analysis)"
    if plan is None:
        plan = job.validate()
        checked = f"by Spark's analysis ({why})"
    out = sys.stdout
    sinks = ", ".join(f"{name} ({c.SINK_TYPE})" for name, c in config.sink_configs)
    out.write(f"config: OK ({len(config.STREAMS)} stream(s), sink(s): {sinks})\n")
    if config.sink_type_note:
        out.write(f"note: {config.sink_type_note}\n")
    ignored = ignored_keys_set(config)
    if ignored:
        out.write("accepted and ignored:\n  - " + "\n  - ".join(f"{key}: {why}" for key, why in ignored) + "\n")
    if job.descriptors.sources:
        out.write(f"descriptors: {', '.join(job.descriptors.sources)} (sha256 {job.descriptors.sha256})\n")
    else:
        out.write("descriptors: none (no stream or sink of this job is protobuf)\n")
    for stream in config.STREAMS:
        schema = plan.tables[stream.INPUT_SCHEMA_TABLE]
        where = source_of(stream).location(stream)
        out.write(
            f"stream {stream.INPUT_SCHEMA_TABLE}: {stream.source_name} {where} "
            f"as {format_of(stream).describe(stream)}, {len(schema.fields)} columns\n"
        )
    out.write("SQL as written:\n  " + config.sql.strip() + "\n")
    out.write("SQL as run by Spark:\n  " + plan.rewritten_sql.strip() + "\n")
    if plan.notes:
        out.write("rewritten for Spark:\n  - " + "\n  - ".join(plan.notes) + "\n")
    if plan.real_time:
        out.write("real-time mode:\n  - " + "\n  - ".join(plan.real_time) + "\n")
    if plan.connector:
        out.write(f"Kafka connector: {plan.connector}\n")
    if plan.unbounded_state:
        from dagger.sql.state import retention_note  # start-up: loads sqlglot

        out.write(
            f"state without bound ({retention_note(config.FLINK_RETENTION_IDLE_STATE_MINUTE)}):\n  - "
            + "\n  - ".join(plan.unbounded_state)
            + "\n"
        )
    if plan.longbow is not None:
        lb = plan.longbow
        reads = f", its range from {'longbow_duration' if lb.range == 'duration' else 'longbow_earliest/latest'}"
        if lb.kind is LongbowKind.CLASSIC and config.PROCESSOR_LONGBOW_STORE == "state":
            does = (
                f"each key's history kept in this job's state store (PROCESSOR_LONGBOW_STORE=state), its "
                f"{', '.join(lb.data_columns)} replaced by their history (ARRAY<STRING>, most recent first)"
            )
        elif lb.kind is LongbowKind.CLASSIC:
            does = (
                f"each row written to Bigtable table {table_name(config).path}, its "
                f"{', '.join(lb.data_columns)} replaced by their history (ARRAY<STRING>, most recent first)"
            )
        elif lb.kind is LongbowKind.WRITER:
            does = (
                f"each row written to Bigtable table {table_name(config).path} as {input_message(config)}, with "
                "bigtable_table_id, input_class_name and longbow_read_key appended (the synchronizer log)"
            )
        else:
            does = "proto_data appended: the serialized messages of the key's range (ARRAY<BINARY>, most recent first)"
        out.write(f"longbow: {lb.kind.label} ({lb.key}){reads if lb.range else ''}; {does}\n")
    out.write("output columns:\n")
    for f in plan.output_schema.fields:
        out.write(f"  {f.name}: {f.dataType.simpleString()}\n")
    out.write(f"output mode: {plan.output_mode}\n")
    for sink in plan.sinks:
        out.write(f"sink {sink.display_name}: {sink.describe()}\n")
        out.write(f"  on a re-run over input already written, it {sink.rerun}\n")

    dead_letter = job_dead_letters(config)
    out.write(
        f"dead-letter output: {dead_letter.describe() if dead_letter else 'none (rejected rows fail the batch)'}\n"
    )
    out.write(f"checked {checked}\n")
    if plan.problems:
        out.write("problems:\n  - " + "\n  - ".join(plan.problems) + "\n")
        return 2
    out.write("OK: the job can run\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

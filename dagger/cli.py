"""The ``dagger`` command line.

``dagger run CONFIG``       run a job (local mode on all cores, or inside spark-submit)
``dagger validate CONFIG``  check config, descriptors, SQL and sink mapping without consuming anything
``dagger config-docs``      print the config reference generated from the config model
``dagger function-docs``    print the function reference generated from the udfs library
"""

from __future__ import annotations

import argparse
import logging
import sys

from dagger.errors import DaggerConfigError

EXAMPLES = """
examples:
  dagger validate configs/quickstart.json
  dagger run configs/quickstart.json --available-now
  dagger run job.json --set SINK_TYPE=log --set 'STREAMS[0].SOURCE_KAFKA_TOPIC_NAMES=bookings-.*'
  spark-submit dagger/entry.py job.json          # the same job under spark-submit

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
        p.add_argument("config", metavar="CONFIG", help="job file: JSON object of Dagger keys (or .properties)")
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
    run.add_argument(
        "--checkpoint-dir", metavar="DIR", help="checkpoint directory (overrides SPARK_CHECKPOINT_LOCATION)"
    )
    run.add_argument("--progress-interval", type=float, default=10.0, metavar="SECONDS", help="status line period")

    validate = sub.add_parser(
        "validate",
        help="check a job without consuming anything",
        description="Check config, descriptors, SQL analysis and the SQL output against the sink message; "
        "print the final Spark SQL. Exit 0 when the job can run, 2 otherwise.",
    )
    job_args(validate)

    sub.add_parser("config-docs", help="print the config reference (markdown) generated from the config model")
    sub.add_parser("function-docs", help="print the function reference (markdown) generated from the udfs library")
    return parser


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)-5s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
        force=True,  # under spark-submit the root logger already has a handler at WARNING
    )
    for noisy in ("py4j", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dagger`` console script."""
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 2
    _setup_logging(args.verbose)
    if args.command == "config-docs":
        from dagger.config.docs import render_reference

        sys.stdout.write(render_reference())
        return 0
    if args.command == "function-docs":
        from udfs.docs import render_functions

        sys.stdout.write(render_functions())
        return 0
    try:
        from dagger.config import load_config

        config = load_config(args.config, args.overrides)
        if args.command == "validate":
            return _validate(config)
        return _run(config, args)
    except DaggerConfigError as exc:
        print(f"dagger: {exc}", file=sys.stderr)
        return exc.exit_code


def _run(config, args) -> int:  # noqa: ANN001
    from dagger.stream_manager import StreamManager

    manager = StreamManager(config, checkpoint_dir=args.checkpoint_dir, available_now=args.available_now)
    manager.check_descriptors()  # config errors surface before Spark starts
    return manager.run(progress_interval=args.progress_interval)


def _validate(config) -> int:  # noqa: ANN001
    from dagger.stream_manager import StreamManager

    manager = StreamManager(config)
    manager.check_descriptors()
    plan = manager.plan()
    out = sys.stdout
    sinks = ", ".join(f"{name} ({c.SINK_TYPE})" for name, c in config.sink_configs)
    out.write(f"config: OK ({len(config.STREAMS)} stream(s), sink(s): {sinks})\n")
    out.write(f"descriptors: {', '.join(manager.descriptors.sources)} (sha256 {manager.descriptors.sha256})\n")
    for stream in config.STREAMS:
        schema = plan.tables[stream.INPUT_SCHEMA_TABLE]
        out.write(
            f"stream {stream.INPUT_SCHEMA_TABLE}: {stream.source_name} topics /{stream.SOURCE_KAFKA_TOPIC_NAMES}/ "
            f"as {stream.INPUT_SCHEMA_PROTO_CLASS}, {len(schema.fields)} columns\n"
        )
    out.write("SQL as written:\n  " + config.sql.strip() + "\n")
    out.write("SQL as run by Spark:\n  " + plan.rewritten_sql.strip() + "\n")
    out.write("output columns:\n")
    for f in plan.output_schema.fields:
        out.write(f"  {f.name}: {f.dataType.simpleString()}\n")
    out.write(f"output mode: {plan.output_mode}\n")
    for sink in plan.sinks:
        out.write(f"sink {sink.display_name}: {sink.describe()}\n")
    from dagger.dead_letter import DeadLetterSpec

    dead_letter = DeadLetterSpec.from_config(config)
    out.write(
        f"dead-letter output: {dead_letter.describe() if dead_letter else 'none (rejected rows fail the batch)'}\n"
    )
    if plan.problems:
        out.write("problems:\n  - " + "\n  - ".join(plan.problems) + "\n")
        return 2
    out.write("OK: the job can run\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Soak (``make soak``): a window job with an HTTP lookup, fed at a fixed rate for a long time, watched from outside.

What runs: ``dagger run`` (a separate process, the README's defaults) of a 10-second tumbling window over the
bookings, grouped by service area and type, each window row enriched by an HTTP lookup of its service area
(``testing.lookup_server``, 5 ms per answer), written as JSON to Kafka. A producer feeds
``SOAK_RATE`` (2,000) records/s with their event time at the wall clock, a second's records in one batch per
partition, for ``SOAK_SECONDS`` (1,800) counted from the job's first finished micro-batch (its start-up, ~20 s
here and more on a busy machine, is not part of the soak; ``first_batch_at_s`` in the results). On the embedded broker a higher rate makes the broker, not the job, set the
pace after a quarter of an hour: its fetches slow down as a partition grows (docs/brokers.md, defect 4).

What is recorded every ``SOAK_SAMPLE_SECONDS``: the resident memory of every process of the job (the JVM, the
Python driver, the fork server, Spark's Python daemon and workers; read from /proc), and from the job's own
``/metrics``: rows in state, the largest consumer lag, records read, micro-batches, lookup calls. At the end the
feed stops, a few records an hour later in event time close every window, and the output is checked exactly:
the windows' ``booking_count`` add up to the records produced, and every window row carries its lookup's answer.

Verdicts (``make soak`` exits 1 when one fails): memory flat after ``SOAK_WARMUP_SECONDS`` (the median total
RSS of the last tenth of the run within ``SOAK_MAX_DRIFT`` of the first tenth after warm-up), lag bounded (never
more than ``SOAK_MAX_LAG_SECONDS`` of input after warm-up), the output exact. Results: ``soak.json``, ``soak.md``
and ``soak.png`` (RSS per process kind, lag and state rows over time) in ``SOAK_RESULTS_DIR``
(``bench/results``). The suite runs a short setting of the same code (``tests/integration/bench/test_soak.py``).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TZ", "UTC")

WINDOW_SECONDS = 10
#: the job's start-up and first micro-batch (a backlog of the feed) must end within this; ~20 s on an idle machine
START_LIMIT_SECONDS = 300
CLOSERS = 4  # records an hour after the feed, one per partition and more: they close every window
PARTITIONS = 2
SQL = (
    "SELECT service_area_id, service_type, COUNT(1) AS booking_count, "
    f"TUMBLE_END(rowtime, INTERVAL '{WINDOW_SECONDS}' SECOND) AS window_timestamp FROM data_stream_0 "
    f"GROUP BY service_area_id, service_type, TUMBLE(rowtime, INTERVAL '{WINDOW_SECONDS}' SECOND)"
)


@dataclass
class Settings:
    """One soak's shape; ``from_env`` reads the ``SOAK_*`` variables."""

    seconds: float = 1800
    rate: float = 2000  # the embedded broker serves 5,000 records/s for about 15 minutes only (docs/brokers.md)
    sample_seconds: float = 5
    # the JVM's heap grows to its working size (~1.1 GiB under -Xmx1g) for the first ~8 minutes: measured in
    # bench/results/soak.json (JVM 778 MiB at 2 min, 1,027 at 8, then 1,056-1,081 to the end)
    warmup_seconds: float = 600
    max_drift: float = 0.10
    max_lag_seconds: float = 15
    probe: bool = True  # time a plain client's fetch of the input's newest records with every sample
    results: Path = ROOT / "bench" / "results"

    @classmethod
    def from_env(cls) -> Settings:
        base = cls()
        return cls(
            seconds=float(os.environ.get("SOAK_SECONDS", base.seconds)),
            rate=float(os.environ.get("SOAK_RATE", base.rate)),
            sample_seconds=float(os.environ.get("SOAK_SAMPLE_SECONDS", base.sample_seconds)),
            warmup_seconds=float(os.environ.get("SOAK_WARMUP_SECONDS", base.warmup_seconds)),
            max_drift=float(os.environ.get("SOAK_MAX_DRIFT", base.max_drift)),
            max_lag_seconds=float(os.environ.get("SOAK_MAX_LAG_SECONDS", base.max_lag_seconds)),
            probe=os.environ.get("SOAK_PROBE", "1") not in ("0", "false"),
            results=Path(os.environ.get("SOAK_RESULTS_DIR", str(base.results))),
        )


@dataclass
class Sample:
    """What the soak saw at one moment (``t``: seconds since the job's launch)."""

    t: float
    rss: dict[str, int]  # process kind -> resident bytes, summed over the processes of that kind
    processes: int
    pss: int  # the tree's proportional set size: shared pages counted once
    produced: int
    metrics: dict[str, float] = field(default_factory=dict)


def memory_by_kind(root: int) -> tuple[dict[str, int], int, int]:
    """Resident bytes of ``root``'s process tree by kind (:func:`testing.proctree.memory_by_kind`), the
    number of processes, and the tree's proportional set size (forked workers share pages with their parent:
    the RSS sum counts those twice)."""
    from testing import proctree

    kinds = proctree.memory_by_kind(root)
    rss = {kind: entry["rss"] for kind, entry in kinds.items()}
    return rss, sum(e["processes"] for e in kinds.values()), sum(e["pss"] for e in kinds.values())


def job_config(bootstrap: str, descriptors: str, source: str, sink: str, lookup: Any, port: int) -> dict:
    """The soak's job: the benchmark's job (:func:`bench.streaming.job_config`) with the window, the lookup of
    each window row's service area, a JSON Kafka sink and the job's metrics on ``port``."""
    from bench.streaming import job_config as bench_job

    data = bench_job(bootstrap, descriptors, source, sink, SQL, "")
    del data["SINK_KAFKA_PROTO_MESSAGE"]
    post = {
        "external_source": {"http": [lookup.customers_lookup("service_area_id", {"area_name": "$.name"})]},
        "internal_source": [{"output_field": "*", "value": "*", "type": "sql"}],
    }
    data.update(
        FLINK_JOB_ID=f"soak-{uuid.uuid4().hex[:6]}",
        FLINK_WATERMARK_DELAY_MS="1000",
        PROCESSOR_POSTPROCESSOR_ENABLE="true",
        PROCESSOR_POSTPROCESSOR_CONFIG=json.dumps(post),
        SINK_KAFKA_DATA_TYPE="JSON",
        METRIC_TELEMETRY_ENABLE="true",
        METRIC_PROMETHEUS_PORT=str(port),
    )
    # SOAK_SET="KEY=VALUE;KEY=VALUE": job settings of an experiment (e.g. SPARK_EVENT_TIME_ALIGNMENT=false)
    for pair in filter(None, os.environ.get("SOAK_SET", "").split(";")):
        key, _, value = pair.partition("=")
        data[key.strip()] = value.strip()
    return data


def _feed(bootstrap: str, topic: str, booking, rate: float, stop: threading.Event, produced: list[int]) -> None:  # noqa: ANN001
    from dagger.generate import RecordGenerator, produce_generated

    generator = RecordGenerator(booking, seed=7, events_per_second=rate)
    produced[0] = produce_generated(
        generator,
        bootstrap,
        topic,
        0,
        rate=rate,
        # a second's records in one produce batch per partition
        batch_size=max(100, int(rate)),
        progress=lambda n, _s: produced.__setitem__(0, n),
        stop=stop.is_set,
    )


def _close_windows(bootstrap: str, topic: str, booking) -> dt.datetime:  # noqa: ANN001
    """Produce :data:`CLOSERS` records an hour ahead in event time: the watermark passes every fed window."""
    from dagger.generate import RecordGenerator, produce_generated

    later = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(hours=1)
    # at the start of a window, so the closers (one a second) all fall into one window, which stays open
    later -= dt.timedelta(seconds=later.timestamp() % WINDOW_SECONDS)
    produce_generated(RecordGenerator(booking, seed=8, start=later, events_per_second=1), bootstrap, topic, CLOSERS)
    return later


def _output(bootstrap: str, topic: str) -> list[dict]:
    """Every row of the output topic: exactly as many as its partitions hold (fetch-path high watermarks)."""
    from testing.produce import consume_all, topic_size

    size = topic_size(bootstrap, topic)
    # a long wait per fetch: the embedded broker answers short ones with nothing once it holds many batches
    wait = {"fetch.wait.max.ms": "500"}
    return [json.loads(m.value()) for m in consume_all(bootstrap, topic, expected=size, config=wait)]


class FetchProbe:
    """Times what a plain client (nothing of ours) waits for the newest records of the input topic's first
    partition: the broker's own fetch cost under the soak's load, beside the job's."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer

        self.topic = topic
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
        )

    def seconds(self, timeout: float = 30.0) -> float:
        """Seconds until the record just before the partition's end arrives (``timeout`` if it does not)."""
        from confluent_kafka import TopicPartition

        _, high = self.consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=timeout)
        if high <= 0:
            return 0.0
        self.consumer.assign([TopicPartition(self.topic, 0, max(high - 100, 0))])
        began = time.perf_counter()
        while time.perf_counter() - began < timeout:
            message = self.consumer.poll(min(1.0, timeout))
            if message is not None and not message.error():
                return time.perf_counter() - began
        return timeout

    def close(self) -> None:
        self.consumer.close()


def run_soak(settings: Settings, log=print) -> dict:  # noqa: ANN001, C901 - one sequence, read top to bottom
    """Run one soak with ``settings``; returns the results (also written to ``settings.results``)."""
    from dagger.schema.descriptor_sets import DescriptorSet
    from testing.broker import Broker, free_port
    from testing.descriptor_server import DescriptorServer
    from testing.job_metrics import scrape
    from testing.lookup_server import LookupServer
    from testing.process import stop_process
    from testing.produce import topic_size

    booking = DescriptorSet([("x", (ROOT / "descriptors" / "examples.desc").read_bytes())]).find_message(
        "dagger.examples.BookingLogMessage"
    )
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    samples: list[Sample] = []
    with Broker() as broker, DescriptorServer(ROOT / "descriptors") as stencil, LookupServer(delay_ms=5) as lookup:
        source, out = f"soak-in-{uuid.uuid4().hex[:6]}", f"soak-out-{uuid.uuid4().hex[:6]}"
        broker.create_topic(source, PARTITIONS)
        broker.create_topic(out, PARTITIONS)
        port = free_port()
        job = work / "job.json"
        job.write_text(
            json.dumps(job_config(broker.bootstrap, stencil.url("examples.desc"), source, out, lookup, port))
        )
        log_path = work / "job.log"
        log(f"[soak] {settings.seconds:.0f} s at {settings.rate:,.0f} records/s; the job logs to {log_path}")
        produced = [0]
        stop = threading.Event()
        feeder = threading.Thread(
            target=_feed, args=(broker.bootstrap, source, booking, settings.rate, stop, produced), daemon=True
        )
        with log_path.open("w") as log_file:
            launched = time.time()
            process = subprocess.Popen(
                [sys.executable, "-m", "dagger", "run", str(job), "--checkpoint-dir", str(work / "cp")],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
            )
            probe = FetchProbe(broker.bootstrap, source) if settings.probe else None
            try:
                feeder.start()
                next_sample, next_line = launched, launched + 60
                running_since: float | None = None  # the job's first finished micro-batch: the soak's clock starts
                while running_since is None or time.time() - running_since < settings.seconds:
                    if process.poll() is not None:
                        raise RuntimeError(f"the job exited with {process.returncode}: {log_path.read_text()[-3000:]}")
                    if running_since is None and time.time() - launched > START_LIMIT_SECONDS:
                        raise RuntimeError(
                            f"the job finished no micro-batch in {START_LIMIT_SECONDS} s: {log_path.read_text()[-3000:]}"
                        )
                    if time.time() >= next_sample:
                        rss, count, pss = memory_by_kind(process.pid)
                        t = round(time.time() - launched, 1)
                        sample = Sample(t, rss, count, pss, produced[0], scrape(port))
                        if probe is not None:
                            sample.metrics["probe_fetch_seconds"] = probe.seconds()
                        samples.append(sample)
                        if running_since is None and sample.metrics.get("batches", 0) >= 1:
                            running_since = time.time()
                            log(f"[soak] the job's first micro-batch finished {t:.0f} s after its launch")
                        next_sample += settings.sample_seconds
                        if time.time() >= next_line:
                            next_line += 60
                            log(
                                f"[soak] {sample.t:.0f} s: RSS {sum(rss.values()) / 2**20:,.0f} MiB in {count}"
                                f" processes, lag {sample.metrics.get('lag', 0):,.0f}, state rows"
                                f" {sample.metrics.get('state_rows', 0):,.0f}, read {sample.metrics.get('read', 0):,.0f}"
                                f" of {produced[0]:,}"
                            )
                    time.sleep(0.2)
                stop.set()
                feeder.join(60)
                fed = produced[0]
                later = _close_windows(broker.bootstrap, source, booking)
                total = fed + CLOSERS
                if topic_size(broker.bootstrap, source) != total:
                    raise RuntimeError(f"the input topic holds {topic_size(broker.bootstrap, source):,}, not {total:,}")
                log(f"[soak] fed {fed:,} records; waiting for the job to read them and close every window")
                deadline = time.time() + 120 + settings.max_lag_seconds
                metrics: dict[str, float] = {}
                while time.time() < deadline:
                    metrics = scrape(port)
                    if metrics.get("read", 0) >= total and metrics.get("lag", 1) == 0:
                        break
                    if process.poll() is not None:
                        raise RuntimeError(f"the job exited with {process.returncode}: {log_path.read_text()[-3000:]}")
                    time.sleep(1)
                drained = time.time() - launched
                # the closers' batch moves the watermark; the next (no-data) batch emits the last windows
                rows: list[dict] = []
                emitted_deadline = time.time() + 60
                while time.time() < emitted_deadline:
                    rows = _output(broker.bootstrap, out)
                    if sum(r["booking_count"] for r in rows) >= fed:
                        break
                    time.sleep(2)
                rows = _output(broker.bootstrap, out)
            finally:
                stop.set()
                stop_process(process, 60)
                if probe is not None:
                    probe.close()
        final = metrics
    counted = sum(r["booking_count"] for r in rows)
    read = int(final.get("read", 0))  # every record the job read, the closers included
    closed_by = later.isoformat().replace("+00:00", "")
    fed_windows = [r for r in rows if r["window_timestamp"] < closed_by]
    unenriched = [r for r in rows if r.get("area_name") != f"name-{r['service_area_id']}"]
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in settings.__dict__.items()},
        "fed": fed,
        "read": read,
        "window_rows": len(fed_windows),
        "counted_in_windows": sum(r["booking_count"] for r in fed_windows),
        "rows_without_lookup_answer": len(unenriched),
        "rows_after_the_feed": [r for r in rows if r["window_timestamp"] >= closed_by],
        "lookup_calls": sum(lookup.calls.values()),
        "first_batch_at_s": round(running_since - launched, 1),
        "drained_at_s": round(drained, 1),
        "job_log": str(log_path),
        "exact": counted == fed and read == fed + CLOSERS and not unenriched,
        "samples": [s.__dict__ for s in samples],
    }
    results.update(verdicts(samples, settings))
    write(results, settings)
    return results


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def verdicts(samples: list[Sample], settings: Settings) -> dict:
    """Memory drift and lag after warm-up, and whether they are within the settings' bounds."""
    steady = [s for s in samples if s.t >= settings.warmup_seconds]
    tenth = max(1, len(steady) // 10)
    totals = [sum(s.rss.values()) for s in steady]
    first, last = _median(totals[:tenth]), _median(totals[-tenth:])
    lags = [s.metrics.get("lag", 0.0) for s in steady]
    drift = (last - first) / first if first else 0.0
    max_lag_s = max(lags, default=0.0) / settings.rate
    peak = max((sum(s.rss.values()) for s in samples), default=0)
    pss = [s.pss for s in steady]
    by_kind: dict[str, int] = {}
    for s in samples:
        for kind, value in s.rss.items():
            by_kind[kind] = max(by_kind.get(kind, 0), value)
    return {
        "steady_samples": len(steady),
        "rss_first_tenth_mib": round(first / 2**20),
        "rss_last_tenth_mib": round(last / 2**20),
        "rss_drift": round(drift, 4),
        "peak_rss_mib": round(peak / 2**20),
        "pss_first_tenth_mib": round(_median(pss[:tenth]) / 2**20),
        "pss_last_tenth_mib": round(_median(pss[-tenth:]) / 2**20),
        "peak_rss_by_kind_mib": {k: round(v / 2**20) for k, v in sorted(by_kind.items())},
        "rss_by_kind_first_last_mib": {
            kind: [
                round(_median([s.rss.get(kind, 0) for s in steady[:tenth]]) / 2**20),
                round(_median([s.rss.get(kind, 0) for s in steady[-tenth:]]) / 2**20),
            ]
            for kind in sorted(by_kind)
            if by_kind[kind] > 2**20
        },
        "max_state_rows": max((s.metrics.get("state_rows", 0) for s in steady), default=0),
        "max_lag_records": max(lags, default=0),
        "max_lag_seconds": round(max_lag_s, 2),
        "memory_flat": bool(steady) and drift <= settings.max_drift,
        "lag_bounded": bool(steady) and max_lag_s <= settings.max_lag_seconds,
    }


def write(results: dict, settings: Settings) -> None:
    """``soak.json``, ``soak.md`` and ``soak.png`` in ``settings.results``."""
    settings.results.mkdir(parents=True, exist_ok=True)
    (settings.results / "soak.json").write_text(json.dumps(results, indent=1) + "\n")
    plot(results, settings.results / "soak.png")
    s = results
    lines = [
        "# Soak",
        "",
        f"Generated by `make soak` (`bench/soak.py`) on {s['machine']}: a 10-second tumbling window grouped by"
        " service area and type, each window row enriched by an HTTP lookup (5 ms answers), JSON to Kafka;"
        f" `dagger run` with the defaults, fed {s['settings']['rate']:,.0f} records/s for"
        f" {s['settings']['seconds']:,.0f} s, sampled every {s['settings']['sample_seconds']:g} s;"
        f" verdicts after a {s['settings']['warmup_seconds']:,.0f} s warm-up.",
        "",
        "![RSS, lag and state rows over time](soak.png)",
        "",
        "| | result | bound |",
        "|---|---|---|",
        f"| records fed / read | {s['fed']:,} / {s['read']:,} | equal |",
        f"| counted in windows | {s['counted_in_windows']:,} in {s['window_rows']:,} window rows | = fed |",
        f"| window rows without their lookup answer | {s['rows_without_lookup_answer']} | 0 |",
        f"| total RSS, first / last tenth after warm-up | {s['rss_first_tenth_mib']:,} / {s['rss_last_tenth_mib']:,}"
        f" MiB (drift {s['rss_drift']:+.1%}) | drift ≤ {s['settings']['max_drift']:.0%}"
        f" → {'flat' if s['memory_flat'] else 'NOT flat'} |",
        f"| peak RSS | {s['peak_rss_mib']:,} MiB | |",
        f"| total PSS (shared pages once), first / last tenth | {s['pss_first_tenth_mib']:,} /"
        f" {s['pss_last_tenth_mib']:,} MiB | |",
        f"| largest consumer lag after warm-up | {s['max_lag_records']:,.0f} records ({s['max_lag_seconds']} s of"
        f" input) | ≤ {s['settings']['max_lag_seconds']:g} s → {'bounded' if s['lag_bounded'] else 'NOT bounded'} |",
        f"| most rows in state after warm-up | {s['max_state_rows']:,.0f} | |",
        "",
        "RSS by process kind after warm-up, first → last tenth (MiB): "
        + ", ".join(f"{k} {a:,} → {b:,}" for k, (a, b) in s.get("rss_by_kind_first_last_mib", {}).items())
        + ".",
        "",
        "Peak RSS by process kind (MiB): "
        + ", ".join(f"{k} {v:,}" for k, v in s["peak_rss_by_kind_mib"].items())
        + ".",
        "",
    ]
    (settings.results / "soak.md").write_text("\n".join(lines))


def plot(results: dict, path: Path) -> None:
    """RSS by process kind and in total, consumer lag and state rows, over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = results["samples"]
    t = [s["t"] / 60 for s in samples]
    kinds = sorted({k for s in samples for k in s["rss"]})
    fig, (rss, lag, state, phases) = plt.subplots(4, 1, figsize=(10, 12), sharex=True)
    for kind in kinds:
        rss.plot(t, [s["rss"].get(kind, 0) / 2**20 for s in samples], label=kind)
    rss.plot(t, [sum(s["rss"].values()) / 2**20 for s in samples], label="total RSS", color="black", linewidth=2)
    rss.plot(t, [s["pss"] / 2**20 for s in samples], label="total PSS", color="black", linestyle="--")
    rss.set_ylabel("RSS (MiB)")
    rss.legend(loc="upper left", fontsize="small", ncol=3)
    lag.plot(t, [s["metrics"].get("lag", 0) for s in samples], color="tab:red", label="consumer lag (the job's gauge)")
    behind = [max(0, s["produced"] - s["metrics"].get("read", 0)) for s in samples]
    lag.plot(t, behind, color="tab:orange", linestyle="--", label="produced - read")
    lag.set_ylabel("records")
    lag.legend(loc="upper left", fontsize="small")
    state.plot(t, [s["metrics"].get("state_rows", 0) for s in samples], color="tab:green")
    state.set_ylabel("rows in state")
    names = sorted({k for s in samples for k in s["metrics"] if k.startswith("phase_")} - {"phase_triggerExecution"})
    mid = [(a["t"] + b["t"]) / 120 for a, b in itertools.pairwise(samples)]
    for name in names:
        phases.plot(mid, _per_batch(samples, name), label=name.removeprefix("phase_"))
    probes = [
        (s["t"] / 60, s["metrics"]["probe_fetch_seconds"]) for s in samples if "probe_fetch_seconds" in s["metrics"]
    ]
    if probes:
        phases.plot(*zip(*probes, strict=True), color="black", linestyle=":", label="plain client's fetch (s)")
    phases.set_ylabel("seconds per micro-batch")
    phases.set_yscale("symlog", linthresh=0.01)
    phases.legend(loc="upper left", fontsize="small", ncol=4)
    phases.set_xlabel("minutes since launch")
    warmup = results["settings"]["warmup_seconds"] / 60
    for axis in (rss, lag, state, phases):
        axis.axvline(warmup, color="grey", linestyle=":", linewidth=1)
        axis.grid(alpha=0.3)
    fig.suptitle(f"Soak: window job + HTTP lookup at {results['settings']['rate']:,.0f} records/s")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _per_batch(samples: list[dict], name: str) -> list[float]:
    """Seconds of ``name`` (a cumulative counter) per micro-batch completed between consecutive samples."""
    out = []
    for a, b in itertools.pairwise(samples):
        batches = b["metrics"].get("batches", 0) - a["metrics"].get("batches", 0)
        spent = b["metrics"].get(name, 0) - a["metrics"].get(name, 0)
        out.append(spent / batches if batches > 0 else float("nan"))
    return out


def rejudge(path: Path, settings: Settings) -> dict:
    """The verdicts of a recorded soak (``soak.json``) under ``settings`` (e.g. another warm-up), written again."""
    results = json.loads(path.read_text())
    samples = [Sample(**sample) for sample in results["samples"]]
    recorded = results["settings"]
    results["settings"] = {
        **recorded,
        "warmup_seconds": settings.warmup_seconds,
        "max_drift": settings.max_drift,
        "max_lag_seconds": settings.max_lag_seconds,
    }
    settings = Settings(**{**settings.__dict__, "rate": recorded["rate"], "seconds": recorded["seconds"]})
    results.update(verdicts(samples, settings))
    write(results, settings)
    return results


def main() -> None:
    settings = Settings.from_env()
    if len(sys.argv) == 3 and sys.argv[1] == "--rejudge":  # bench/soak.py --rejudge soak.json: verdicts again
        results = rejudge(Path(sys.argv[2]), settings)
    else:
        results = run_soak(settings, log=lambda line: print(line, flush=True))
    print((settings.results / "soak.md").read_text())
    failed = [name for name in ("exact", "memory_flat", "lag_bounded") if not results[name]]
    if failed:
        sys.exit(f"soak failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()

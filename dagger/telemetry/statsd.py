"""StatsD / DogStatsD push with Dagger's dotted names and the ``job_id`` tag (``METRIC_STATSD_HOST``, ``_PORT``,
``_TAGS``), so dashboards built on Dagger's StatsD metrics keep working.

After every micro-batch the job's counters are sent as the increase since the last push (``|c``) and its gauges
as values (``|g``), tagged DogStatsD-style (``|#job_id:bookings,...``), over UDP (a lost datagram loses one
push, never blocks the job). The line protocol is a few lines of the standard library, as in Dagger's
java-dogstatsd-client.
"""

from __future__ import annotations

import logging
import socket

from dagger.telemetry.metrics import JobMetrics, Metric

log = logging.getLogger("dagger")

#: Prometheus name → Dagger's StatsD name where Dagger had one; label → Dagger's tag name
DAGGER_NAMES = {
    "dagger_fatal_exceptions_total": "fatal.exception",
    "dagger_non_fatal_exceptions_total": "non.fatal.exception",
    "dagger_late_records_dropped_total": "late.records.dropped",
    "dagger_kafka_consumer_lag_max": "records.lag.max",
    "dagger_invalid_records_total": "filtered_invalid_records",
}
DAGGER_TAGS = {
    "dagger_fatal_exceptions_total": {"exception_type": "fatal_exception_type"},
    "dagger_non_fatal_exceptions_total": {"exception_type": "non_fatal_exception_type"},
}
MAX_DATAGRAM = 1400


def statsd_name(metric: Metric) -> str:
    """Dagger's name, else the Prometheus name without ``dagger_`` and ``_total``, dotted."""
    if metric.name in DAGGER_NAMES:
        return DAGGER_NAMES[metric.name]
    return metric.name.removeprefix("dagger_").removesuffix("_total").replace("_", ".")


class StatsdPusher:
    """Pushes :class:`JobMetrics` to a StatsD/DogStatsD agent at ``host:port``."""

    def __init__(self, metrics: JobMetrics, job_id: str, host: str, port: int, tags: dict[str, str] | None = None):
        self.metrics = metrics
        self.address = (host, port)
        self.tags = {"job_id": job_id, **(tags or {})}
        self._sent: dict[tuple[str, tuple], float] = {}
        self._socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)

    def lines(self) -> list[str]:
        """The lines of one push (counters as increases since the last one)."""
        out = []
        for metric, labels, value in self.metrics.values():
            if metric.kind == "histogram" or metric.kind == "info":
                continue
            names = DAGGER_TAGS.get(metric.name, {})
            tags = {**self.tags, **{names.get(k, k): v for k, v in labels.items()}}
            tag_text = ",".join(f"{k}:{_clean(str(v))}" for k, v in tags.items())
            name = statsd_name(metric)
            if metric.kind == "counter":
                key = (metric.name, tuple(sorted(labels.items())))
                delta = float(value) - self._sent.get(key, 0.0)
                self._sent[key] = float(value)
                if delta <= 0:
                    continue
                out.append(f"{name}:{_number(delta)}|c|#{tag_text}")
            else:
                out.append(f"{name}:{_number(float(value))}|g|#{tag_text}")
        return out

    def push(self) -> None:
        """Send one push; a network error is logged once per push, never raised."""
        packet: list[str] = []
        try:
            for line in self.lines():
                if packet and sum(len(p) + 1 for p in packet) + len(line) > MAX_DATAGRAM:
                    self._socket.sendto("\n".join(packet).encode(), self.address)
                    packet = []
                packet.append(line)
            if packet:
                self._socket.sendto("\n".join(packet).encode(), self.address)
        except OSError as exc:
            log.warning("StatsD push to %s:%s failed: %s", *self.address, exc)

    def close(self) -> None:
        self._socket.close()


def parse_tags(text: str | None) -> dict[str, str]:
    """``METRIC_STATSD_TAGS``: ``key:value,key2:value2`` (a tag without a value gets an empty one)."""
    tags = {}
    for part in (text or "").split(","):
        if part.strip():
            key, _, value = part.strip().partition(":")
            tags[key.strip()] = value.strip()
    return tags


def _clean(value: str) -> str:
    return value.replace(",", "_").replace("|", "_").replace("#", "_").replace("\n", " ")


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)

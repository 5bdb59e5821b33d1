"""The driver's Prometheus endpoint (``METRIC_PROMETHEUS_PORT``, ``/metrics``): :class:`JobMetrics` rendered at
each scrape by a prometheus_client collector, in its own registry (no process or platform metrics of the
Python driver mixed in). Every metric of :data:`~dagger.telemetry.metrics.METRICS` is in every scrape (its HELP
and TYPE at least, before anything happened), so dashboards and alerts always find their names."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from dagger.telemetry.metrics import METRICS, JobMetrics, Metric


def _family(metric: Metric) -> Any:
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        InfoMetricFamily,
    )

    names = ["job_id", *metric.labels]
    if metric.kind == "counter":
        return CounterMetricFamily(metric.name, metric.help, labels=names)
    if metric.kind == "histogram":
        return HistogramMetricFamily(metric.name, metric.help, labels=names)
    if metric.kind == "info":
        return InfoMetricFamily(metric.name.removesuffix("_info"), metric.help, labels=["job_id"])
    return GaugeMetricFamily(metric.name, metric.help, labels=names)


class JobCollector:
    """A prometheus_client collector over one job's :class:`JobMetrics`."""

    def __init__(self, metrics: JobMetrics, job_id: str):
        self.metrics = metrics
        self.job_id = job_id

    def collect(self) -> Iterator[Any]:
        families = {m.name: _family(m) for m in METRICS}
        for metric, labels, value in self.metrics.values():
            family = families[metric.name]
            if metric.kind == "info":
                family.add_metric([self.job_id], {k: str(v) for k, v in labels.items()})
                continue
            label_values = [self.job_id, *(str(labels.get(n, "")) for n in metric.labels)]
            if metric.kind == "histogram":
                buckets, total = value
                family.add_metric(
                    label_values,
                    [(("+Inf" if math.isinf(le) else repr(float(le))), n) for le, n in buckets],
                    total if total is not None else float("nan"),
                )
            else:
                family.add_metric(label_values, float(value))
        yield from families.values()


class PrometheusEndpoint:
    """``/metrics`` on ``port`` (all interfaces) while the job runs; :meth:`close` stops it."""

    def __init__(self, metrics: JobMetrics, job_id: str, port: int, address: str = "0.0.0.0"):
        from prometheus_client import CollectorRegistry, start_http_server

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(JobCollector(metrics, job_id))
        self._server, self._thread = start_http_server(port, addr=address, registry=self.registry)
        self.port = self._server.server_address[1]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

"""Write the Grafana dashboard of a job (Prometheus datasource, a ``job_id`` variable) with Dagger's rows.

``make docs`` writes it to helm/dagger/dashboards/dagger.json (the chart ships it as a ConfigMap labelled
``grafana_dashboard: "1"``); a test keeps it current and checks that every metric it queries is in a real scrape.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "helm" / "dagger" / "dashboards" / "dagger.json"
J = '{job_id="$job_id"}'
DS = {"type": "prometheus", "uid": "${datasource}"}


def _q(expr: str, legend: str = "") -> dict:
    return {
        "datasource": DS,
        "expr": expr.replace("{J}", J).replace("{J,", '{job_id="$job_id",'),
        "legendFormat": legend,
    }


def _quantiles(metric: str, by: str = "") -> list[dict]:
    group = f"le{', ' + by if by else ''}"
    label = f"{{{{{by}}}}} " if by else ""
    return [
        _q(f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket{{J}}[5m])))", f"{label}p{int(q * 100)}")
        for q in (0.5, 0.95, 0.99)
    ]


# rows: (title, [(panel title, kind, unit, [queries])])
ROWS = [
    (
        "Overview",
        [
            ("Up", "stat", "none", [_q("max(dagger_up{J})")]),
            ("Uptime", "stat", "s", [_q("max(dagger_uptime_seconds{J})")]),
            ("Restarts (1h)", "stat", "none", [_q("sum(increase(dagger_query_restarts_total{J}[1h]))")]),
            ("Max consumer lag", "stat", "none", [_q("max(dagger_kafka_consumer_lag_max{J})")]),
            (
                "Late records dropped (1h)",
                "stat",
                "none",
                [_q("sum(increase(dagger_late_records_dropped_total{J}[1h]))")],
            ),
            (
                "Input and output rates",
                "timeseries",
                "rps",
                [
                    _q("sum(dagger_input_rows_per_second{J})", "arriving"),
                    _q("sum(dagger_processed_rows_per_second{J})", "processed"),
                    _q('sum(rate(dagger_sink_records_total{J,outcome="written"}[5m]))', "written"),
                ],
            ),
        ],
    ),
    (
        "Input streams",
        [
            (
                "Records read",
                "timeseries",
                "rps",
                [_q("sum by (table) (rate(dagger_source_records_total{J}[5m]))", "{{table}}")],
            ),
            (
                "Invalid records",
                "timeseries",
                "rps",
                [_q("sum by (table, policy) (rate(dagger_invalid_records_total{J}[5m]))", "{{table}} {{policy}}")],
            ),
            (
                "Consumer lag by partition",
                "timeseries",
                "none",
                [
                    _q(
                        "max by (table, topic, partition) (dagger_kafka_consumer_lag{J})",
                        "{{table}} {{topic}}:{{partition}}",
                    )
                ],
            ),
            (
                "Event-time delay of the watermark",
                "timeseries",
                "s",
                [_q("time() - max(dagger_event_time_watermark_seconds{J})", "now - watermark")],
            ),
        ],
    ),
    (
        "Sinks and dead letters",
        [
            (
                "Rows per sink and outcome",
                "timeseries",
                "rps",
                [_q("sum by (sink, outcome) (rate(dagger_sink_records_total{J}[5m]))", "{{sink}} {{outcome}}")],
            ),
            (
                "Dead letters",
                "timeseries",
                "rps",
                [_q("sum by (origin) (rate(dagger_dead_letter_records_total{J}[5m]))", "{{origin}}")],
            ),
        ],
    ),
    (
        "Exceptions",
        [
            (
                "Fatal exceptions",
                "timeseries",
                "none",
                [_q("sum by (exception_type) (increase(dagger_fatal_exceptions_total{J}[5m]))", "{{exception_type}}")],
            ),
            (
                "Non-fatal exceptions",
                "timeseries",
                "none",
                [
                    _q(
                        "sum by (exception_type) (increase(dagger_non_fatal_exceptions_total{J}[5m]))",
                        "{{exception_type}}",
                    )
                ],
            ),
        ],
    ),
    (
        "Lookups (post-processors)",
        [
            (
                "Calls by outcome",
                "timeseries",
                "rps",
                [_q("sum by (source, outcome) (rate(dagger_external_calls_total{J}[5m]))", "{{source}} {{outcome}}")],
            ),
            ("Response time", "timeseries", "s", _quantiles("dagger_external_response_seconds", "source")),
            (
                "404 / 4xx / 5xx / timeouts",
                "timeseries",
                "rps",
                [
                    _q(
                        'sum by (source, outcome) (rate(dagger_external_calls_total{J,outcome=~"404|4xx|5xx|timeout"}[5m]))',
                        "{{source}} {{outcome}}",
                    )
                ],
            ),
            (
                "Cache hits and retries",
                "timeseries",
                "rps",
                [
                    _q("sum by (source) (rate(dagger_external_cache_hits_total{J}[5m]))", "{{source}} cache hits"),
                    _q("sum by (source) (rate(dagger_external_retries_total{J}[5m]))", "{{source}} retries"),
                ],
            ),
        ],
    ),
    (
        "Longbow",
        [
            (
                "Rows by role and outcome",
                "timeseries",
                "rps",
                [_q("sum by (role, outcome) (rate(dagger_longbow_rows_total{J}[5m]))", "{{role}} {{outcome}}")],
            ),
            (
                "Documents per read",
                "timeseries",
                "none",
                [
                    _q(
                        "sum(rate(dagger_longbow_documents_read_total{J}[5m])) / "
                        'sum(rate(dagger_longbow_rows_total{J,role="reader",outcome="success"}[5m]))',
                        "documents per read",
                    )
                ],
            ),
            ("Bigtable response time", "timeseries", "s", _quantiles("dagger_longbow_response_seconds", "role")),
        ],
    ),
    (
        "UDFs and DARTS",
        [
            ("Functions used", "table", "none", [_q("max by (udf) (dagger_udf_info{J})", "{{udf}}")]),
            (
                "Processors",
                "table",
                "none",
                [_q("max by (stage, type) (dagger_processor_info{J})", "{{stage}} {{type}}")],
            ),
            ("DARTS", "timeseries", "rps", [_q("sum by (event) (rate(dagger_darts_total{J}[5m]))", "{{event}}")]),
        ],
    ),
    (
        "Batches and state",
        [
            ("Micro-batch duration", "timeseries", "s", _quantiles("dagger_batch_duration_seconds")),
            ("Micro-batches", "timeseries", "ops", [_q("sum(rate(dagger_batches_total{J}[5m]))", "batches/s")]),
            ("State rows", "timeseries", "none", [_q("max(dagger_state_rows{J})", "rows")]),
            ("State memory", "timeseries", "bytes", [_q("max(dagger_state_memory_bytes{J})", "bytes")]),
        ],
    ),
    (
        "Parquet source",
        [
            (
                "Files and rows read",
                "timeseries",
                "none",
                [
                    _q("sum by (table) (dagger_parquet_files_read_total{J})", "{{table}} files"),
                    _q("sum by (table) (dagger_parquet_rows_read_total{J})", "{{table}} rows"),
                ],
            ),
            (
                "Job",
                "table",
                "none",
                [_q("max by (sink_type, input_topics, input_protos, output_topic, output_proto) (dagger_job_info{J})")],
            ),
        ],
    ),
]


def dashboard() -> dict:
    panels, y, ident = [], 0, 1
    for title, row in ROWS:
        panels.append(
            {
                "type": "row",
                "title": title,
                "id": ident,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            }
        )
        ident, y = ident + 1, y + 1
        width = 24 // len(row) if row[0][1] != "stat" else 4
        x = 0
        for name, kind, unit, targets in row:
            w = 24 - x if kind != "stat" and name == row[-1][0] else width
            panel = {
                "type": kind,
                "title": name,
                "id": ident,
                "datasource": DS,
                "gridPos": {"h": 4 if kind == "stat" else 8, "w": w, "x": x, "y": y},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {},
                "targets": [{**t, "refId": chr(ord("A") + i)} for i, t in enumerate(targets)],
            }
            if kind == "table":
                for t in panel["targets"]:
                    t.update({"format": "table", "instant": True})
            panels.append(panel)
            ident, x = ident + 1, x + w
            if x >= 24:
                x, y = 0, y + 8
        y += 8 if x else 0
    return {
        "title": "Dagger on Spark",
        "uid": "dagger-on-spark",
        "description": "One Dagger-on-Spark job: its streams, sinks, lookups, batches and state (docs/metrics.md).",
        "tags": ["dagger", "spark", "streaming"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
                {
                    "name": "job_id",
                    "label": "job",
                    "type": "query",
                    "datasource": DS,
                    "query": {"query": "label_values(dagger_up, job_id)", "refId": "job_id"},
                    "definition": "label_values(dagger_up, job_id)",
                    "refresh": 2,
                    "multi": False,
                    "includeAll": False,
                },
            ]
        },
        "panels": panels,
    }


def metric_names(board: dict) -> set[str]:
    """Every metric name the dashboard's queries read (histograms by their base name)."""
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs.append(board["templating"]["list"][1]["definition"])
    names = {n for e in exprs for n in re.findall(r"\b(dagger_[a-z0-9_]+)", e)}
    return {n.removesuffix("_bucket") for n in names}


def render() -> str:
    return json.dumps(dashboard(), indent=1) + "\n"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(render())
    else:
        sys.stdout.write(render())

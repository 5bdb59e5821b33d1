"""A running job's own metrics, read from its Prometheus endpoint (for the soak and the latency benchmark)."""

from __future__ import annotations

import urllib.request

#: the samples followed, by Prometheus name → short name (summed over labels)
FOLLOWED = {
    "dagger_state_rows": "state_rows",
    "dagger_kafka_consumer_lag_max": "lag",
    "dagger_source_records_total": "read",
    "dagger_batches_total": "batches",
    "dagger_external_calls_total": "lookups",
    "dagger_sink_records_total": "written",
}


def scrape(port: int) -> dict[str, float]:
    """The followed samples and each of Spark's batch phases (``phase_<name>``: seconds summed over batches);
    empty before the job serves."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = FOLLOWED.get(sample.name)
            if sample.name == "dagger_batch_phase_seconds_total":
                name = f"phase_{sample.labels.get('phase', '?')}"
            if sample.name == "dagger_batch_duration_seconds_sum":
                name = "batch_seconds"
            if name:
                out[name] = out.get(name, 0.0) + sample.value
    return out


def per_batch_ms(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Milliseconds per micro-batch of each phase (and of the whole batch) between two scrapes."""
    batches = after.get("batches", 0) - before.get("batches", 0)
    if batches <= 0:
        return {}
    names = [k for k in after if k.startswith("phase_") or k == "batch_seconds"]
    return {k.removeprefix("phase_"): round((after[k] - before.get(k, 0.0)) * 1000 / batches, 1) for k in sorted(names)}

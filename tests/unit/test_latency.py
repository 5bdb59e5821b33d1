"""Response-time histograms (dagger/latency.py): the buckets a call lands in and the Prometheus samples."""

from __future__ import annotations

from dagger.latency import LATENCY_BUCKETS_MS, LatencyHistogram
from dagger.longbow.classic import CALL_BUCKETS_MS


def test_a_call_counts_in_the_first_bucket_whose_bound_it_does_not_exceed_and_samples_are_cumulative(spark):
    histogram = LatencyHistogram.create(spark)
    histogram.add([5, 5.1, 4999, 5000.5, 120])
    labelled = histogram.labelled()
    assert labelled["<=5ms"] == 1 and labelled["<=10ms"] == 1 and labelled["<=250ms"] == 1
    assert labelled["<=5000ms"] == 1 and labelled[">5000ms"] == 1 and sum(labelled.values()) == 5
    buckets, seconds = histogram.prometheus()
    assert [bound for bound, _ in buckets] == [b / 1000 for b in LATENCY_BUCKETS_MS] + [float("inf")]
    assert [n for _, n in buckets] == [1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 5]
    assert abs(seconds - (5 + 5.1 + 4999 + 5000.5 + 120) / 1000) < 1e-9


def test_longbows_histograms_reach_its_default_timeout(spark):
    histogram = LatencyHistogram.create(spark, CALL_BUCKETS_MS)
    histogram.add([2_400, 9_000, 14_000, 16_000])  # a ReadRows of 1,000 ranges on the emulator took ~2.4 s
    buckets = dict(histogram.prometheus()[0])
    assert buckets[2.5] == 1 and buckets[10.0] == 2 and buckets[15.0] == 3 and buckets[float("inf")] == 4
    assert histogram.labelled()[">15000ms"] == 1

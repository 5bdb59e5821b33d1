"""What the job hands its functions (:func:`dagger.functions.udf_context`); the functions themselves run on Spark in
tests/unit/udfs/test_udfs.py."""

from __future__ import annotations

from types import SimpleNamespace

from dagger.functions import udf_context
from dagger.job import load_config
from testing.samples import example_descriptors
from tests.unit.config.test_config import BASE

#: the one thing udf_context asks of the Spark session: accumulators for the DARTS counters (plain ints here)
SPARK = SimpleNamespace(sparkContext=SimpleNamespace(accumulator=lambda initial: initial))


def test_darts_are_read_from_the_bucket_of_udf_dart_gcs_bucket_id_unless_a_base_url_is_given():
    bucket = load_config(data={**BASE, "UDF_DART_GCS_BUCKET_ID": "dart-bucket-42"})
    assert udf_context(SPARK, bucket, example_descriptors()).dart_base == "gs://dart-bucket-42"
    both = load_config(data={**BASE, "UDF_DART_GCS_BUCKET_ID": "dart-bucket-42", "UDF_DART_BASE_URL": "/srv/darts"})
    assert udf_context(SPARK, both, example_descriptors()).dart_base == "/srv/darts"

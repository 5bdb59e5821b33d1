"""The BigQuery sink its keys build: the dataset and table it creates, its requests and its credentials, with no
BigQuery (writing to the emulator is tests/integration/bigquery/test_sink.py)."""

from __future__ import annotations

import json

import pyarrow as pa

from dagger.bigquery.sink import _credentials
from dagger.catalog import build_sinks
from dagger.job import load_config
from testing.samples import example_descriptors
from tests.unit.config.test_config import BASE

BIGQUERY = {
    "SINK_TYPE": "bigquery",
    "SINK_BIGQUERY_GOOGLE_CLOUD_PROJECT_ID": "analytics",
    "SINK_BIGQUERY_DATASET_NAME": "bookings",
    "SINK_BIGQUERY_TABLE_NAME": "summary",
    "SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS": "dagger.examples.BookingLogMessage",
}


def _sink(**keys: str):  # noqa: ANN202
    (sink,) = build_sinks(load_config(data={**BASE, **BIGQUERY, **keys}), example_descriptors())
    return sink


def test_each_append_request_carries_at_most_sink_bigquery_batch_size_rows():
    writer = _sink(SINK_BIGQUERY_BATCH_SIZE="250").writer(partition_id=0, batch_id=0)
    sent: list[int] = []
    writer._send = lambda rows: sent.append(rows.num_rows)  # the Storage Write API call: counted, not made
    writer.write(pa.RecordBatch.from_pydict({"order_number": [f"order-{i}" for i in range(600)]}))
    assert sent == [250, 250, 100]


def test_a_created_dataset_is_placed_in_the_configured_location_with_the_configured_labels():
    sink = _sink(SINK_BIGQUERY_DATASET_LOCATION="europe-west4", SINK_BIGQUERY_DATASET_LABELS="team=data, env=prod")
    assert sink.location == "europe-west4"
    assert sink.dataset_labels == {"team": "data", "env": "prod"}


def test_a_created_partitioned_table_expires_its_partitions_after_sink_bigquery_table_partition_expiry_ms():
    sink = _sink(
        SINK_BIGQUERY_TABLE_PARTITIONING_ENABLE="true",
        SINK_BIGQUERY_TABLE_PARTITION_KEY="event_timestamp",
        SINK_BIGQUERY_TABLE_PARTITION_EXPIRY_MS="604800000",
    )
    assert (sink.partition_key, sink.partition_expiry_ms) == ("event_timestamp", 604_800_000)


def test_sink_bigquery_client_read_timeout_ms_is_the_sinks_per_request_timeout():
    assert _sink(SINK_BIGQUERY_CLIENT_READ_TIMEOUT_MS="45000").read_timeout_ms == 45_000


def test_the_clients_sign_in_as_the_service_account_of_sink_bigquery_credential_path(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    account = tmp_path / "writer.json"
    account.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "analytics",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": "dagger-writer@analytics.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )
    )
    credentials = _credentials(_sink(SINK_BIGQUERY_CREDENTIAL_PATH=str(account)))
    assert credentials.service_account_email == "dagger-writer@analytics.iam.gserviceaccount.com"
    assert _credentials(_sink()) is None  # without the key: Application Default Credentials

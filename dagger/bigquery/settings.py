"""``SINK_TYPE=bigquery``'s keys, each with its description, and their checks (runs on the driver, when
the config is bound)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, model_validator

from dagger.errors import DaggerConfigError
from dagger.plugins.sink import SinkSettings

if TYPE_CHECKING:
    pass


class BigQuerySinkSettings(SinkSettings):
    """BigQuery: rows typed through a proto message and appended with the Storage Write API, once per batch."""

    flushes_at_checkpoint: ClassVar[bool] = True  # Dagger's BigQuery sink writes at each checkpoint
    ignored_keys: ClassVar[dict[str, str]] = {
        "SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS": "BigQuery rows have no key (a Kafka sink encodes its record keys "
        "with this message)",
        "SINK_CONNECTOR_SCHEMA_DATA_TYPE": "rows are typed through `SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS`",
        "SINK_CONNECTOR_SCHEMA_MESSAGE_MODE": "rows are the SQL's output columns (Dagger's LOG_MESSAGE mode)",
        "SINK_CONNECTOR_SCHEMA_PROTO_ALLOW_UNKNOWN_FIELDS_ENABLE": "output columns the message lacks are left out",
        "SINK_BIGQUERY_METADATA_NAMESPACE": "no Kafka metadata columns are written to BigQuery",
        "SINK_BIGQUERY_CLIENT_CONNECT_TIMEOUT_MS": "Google's clients take one timeout per call: "
        "`SINK_BIGQUERY_CLIENT_READ_TIMEOUT_MS`",
    }

    SINK_BIGQUERY_BATCH_SIZE: int = Field(
        500, gt=0, description="Rows per Storage Write append request (also bounded to 9 MB per request)."
    )
    SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS: str | None = Field(
        None, description="Proto message the rows are typed through; the table schema is derived from it."
    )
    SINK_CONNECTOR_SCHEMA_PROTO_KEY_CLASS: str | None = Field(None, description="Accepted (Depot's message key).")
    SINK_CONNECTOR_SCHEMA_DATA_TYPE: Literal["PROTOBUF"] | None = Field(None, description="Only `PROTOBUF`.")
    SINK_CONNECTOR_SCHEMA_MESSAGE_MODE: Literal["LOG_MESSAGE"] | None = Field(
        None, description="Only `LOG_MESSAGE` (the value message)."
    )
    SINK_CONNECTOR_SCHEMA_PROTO_ALLOW_UNKNOWN_FIELDS_ENABLE: bool | None = Field(
        None, description="Accepted; output columns without a proto field are ignored, as in the Kafka sink."
    )
    SINK_BIGQUERY_GOOGLE_CLOUD_PROJECT_ID: str | None = Field(None, description="Project of the dataset.")
    SINK_BIGQUERY_DATASET_NAME: str | None = Field(None, description="Dataset; created if missing.")
    SINK_BIGQUERY_TABLE_NAME: str | None = Field(None, description="Table; created from the proto if missing.")
    SINK_BIGQUERY_DATASET_LABELS: str | None = Field(None, description="`k=v,k2=v2` labels of a created dataset.")
    SINK_BIGQUERY_TABLE_LABELS: str | None = Field(None, description="`k=v,k2=v2` labels of the table.")
    SINK_BIGQUERY_TABLE_PARTITIONING_ENABLE: bool = Field(
        False, description="Day-partition a created table on `SINK_BIGQUERY_TABLE_PARTITION_KEY`."
    )
    SINK_BIGQUERY_TABLE_PARTITION_KEY: str | None = Field(
        None, description="A `google.protobuf.Timestamp` field of the message."
    )
    SINK_BIGQUERY_TABLE_PARTITION_EXPIRY_MS: int | None = Field(
        None, description="Partition expiry of a created table."
    )
    SINK_BIGQUERY_ROW_INSERT_ID_ENABLE: bool | None = Field(
        None,
        description="Unset or `true`: each row is written once (what insert ids were for): rows go to pending write "
        "streams, with offsets, committed once per micro-batch. `false` (what Dagger forces): rows are appended to "
        "the table's default stream, visible at once; a re-run micro-batch writes its rows again (at-least-once).",
    )
    SINK_BIGQUERY_CREDENTIAL_PATH: str | None = Field(
        None, description="Service-account JSON file. Default: Application Default Credentials."
    )
    SINK_BIGQUERY_ANONYMOUS_CREDENTIALS: bool = Field(False, description="Send no credentials (emulators).")
    SINK_BIGQUERY_API_ENDPOINT: str | None = Field(
        None, description="REST endpoint, e.g. `http://127.0.0.1:9050` for an emulator. Default: Google's."
    )
    SINK_BIGQUERY_STORAGE_API_ENDPOINT: str | None = Field(
        None,
        description="Storage Write API `host:port`. Default: Google's (TLS); a loopback or `http://` address "
        "is used without TLS.",
    )
    SINK_BIGQUERY_METADATA_NAMESPACE: str | None = Field(None, description="Accepted; no metadata columns are added.")
    SINK_BIGQUERY_DATASET_LOCATION: str | None = Field(
        None, description="Location of a created dataset (Depot's default: `asia-southeast1`)."
    )
    SINK_BIGQUERY_CLIENT_READ_TIMEOUT_MS: int = Field(60000, gt=0, description="Per-request timeout.")
    SINK_BIGQUERY_CLIENT_CONNECT_TIMEOUT_MS: int = Field(10000, gt=0, description="Connection timeout.")
    SINK_BIGQUERY_RETRY_DEADLINE_MS: int = Field(
        120000,
        gt=0,
        description="Retries of a failed request (5xx, unavailable) stop after this long and the batch fails "
        "(so a broken server never hangs a micro-batch for the client's default ten minutes).",
    )

    def written_message(self) -> str | None:
        return self.SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS

    @model_validator(mode="after")
    def _required(self) -> BigQuerySinkSettings:
        self.require(
            "bigquery",
            "SINK_BIGQUERY_GOOGLE_CLOUD_PROJECT_ID",
            "SINK_BIGQUERY_DATASET_NAME",
            "SINK_BIGQUERY_TABLE_NAME",
            "SINK_CONNECTOR_SCHEMA_PROTO_MESSAGE_CLASS",
        )
        if self.SINK_BIGQUERY_TABLE_PARTITIONING_ENABLE and not self.SINK_BIGQUERY_TABLE_PARTITION_KEY:
            raise ValueError(
                "SINK_BIGQUERY_TABLE_PARTITION_KEY is required when SINK_BIGQUERY_TABLE_PARTITIONING_ENABLE"
            )
        return self


def parse_labels(text: str | None, key: str) -> dict[str, str]:
    """Labels written `name=value,name=value` (the `SINK_BIGQUERY_*_LABELS` keys); `key` names the key in errors."""
    if not text:
        return {}
    labels = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise DaggerConfigError(f"{key}: {part!r} must look like name=value (e.g. team=data,env=prod)")
        labels[name.strip()] = value.strip()
    return labels

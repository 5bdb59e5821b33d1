"""``SINK_TYPE=influx``'s keys, each with its description, and their checks (runs on the driver, when the
config is bound)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, model_validator

from dagger.plugins.sink import SinkSettings

if TYPE_CHECKING:
    pass


class InfluxSinkSettings(SinkSettings):
    """InfluxDB: one point per row, tags from `tag_*`/`label_*` columns, over the 1.x or 2.x write API."""

    flushes_at_checkpoint: ClassVar[bool] = True  # Dagger's InfluxDB sink writes at each checkpoint

    SINK_INFLUX_URL: str | None = Field(None, description="InfluxDB URL, e.g. `http://localhost:8086`.")
    SINK_INFLUX_API_VERSION: Literal["1", "2"] = Field(
        "1",
        description="`1`: the InfluxDB 1.x HTTP API (`/write?db=&rp=`, user/password), what Dagger's influx-java "
        "client speaks. `2`: the 2.x/3.x API (`/api/v2/write`) through `influxdb-client`, with "
        "`SINK_INFLUX_TOKEN` and a bucket.",
    )
    SINK_INFLUX_USERNAME: str | None = Field(None, description="1.x user (basic auth).")
    SINK_INFLUX_PASSWORD: str | None = Field(None, description="1.x password.")
    SINK_INFLUX_DB_NAME: str | None = Field(None, description="Database (1.x); with the RP, the default 2.x bucket.")
    SINK_INFLUX_MEASUREMENT_NAME: str | None = Field(None, description="Measurement every point is written to.")
    SINK_INFLUX_RETENTION_POLICY: str | None = Field(
        None, description="Retention policy; empty means the database's default policy."
    )
    SINK_INFLUX_BATCH_SIZE: int = Field(
        0, ge=0, description="Points per write request; 0 means 5000. Every task flushes before its batch commits."
    )
    SINK_INFLUX_FLUSH_DURATION_MS: int = Field(
        0, ge=0, description="Also send a request when buffered points are this old (0: size and end of task only)."
    )
    SINK_INFLUX_TOKEN: str | None = Field(None, description="2.x/3.x API token (`Authorization: Token ...`).")
    SINK_INFLUX_ORG: str | None = Field(None, description="2.x organisation (3.x and 1.8's v2 API ignore it).")
    SINK_INFLUX_BUCKET: str | None = Field(
        None, description="2.x bucket. Default: `DB_NAME/RETENTION_POLICY` (or `DB_NAME`), the 1.x mapping."
    )
    SINK_INFLUX_TIMEOUT_MS: int = Field(30000, gt=0, description="Per-request timeout.")
    SINK_INFLUX_RETRIES: int = Field(
        6,
        ge=0,
        description="Beyond Dagger: retries of a write the server did not answer (refused or broken connection, "
        "timeout) or answered 429/5xx, with exponential back-off; then the micro-batch fails. Rewriting points is "
        "idempotent. The defaults ride out about 15 s of outage.",
    )
    SINK_INFLUX_RETRY_BACKOFF_MS: int = Field(
        500, ge=0, description="Beyond Dagger: back-off of the second retry, doubled for each next one (at most 10 s)."
    )

    @model_validator(mode="after")
    def _required(self) -> InfluxSinkSettings:
        self.require("influx", "SINK_INFLUX_URL", "SINK_INFLUX_MEASUREMENT_NAME")
        if self.SINK_INFLUX_API_VERSION == "1" or not self.SINK_INFLUX_BUCKET:
            self.require("influx", "SINK_INFLUX_DB_NAME")
        return self

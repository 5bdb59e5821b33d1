"""``SINK_TYPE=lines``: every row appended to a local file as a JSON line, once per batch, on the driver."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pydantic import Field

from dagger.plugins.sink import Sink, SinkEnv, SinkSettings, SinkWriter


class LinesSinkSettings(SinkSettings):
    """JSON lines appended to a local file."""

    SINK_LINES_PATH: str = Field(description="The file rows are appended to.")


class _Writer(SinkWriter):
    """In a task: keeps its rows for the driver."""

    def __init__(self, sink: LinesSink):
        self.sink, self.rows = sink, []

    def write(self, batch: pa.RecordBatch) -> None:
        self.rows.extend(batch.to_pylist())

    def flush(self) -> list[dict]:
        self.sink.count("written", len(self.rows))
        return self.rows


class LinesSink(Sink):
    """JSON lines appended to a local file."""

    name = "lines"
    settings_model = LinesSinkSettings

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def from_settings(cls, settings: LinesSinkSettings, env: SinkEnv) -> LinesSink:
        return cls(settings.SINK_LINES_PATH)

    def writer(self, partition_id: int, batch_id: int) -> SinkWriter:
        return _Writer(self)

    def commit(self, results: list[Any], batch_id: int) -> None:
        with open(self.path, "a") as out:
            for rows in results:
                out.writelines(json.dumps(row, default=str) + "\n" for row in rows)

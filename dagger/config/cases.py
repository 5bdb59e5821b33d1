"""Test cases of a job (``TESTS`` in a job config, or a file given to ``dagger test --tests``): what goes in,
what must come out. Only their shape is checked here; ``dagger test`` runs them.

A case feeds records to the job's tables (``INPUT``, one bounded run; or ``INPUT_BATCHES``, one micro-batch after
another in ``MODE: streaming``) and says what must come of them: each sink's records (``EXPECTED``), dead letters,
records dropped as late, or an error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: a case's records for each table (``INPUT_SCHEMA_TABLE``): a record is an object (protobuf's JSON mapping for
#: protobuf streams), or ``{"_RAW_BASE64": "..."}`` for bytes as they are (an undecodable record)
TableRecords = dict[str, list[dict[str, Any]]]
RAW = "_RAW_BASE64"


class MockConfig(BaseModel):
    """One answer of a post-processor's lookup, keyed by the request the job sends."""

    model_config = ConfigDict(extra="forbid")

    LOOKUP: str | None = Field(
        None, description="The lookup it answers (`HTTP.0`, `ES.1`, `PG.0`, or `<KIND>.<metricId>`); default: any."
    )
    REQUEST: str | None = Field(
        None,
        description="HTTP or Elasticsearch: `<METHOD> <url>`, the url with its query as the job sends it; gRPC: "
        "the method, `package.Service/Method`.",
    )
    BODY: Any = Field(
        None, description="HTTP: a POST's or PUT's body (compared as JSON when it is JSON); gRPC: the request."
    )
    QUERY: str | None = Field(None, description="Postgres: the query as the job sends it, its variables in place.")
    STATUS: int | str = Field(
        200, description="HTTP: the answer's status; gRPC: a status name the call fails with (`NOT_FOUND`...)."
    )
    RESPONSE: Any = Field(
        None, description="The answer: HTTP's body (JSON), gRPC's reply, or Postgres' rows (a list of objects)."
    )

    @model_validator(mode="after")
    def _check(self) -> MockConfig:
        if (self.REQUEST is None) == (self.QUERY is None):
            raise ValueError("a mock answers one REQUEST (HTTP, Elasticsearch, gRPC) or one QUERY (Postgres)")
        if self.QUERY is not None and not isinstance(self.RESPONSE, list | None):
            raise ValueError("a Postgres mock's RESPONSE is its result rows: a list of objects")
        return self


class SubjectConfig(BaseModel):
    """A Schema Registry subject as a case's job reads it (its latest version), instead of the registry's."""

    model_config = ConfigDict(extra="forbid")

    SCHEMA_TYPE: Literal["AVRO", "JSON", "PROTOBUF"] = Field("AVRO", description="The subject's schema type.")
    SCHEMA: Any = Field(None, description="AVRO or JSON: the schema (an object, or its text).")
    MESSAGE: str | None = Field(
        None, description="PROTOBUF: the message, from the job's descriptor sets (its file is the schema)."
    )
    ID: int = Field(1, ge=0, description="The schema's id, in the records' header.")

    @model_validator(mode="after")
    def _check(self) -> SubjectConfig:
        if self.SCHEMA_TYPE == "PROTOBUF" and not self.MESSAGE:
            raise ValueError("a PROTOBUF subject names its MESSAGE (found in the job's descriptor sets)")
        if self.SCHEMA_TYPE != "PROTOBUF" and self.SCHEMA is None:
            raise ValueError(f"an {self.SCHEMA_TYPE} subject gives its SCHEMA")
        return self


class CaseConfig(BaseModel):
    """One test case."""

    model_config = ConfigDict(extra="forbid")

    NAME: str = Field(min_length=1, description="The case's name, unique in its job; `-k` selects by it.")
    INPUT: TableRecords | None = Field(None, description="Records for each table, run as one bounded input.")
    INPUT_BATCHES: list[TableRecords] | None = Field(
        None, description="Records for each table, one micro-batch after another (`MODE: streaming`)."
    )
    MODE: Literal["bounded", "streaming"] = Field(
        "bounded",
        description="`bounded`: the input is read at once and every window closes at its end; `streaming`: "
        "micro-batch by micro-batch, the watermark moving between them.",
    )
    EXPECTED: dict[str, list[dict[str, Any]]] | None = Field(
        None, description="Each sink's records (`SINK` for the job's one sink, else the sink's name in `SINKS`)."
    )
    ORDERED: bool = Field(False, description="The records must come in the order given.")
    PARTIAL: bool = Field(False, description="Only the fields given are compared.")
    TOLERANCE: float | None = Field(None, ge=0, description="Floats match within this absolute difference.")
    EXPECTED_DEAD_LETTERS: int | None = Field(None, ge=0, description="How many dead letters the case writes.")
    EXPECTED_LATE: int | None = Field(None, ge=0, description="How many records the watermark drops as late.")
    EXPECTED_INVALID: int | None = Field(
        None, ge=0, description="How many records the streams cannot decode (dropped or dead-lettered by the policy)."
    )
    EXPECTED_ERROR: str | None = Field(None, min_length=1, description="A part of the failure's last line.")
    MOCKS: list[MockConfig] = Field(
        default_factory=list,
        description="Answers of the post-processors' lookups, keyed by the request; a request without one fails.",
    )
    LONGBOW_HISTORY: dict[str, list[dict[str, Any]]] | None = Field(
        None, description="Longbow's stored rows for each key, read instead of the store."
    )
    SUBJECTS: dict[str, SubjectConfig] = Field(
        default_factory=dict,
        description="The Schema Registry subjects the job reads, by name, instead of fetching them.",
    )
    ENVIRONMENT: dict[str, str] = Field(default_factory=dict, description="Values for the config's `${VAR}`s.")

    @model_validator(mode="after")
    def _check(self) -> CaseConfig:
        if (self.INPUT is None) == (self.INPUT_BATCHES is None):
            raise ValueError("give INPUT (one bounded input) or INPUT_BATCHES (micro-batches), not both or neither")
        if self.INPUT_BATCHES is not None and self.MODE != "streaming":
            raise ValueError("INPUT_BATCHES are micro-batches: set MODE to 'streaming'")
        if self.EXPECTED_LATE is not None and self.MODE != "streaming":
            raise ValueError("EXPECTED_LATE needs MODE 'streaming': a bounded run drops nothing as late")
        expectations = (
            self.EXPECTED,
            self.EXPECTED_DEAD_LETTERS,
            self.EXPECTED_LATE,
            self.EXPECTED_INVALID,
            self.EXPECTED_ERROR,
        )
        if all(e is None for e in expectations):
            raise ValueError(
                "say what must come out: EXPECTED, EXPECTED_DEAD_LETTERS, EXPECTED_LATE, EXPECTED_INVALID or "
                "EXPECTED_ERROR"
            )
        if self.EXPECTED_ERROR is not None and self.EXPECTED is not None:
            raise ValueError("a case that expects an error expects no output: drop EXPECTED or EXPECTED_ERROR")
        for batch in self.INPUT_BATCHES or [self.INPUT or {}]:
            for table, records in batch.items():
                for i, record in enumerate(records):
                    if RAW in record and len(record) > 1:
                        raise ValueError(f"{table}[{i}]: a {RAW} record holds nothing else")
        return self


def check_names(cases: list[CaseConfig]) -> None:
    """Names are unique: ``-k`` and ``--update`` find a case by it."""
    seen: set[str] = set()
    for case in cases:
        if case.NAME in seen:
            raise ValueError(f"two test cases are named {case.NAME!r}")
        seen.add(case.NAME)

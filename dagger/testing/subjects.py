"""The Schema Registry subjects a case's job reads, made from the case's ``SUBJECTS`` instead of fetched (runs in
the ``dagger test`` process, before the case runs): a stream in Confluent's wire format and a sink that looks its
schema up get the subject's latest version as if the registry had answered, so a test needs no registry.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

from dagger.errors import SchemaRegistryError
from dagger.schema.confluent import SubjectSchemas
from dagger.testing.loading import CaseFileError

if TYPE_CHECKING:
    from dagger.config.cases import CaseConfig, SubjectConfig
    from dagger.config.model import JobConfig
    from dagger.schema.descriptor_sets import DescriptorSet


def wanted_subjects(config: JobConfig) -> dict[str, str]:
    """Subject → the key that names it, for every subject the job reads from the registry."""
    from dagger.formats.records import stream_subject  # start-up: loads pyspark

    wanted: dict[str, str] = {}
    for stream in config.STREAMS:
        subject = stream_subject(stream)
        if subject is not None:
            wanted.setdefault(*subject)
    for _, entry in config.sink_configs:
        for subject, where in entry.settings.registry_subjects():
            wanted.setdefault(subject, where)
    return wanted


def subject_blobs(config: JobConfig, case: CaseConfig, stencil: DescriptorSet) -> list[tuple[str, bytes]]:
    """The subjects the job reads, as the blobs the descriptor sets carry them in."""
    wanted = wanted_subjects(config)
    missing = {s: where for s, where in wanted.items() if s not in case.SUBJECTS}
    if missing:
        named = "; ".join(f"{subject!r} ({where})" for subject, where in missing.items())
        raise CaseFileError(
            f"case {case.NAME!r}: the job reads {named} from the Schema Registry; give each in the case's SUBJECTS, "
            '{"<subject>": {"SCHEMA_TYPE": "AVRO", "SCHEMA": {...}, "ID": 1}} (PROTOBUF: "MESSAGE" instead of '
            '"SCHEMA")'
        )
    return [_schemas(subject, case.SUBJECTS[subject], stencil, case.NAME).to_blob() for subject in wanted]


def _schemas(subject: str, given: SubjectConfig, stencil: DescriptorSet, name: str):  # noqa: ANN202

    if given.SCHEMA_TYPE == "PROTOBUF":
        try:
            descriptor = stencil.find_message(given.MESSAGE or "", f"SUBJECTS.{subject}.MESSAGE")
        except SchemaRegistryError as exc:
            raise CaseFileError(f"case {name!r}: {exc}") from None
        imports: dict[str, str] = {}
        _imports(descriptor.file, imports)
        entry = {"schema": base64.b64encode(descriptor.file.serialized_pb).decode(), "references": imports}
    else:
        text = given.SCHEMA if isinstance(given.SCHEMA, str) else json.dumps(given.SCHEMA)
        entry = {"schema": text, "references": {}}
    return SubjectSchemas(subject, given.SCHEMA_TYPE, given.ID, 1, {given.ID: entry})


def _imports(file: object, out: dict[str, str]) -> None:
    """Every file ``file`` imports, imports first (base64 ``FileDescriptorProto`` s by name)."""
    for dependency in file.dependencies:  # type: ignore[attr-defined]
        if dependency.name not in out:
            _imports(dependency, out)
            out[dependency.name] = base64.b64encode(dependency.serialized_pb).decode()

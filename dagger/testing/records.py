"""A test case's input records made into the bytes a broker would hold, with the stream's own schema, so that
they reach the job through the same decoding as records from Kafka (runs on the driver, before the case runs).

Each format says how (:meth:`~dagger.plugins.format.Format.test_encoder`): protobuf streams take a record in
protobuf's JSON mapping, JSON streams its text, Avro streams what fastavro writes with the stream's schema, each
behind Confluent's header in Confluent's wire format. ``{"_RAW_BASE64": "..."}`` is the bytes as they are (an
undecodable record, for the invalid-record policy).
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from dagger.config.cases import RAW
from dagger.plugins.format import format_of

if TYPE_CHECKING:
    from dagger.config.model import StreamConfig
    from dagger.schema.descriptor_sets import DescriptorSet


class CaseInputError(ValueError):
    """A case's record that the stream's schema cannot hold (an invalid test file: ``dagger test`` exits 2)."""


def encode_records(
    stream: StreamConfig, descriptors: DescriptorSet, records: list[dict[str, Any]], where: str
) -> list[bytes]:
    """``records`` of the stream as wire bytes; ``where`` names them in errors (``case 'x': INPUT.bookings``)."""
    try:
        encode = format_of(stream).test_encoder(stream, descriptors)
    except ValueError as exc:
        raise CaseInputError(f"{where}: {exc}") from None
    out = []
    for i, record in enumerate(records):
        if RAW in record:
            try:
                out.append(base64.b64decode(record[RAW], validate=True))
            except (binascii.Error, TypeError) as exc:
                raise CaseInputError(f"{where}[{i}]: {RAW} is not base64 ({exc})") from None
            continue
        try:
            out.append(encode(record))
        except ValueError as exc:  # the format's word on a record its schema cannot hold
            raise CaseInputError(f"{where}[{i}]: {exc}") from None
    return out

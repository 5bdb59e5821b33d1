"""What each sink wrote in a case, read back into plain records, and the case's expected records put in the same
form, so that the two compare field by field (runs on the driver, after the case ran). Each sink reads its own
records back (:meth:`dagger.plugins.sink.Sink.written_records`, with :mod:`dagger.sinks.readback`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagger.plugins.sink import UntestableSinkError

if TYPE_CHECKING:
    from dagger.plugins.sink import Sink


def written(sink: Sink) -> list[dict[str, Any]]:
    """The records ``sink`` wrote in a case (its capture directory), read back."""
    if sink.capture is None:
        raise UntestableSinkError(f"sink {sink.display_name} was not captured")
    return sink.written_records(sink.capture)


def expected_form(sink: Sink, record: dict[str, Any], partial: bool) -> dict[str, Any]:
    """An expected record in the form :func:`written` gives (a partial record is compared as written)."""
    return sink.expected_record(record, partial)

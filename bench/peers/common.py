"""What every hand-written or peer implementation of the bench's stateless job shares: settings from the
environment, the protobuf classes built from the descriptor set, and the per-record transform.

Environment: ``BENCH_BOOTSTRAP``, ``BENCH_INPUT``, ``BENCH_OUTPUT``, ``BENCH_DESCRIPTORS`` (a descriptor set
file). The transform is the stateless job's SQL written by hand: keep bookings with ``amount_paid_by_cash <
500`` and project five fields (one nested) into ``BookingSummaryMessage``.
"""

from __future__ import annotations

import os
from pathlib import Path

BOOTSTRAP = os.environ.get("BENCH_BOOTSTRAP", "127.0.0.1:9092")
INPUT = os.environ.get("BENCH_INPUT", "bench-in")
OUTPUT = os.environ.get("BENCH_OUTPUT", "bench-out")
DESCRIPTORS = os.environ.get(
    "BENCH_DESCRIPTORS", str(Path(__file__).resolve().parents[2] / "descriptors/examples.desc")
)


def _classes():  # noqa: ANN202
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet.FromString(Path(DESCRIPTORS).read_bytes())
    pool = descriptor_pool.DescriptorPool()
    pending = list(fds.file)
    while pending:  # dependencies first
        for f in list(pending):
            try:
                pool.Add(f)
                pending.remove(f)
            except TypeError:
                continue
    get = message_factory.GetMessageClass
    return (
        get(pool.FindMessageTypeByName("dagger.examples.BookingLogMessage")),
        get(pool.FindMessageTypeByName("dagger.examples.BookingSummaryMessage")),
    )


Booking, Summary = _classes()


def transform(value: bytes) -> bytes | None:
    """``SELECT order_number, service_type, driver_pickup_location AS pickup, event_timestamp,
    amount_paid_by_cash FROM bookings WHERE amount_paid_by_cash < 500``, one record at a time."""
    booking = Booking.FromString(value)
    if booking.amount_paid_by_cash >= 500:
        return None
    out = Summary(
        order_number=booking.order_number,
        service_type=booking.service_type,
        amount_paid_by_cash=booking.amount_paid_by_cash,
    )
    out.pickup.CopyFrom(booking.driver_pickup_location)
    out.event_timestamp.CopyFrom(booking.event_timestamp)
    return out.SerializeToString()

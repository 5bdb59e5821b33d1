"""Deterministic sample bookings (``dagger.examples.BookingLogMessage``) for the quickstart and tests."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from google.protobuf import message_factory

from dagger.schema.descriptor_sets import DescriptorSet

EXAMPLES_DESC = Path(__file__).resolve().parents[1] / "descriptors" / "examples.desc"
AREAS = ["jakarta", "bandung", "surabaya"]
SERVICES = ["GO_RIDE", "GO_SEND", "GO_FOOD"]


def example_descriptors(path: str | Path = EXAMPLES_DESC) -> DescriptorSet:
    p = Path(path)
    return DescriptorSet([(str(p), p.read_bytes())])


def message_class(name: str, descriptors: DescriptorSet | None = None):  # noqa: ANN201
    return message_factory.GetMessageClass((descriptors or example_descriptors()).find_message(name))


def bookings(
    count: int, start: dt.datetime, step_seconds: float = 1.0, descriptors: DescriptorSet | None = None
) -> list[bytes]:
    """``count`` serialized bookings, one every ``step_seconds`` of event time from ``start``.

    Booking ``i`` is in area ``AREAS[i % 3]``, service ``SERVICES[i % 3]``, customer ``c{i % 5}``, distance
    ``i % 7`` km, cash ``i * 10``, pickup latitude ``-6.2 + (i % 1000) * 0.001`` and has tags and metadata,
    so tests can compute expected results.
    """
    Booking = message_class("dagger.examples.BookingLogMessage", descriptors)
    out = []
    for i in range(count):
        m = Booking(
            order_number=f"order-{i}",
            service_type=SERVICES[i % 3],
            status="COMPLETED" if i % 4 else "CREATED",
            customer_id=f"c{i % 5}",
            driver_id=f"d{i % 11}",
            amount_paid_by_cash=i * 10,
            total_distance_in_kms=float(i % 7),
            service_area_id=AREAS[i % 3],
            item_tags=[f"tag{i % 2}", "all"],
        )
        m.metadata["parity"] = "even" if i % 2 == 0 else "odd"
        m.driver_pickup_location.name = f"pickup-{i % 4}"
        m.driver_pickup_location.latitude = -6.2 + (i % 1000) * 0.001
        m.driver_pickup_location.longitude = 106.8
        m.event_timestamp.FromDatetime(start + dt.timedelta(seconds=i * step_seconds))
        out.append(m.SerializeToString())
    return out


def customers(count: int, at: dt.datetime) -> list[bytes]:
    """``count`` serialized ``CustomerLogMessage`` records (customer ids ``c0``, ``c1``, … named ``name-<i>``), all
    with event time ``at``: the right side of the tests' stream-stream joins."""
    customer = message_class("dagger.examples.CustomerLogMessage")
    out = []
    for i in range(count):
        record = customer(customer_id=f"c{i}", name=f"name-{i}")
        record.event_timestamp.FromDatetime(at)
        out.append(record.SerializeToString())
    return out

"""The stateless job written with Bytewax: ``python -m bytewax.run bytewax_flow:flow -i I -a ADDRESSES`` with
one process per core. The Kafka source reads to the end of each partition and stops (``tail=False``).
"""

from __future__ import annotations

import sys

import bytewax.operators as op
from bytewax.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource
from bytewax.dataflow import Dataflow

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import BOOTSTRAP, INPUT, OUTPUT, transform  # noqa: E402

flow = Dataflow("bench-stateless")
records = op.input("in", flow, KafkaSource([BOOTSTRAP], [INPUT], tail=False, batch_size=10000))
values = op.filter_map("transform", records, lambda message: transform(message.value))
out = op.map("wrap", values, lambda value: KafkaSinkMessage(key=None, value=value))
op.output("out", out, KafkaSink([BOOTSTRAP], OUTPUT, add_config={"linger.ms": "5", "batch.num.messages": "10000"}))

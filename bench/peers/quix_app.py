"""The stateless job written with Quix Streams (run one process per core; they share a consumer group).

``python quix_app.py IDLE_SECONDS``: stops after IDLE_SECONDS without new input; ``BENCH_GROUP`` names the group.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid

from quixstreams import Application

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import BOOTSTRAP, INPUT, OUTPUT, transform  # noqa: E402

STATE_DIR = tempfile.TemporaryDirectory(prefix="quix-state-")  # removed at exit
GROUP = os.environ.get("BENCH_GROUP") or f"quix-{uuid.uuid4()}"  # one group per run, shared by its processes


def main(idle: float) -> None:
    app = Application(
        broker_address=BOOTSTRAP,
        # the two processes would race to create the same state directory (FileExistsError); the job keeps no state
        state_dir=STATE_DIR.name,
        consumer_group=GROUP,
        auto_offset_reset="earliest",
        auto_create_topics=False,
        use_changelog_topics=False,
        loglevel="WARNING",
    )
    source = app.topic(INPUT, value_deserializer="bytes")
    sink = app.topic(OUTPUT, value_serializer="bytes")
    sdf = app.dataframe(source)
    sdf = sdf.apply(transform).filter(lambda value: value is not None)
    # Quix stamps output records with the input's timestamp; the bench times the output's produce time
    sdf = sdf.set_timestamp(lambda _value, _key, _timestamp, _headers: int(time.time() * 1000))
    sdf.to_topic(sink)
    app.run(timeout=idle, collect=False)


if __name__ == "__main__":
    main(float(sys.argv[1]))

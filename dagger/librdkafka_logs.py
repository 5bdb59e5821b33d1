"""librdkafka's own log lines, kept to what an operator can read.

librdkafka logs every failed connection attempt (``Connect to ipv4#127.0.0.1:1 failed: Connection refused``) to
standard error, many times a second while a broker is down: a job started against an unreachable broker printed
578 of them in 43 s, burying the one line that said what was wrong. The Kafka clients of the job's Python code get
:func:`quiet` settings: their lines go to the ``dagger.kafka.client`` logger instead, at most one per kind
(librdkafka's facility, e.g. ``FAIL``) every :data:`EVERY_SECONDS`, the next one saying how many were left out.
The C helper of :mod:`dagger.kafka.native` does the same on its own clients. What went wrong still reaches the
user in full through the errors the clients return, which the sources and sinks turn into their messages.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

#: at most one librdkafka line per facility this often
EVERY_SECONDS = 30.0

_LOGGER = "dagger.kafka.client"


class _Throttle(logging.Filter):
    """Lets one record per librdkafka facility through every ``every`` seconds and counts the rest."""

    def __init__(self, every: float = EVERY_SECONDS):
        super().__init__()
        self.every = every
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._left_out: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        # confluent-kafka logs as logger.log(level, "%s [%s] %s", facility, client name, text)
        facility = str(record.args[0]) if isinstance(record.args, tuple) and record.args else record.getMessage()
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(facility, -self.every) < self.every:
                self._left_out[facility] = self._left_out.get(facility, 0) + 1
                return False
            self._last[facility] = now
            left_out = self._left_out.pop(facility, 0)
        if left_out:
            record.msg = f"{record.msg} ({left_out} more {facility} line(s) in the last {self.every:.0f} s)"
        if record.levelno > logging.WARNING:  # the client retries: what failed for good comes back as an error
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def client_logger() -> logging.Logger:
    """The logger librdkafka's lines go to (one per process, throttled)."""
    logger = logging.getLogger(_LOGGER)
    if not any(isinstance(f, _Throttle) for f in logger.filters):
        logger.addFilter(_Throttle())
    return logger


def quiet(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` for a confluent-kafka client whose log lines go to :func:`client_logger`."""
    return {**config, "logger": client_logger()}

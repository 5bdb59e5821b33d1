"""Descriptor sets fetched again while a job runs (``SCHEMA_REGISTRY_STENCIL_CACHE_AUTO_REFRESH``).

A :class:`DescriptorWatcher` fetches the sets every ``SCHEMA_REGISTRY_STENCIL_CACHE_TTL_MS`` on a thread of its
own, so a slow descriptor server never holds up the job; when they differ from the ones the job runs with, it
hands them to the runner, which switches the query to them between micro-batches
(:meth:`dagger.runner.JobRunner`): a compatible change restarts the query from its checkpoint (nothing lost, nothing
read twice), an incompatible one stops the job naming the field.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("dagger")


class DescriptorWatcher:
    """Calls ``fetch`` (returns new sets, or None when unchanged) every ``interval`` seconds until one comes;
    :attr:`fresh` holds it until :meth:`take`."""

    def __init__(self, fetch: Callable[[], Any], interval: float):
        self._fetch = fetch
        self.interval = interval
        self.fresh: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dagger-descriptor-refresh", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if self.fresh is not None:
                continue  # the runner has not switched to the last one yet
            try:
                self.fresh = self._fetch()
            except Exception as exc:  # noqa: BLE001 - a refresh never stops the job
                log.warning("descriptor refresh failed, going on with the sets the job runs with: %s", exc)

    def take(self) -> Any:
        """The new sets (once)."""
        fresh, self.fresh = self.fresh, None
        return fresh

    def close(self) -> None:
        self._stop.set()

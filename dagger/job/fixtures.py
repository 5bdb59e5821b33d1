"""What ``dagger test`` puts in place of a job's outside world (:class:`JobFixtures`): each stream's source, the
sinks' destinations, the dead-letter output and the descriptor sets. The job reads it at the few places that
touch the outside world (:class:`~dagger.job.context.JobContext`, the sinks built in :mod:`dagger.job.plan`, the
start in :mod:`dagger.job.start`); everything between runs as in production. Plain data, on the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dagger.plugins.sink import Sink
    from dagger.plugins.source import Source
    from dagger.schema.descriptor_sets import DescriptorSet


@dataclass
class JobFixtures:
    """A test case's stand-ins for the job's outside world."""

    #: table → the source that reads the case's records instead of the stream's own
    sources: dict[str, Source]
    #: every stream ends (one batch query) or not (micro-batches until the input is used up)
    bounded: bool
    #: a directory of the case's own: each sink's captured records, the dead letters
    directory: str
    #: the descriptor sets the job runs with (fetched once for every case of a config), None: fetched as usual
    descriptor_set: DescriptorSet | None = None
    #: the post-processors' lookups' answers (the case's MOCKS, as plain dicts), None: the lookups are made
    mocks: list[dict] | None = None

    @property
    def longbow_store(self) -> str:
        """The file Longbow's history is kept in (:class:`~dagger.longbow.memory.MemoryStore`), not Bigtable."""
        return str(Path(self.directory) / "longbow.sqlite")

    @property
    def dead_letter_dir(self) -> str:
        """Where the case's dead letters go, from the streams and the sinks alike (JSON lines)."""
        return str(Path(self.directory) / "dead-letters")

    def capture_dir(self, sink: Sink) -> str:
        """Where ``sink``'s records are kept (:mod:`dagger.sinks.capture`)."""
        return str(Path(self.directory) / "sinks" / sink.display_name.replace("/", "_"))

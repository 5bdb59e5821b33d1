"""Exceptions with messages meant for the person who runs the job.

Every error a user can cause carries one message naming what is wrong, where, and what is accepted.
``DaggerConfigError`` (and its subclasses) are caught by the CLI and turned into exit code 2 before
Spark starts.
"""

from __future__ import annotations


class DaggerError(Exception):
    """Base class of every error raised on purpose by Dagger on Spark."""


class DaggerConfigError(DaggerError):
    """The job config is invalid. The CLI prints the message and exits with code 2."""

    exit_code = 2


class SchemaRegistryError(DaggerConfigError):
    """A descriptor set could not be fetched or parsed, or a message name is unknown."""


class DescriptorFetchError(SchemaRegistryError):
    """A descriptor set could not be fetched: its server is unreachable or answered an error, or its file cannot
    be read (a set that arrived but does not parse is a plain :class:`SchemaRegistryError`)."""


class SchemaCompatibilityError(DaggerConfigError):
    """The descriptors changed incompatibly with the checkpointed query."""


class SqlError(DaggerConfigError):
    """The SQL query cannot be parsed, rewritten or analysed."""


class InvalidRecordError(DaggerError):
    """A source record could not be decoded and the stream's policy is ``fail``."""


class SourceError(DaggerError):
    """A source cannot reach its system (unreachable broker, failed authentication, ...)."""


class UdfError(DaggerError):
    """A function called from the SQL (a user's Python UDF or a built-in one) raised on a row or batch."""


class SinkError(DaggerError):
    """A sink could not write a batch (delivery failure, impossible cast, ...)."""

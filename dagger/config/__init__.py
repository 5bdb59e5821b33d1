"""Job configuration: the typed model and the loader; a config's plugins are bound by :mod:`dagger.job.binding`
(:func:`dagger.job.load_config` reads and binds)."""

from dagger.config.loader import parse_config, read_config
from dagger.config.model import JobConfig, StreamConfig

__all__ = ["JobConfig", "StreamConfig", "parse_config", "read_config"]

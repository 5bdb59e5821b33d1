"""Job configuration: the typed model, the loader and the generated reference."""

from dagger.config.loader import load_config, validate_config
from dagger.config.model import JobConfig, StreamConfig

__all__ = ["JobConfig", "StreamConfig", "load_config", "validate_config"]

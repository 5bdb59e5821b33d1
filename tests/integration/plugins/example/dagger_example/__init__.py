"""Dagger plugins of every kind, one class each, registered by the entry points of ``pyproject.toml`` alone."""

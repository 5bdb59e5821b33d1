"""The built-in input data types (``INPUT_DATATYPE``), each one module that owns its settings, its table's columns,
its decoders and its prunable fields: :mod:`~dagger.formats.proto` (Dagger's), :mod:`~dagger.formats.json` (Dagger's)
and :mod:`~dagger.formats.avro` (beyond Dagger), with what they share in :mod:`~dagger.formats.records`. Importing
the package registers them (:mod:`dagger.plugins.format`)."""

from importlib import import_module

#: the built-in formats, in the order they register: the config reference's, Dagger's own first
BUILT_IN = ("proto", "json", "avro")

for _module in BUILT_IN:
    import_module(f"dagger.formats.{_module}")

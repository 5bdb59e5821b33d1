"""One plugin API: every kind (source, input data type, sink, transformer, lookup, function) registers the same way
(a name, a typed settings model, a constructor) and installed packages plug in through the kind's entry-point
group."""

from __future__ import annotations

import sys

import pytest
from pydantic import BaseModel

from dagger.errors import DaggerConfigError
from dagger.job.binding import FORMATS, SINKS, SOURCES
from dagger.plugins.lookup import LOOKUPS
from dagger.plugins.registry import Registry
from dagger.plugins.transformer import TRANSFORMERS, Transformer, resolve_transformer
from dagger.plugins.udf import UDFS
from tests.conftest import install_plugin_package

ALL = {
    "dagger.sources": SOURCES,
    "dagger.formats": FORMATS,
    "dagger.sinks": SINKS,
    "dagger.transformers": TRANSFORMERS,
    "dagger.lookups": LOOKUPS,
    "dagger.functions": UDFS,
}


def test_every_kind_is_one_registry_with_its_own_entry_point_group():
    import dagger.processors.external.kinds  # noqa: F401 - registers Dagger's lookups
    import dagger.processors.transformers  # noqa: F401 - registers Dagger's transformers

    assert all(isinstance(r, Registry) for r in ALL.values())
    assert {group: r.group for group, r in ALL.items()} == {group: group for group in ALL}
    for registry in ALL.values():
        for name, plugin in registry.plugins().items():
            assert (
                plugin.name == name and issubclass(plugin.settings, registry.settings_base) and callable(plugin.build)
            )
    assert {"KAFKA_SOURCE", "KAFKA_CONSUMER", "PARQUET_SOURCE"} <= set(SOURCES.plugins())
    assert {"PROTO", "JSON"} <= set(FORMATS.plugins())
    assert {"log", "kafka", "influx", "bigquery"} <= set(SINKS.plugins())
    assert {"http", "es", "pg", "grpc"} <= set(LOOKUPS.plugins())
    assert {"HashTransformer", "SQLTransformer", "DeDuplicationTransformer"} <= set(TRANSFORMERS.plugins())


def test_a_registered_function_is_in_every_jobs_catalog(tmp_path, monkeypatch):
    from dagger.functions import build_catalog
    from dagger.plugins.udf import FunctionSettings, register_udf
    from udfs.declare import Function

    register_udf(
        "Quadruple",
        FunctionSettings,
        lambda: Function("Quadruple", "sql", "Quadruple(x BIGINT) -> BIGINT", "", "x BIGINT", "BIGINT", "x * 4"),
    )
    try:

        class Config:
            FUNCTION_FACTORY_CLASSES: list = []

        catalog = build_catalog(Config())
        assert catalog.functions["QUADRUPLE"].body == "x * 4"
        assert catalog.origin["QUADRUPLE"] == "registered function Quadruple"
    finally:
        UDFS.entries.pop("Quadruple", None)


def test_the_built_in_library_is_registry_entries_and_a_package_may_replace_one_of_them(caplog):
    from dagger.functions import _LIBRARY, build_catalog, registered_functions
    from dagger.plugins.udf import FunctionSettings, register_udf
    from udfs import library
    from udfs.declare import Function

    class Config:
        FUNCTION_FACTORY_CLASSES: list = []

    saved = dict(UDFS.entries), dict(_LIBRARY)
    for name in _LIBRARY:  # as in a fresh process: the library not registered yet
        UDFS.entries.pop(name, None)
    _LIBRARY.clear()
    try:
        register_udf(  # a package's own Distance, registered before the library is
            "Distance",
            FunctionSettings,
            lambda: Function("Distance", "sql", "Distance(x DOUBLE) -> DOUBLE", "", "x DOUBLE", "DOUBLE", "x"),
        )
        with caplog.at_level("WARNING", logger="dagger.functions"):
            functions = registered_functions()
        names = {f.name for f in library()}
        assert names <= set(UDFS.entries) and names - {"Distance"} <= _LIBRARY.keys()  # the library: registry entries
        assert functions["GeoHash"][1] == "the built-in library"
        assert functions["Distance"] == (functions["Distance"][0], "registered function Distance")
        assert functions["Distance"][0].body == "x"
        assert "function Distance registered by a package replaces the built-in library's" in caplog.text
        catalog = build_catalog(Config())
        assert catalog.origin["DISTANCE"] == "registered function Distance"
        assert catalog.origin["GEOHASH"] == "the built-in library"
        caplog.clear()
        register_udf(  # a package's own GeoHash, registered after the library was
            "GeoHash",
            FunctionSettings,
            lambda: Function("GeoHash", "sql", "GeoHash(x STRING) -> STRING", "", "x STRING", "STRING", "x"),
        )
        with caplog.at_level("WARNING", logger="dagger.functions"):
            assert registered_functions()["GeoHash"][1] == "registered function GeoHash"
        assert "function GeoHash registered by a package replaces the built-in library's" in caplog.text
    finally:
        UDFS.entries.clear()
        UDFS.entries.update(saved[0])
        _LIBRARY.clear()
        _LIBRARY.update(saved[1])


def test_an_entry_point_that_registers_nothing_under_its_name_is_named(tmp_path, monkeypatch):
    install_plugin_package(tmp_path, monkeypatch, LOOKUPS, "silent_lookup", "VALUE = 1\n", "silent")
    try:
        with pytest.raises(
            DaggerConfigError, match=r"lookup 'silent': module 'silent_lookup' was imported but registered no lookup"
        ):
            LOOKUPS.plugins()
    finally:
        sys.modules.pop("silent_lookup", None)


def test_a_settings_model_of_another_base_is_refused_for_every_kind():
    class Loose(BaseModel):
        x: int = 1

    for registry in ALL.values():
        with pytest.raises(TypeError, match=f"{registry.kind} 'loose': settings must be a"):
            registry.register("loose", Loose, lambda: None)
        assert "loose" not in registry.entries


class Passing(Transformer):
    """A transformer named as ``module:Class`` in a config (resolved below)."""

    name = "Passing"

    def transform(self, df):
        return df


def test_a_transformer_named_module_colon_class_becomes_a_registry_entry():
    name = f"{__name__}:Passing"
    try:
        plugin = resolve_transformer(name, "PROCESSOR_POSTPROCESSOR_CONFIG.transformers[0]")
        assert plugin.build is Passing and TRANSFORMERS.get(name) is plugin  # resolved once, in the registry
        assert resolve_transformer(name, "again") is plugin
        with pytest.raises(DaggerConfigError, match="is not a dagger.plugins.transformer.Transformer"):
            resolve_transformer(f"{__name__}:test_a_transformer_named_module_colon_class_becomes_a_registry_entry", "x")
    finally:
        TRANSFORMERS.entries.pop(name, None)

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


CLASSES = {
    "dagger.sources": (
        "Rows",
        """
        from pydantic import Field
        from dagger.plugins.source import Source, SourceSettings
        class RowsSettings(SourceSettings):
            '''Rows.'''
            SOURCE_ROWS_COUNT: int = Field(3, description="How many.")
        class Rows(Source):
            '''Rows counted from zero.'''
            names = ("ROWS",)
            source_type = "BOUNDED"
            settings_model = RowsSettings
            def is_bounded(self, stream, to_ms=None): return True
            def build(self, stream, env): return None
            def location(self, stream): return "rows"
            def input_description(self, spark, stream, from_ms, to_ms): return {}
        """,
    ),
    "dagger.sinks": (
        "Webhook",
        """
        from dagger.plugins.sink import Sink, SinkSettings
        class WebhookSettings(SinkSettings):
            '''A webhook.'''
            SINK_WEBHOOK_URL: str
        class Webhook(Sink):
            '''Rows POSTed to a URL.'''
            name = "webhook"
            settings_model = WebhookSettings
            def __init__(self, url): self.url = url
            @classmethod
            def from_settings(cls, settings, env): return cls(settings.SINK_WEBHOOK_URL)
            def writer(self, partition_id, batch_id): return None
        """,
    ),
    "dagger.transformers": (
        "Upper",
        """
        from dagger.plugins.transformer import Transformer, TransformerArguments
        class UpperArguments(TransformerArguments):
            column: str
        class Upper(Transformer):
            '''Upper-cases a column.'''
            settings_model = UpperArguments
            def transform(self, df): return df
        """,
    ),
    "dagger.lookups": (
        "Redis",
        """
        from dagger.plugins.lookup import Lookup, LookupSettings
        class RedisSettings(LookupSettings):
            host: str
        class Redis(Lookup):
            '''Answers from Redis.'''
            settings_model = RedisSettings
            def plan(self, df): return df, []
        """,
    ),
    "dagger.functions": (
        "triple",
        """
        from udfs.declare import sql_function
        @sql_function("Triple", "x BIGINT", "BIGINT")
        def triple():
            '''Three times x.'''
            return "x * 3"
        """,
    ),
}


@pytest.mark.parametrize("group", list(CLASSES))
def test_an_entry_point_naming_one_class_registers_it_with_no_code(tmp_path, monkeypatch, group):
    registry = ALL[group]
    attribute, code = CLASSES[group]
    module = f"one_class_{registry.kind.replace(' ', '_')}"
    install_plugin_package(tmp_path, monkeypatch, registry, module, code, "mine", attribute)
    try:
        plugin = registry.plugins()["mine"]
        found = getattr(sys.modules[module], attribute)
        assert plugin.settings is getattr(found, "settings_model", registry.settings_base)
        assert plugin.summary == {"triple": "Three times x."}.get(attribute, (found.__doc__ or "").strip())
        if group == "dagger.sinks":
            assert plugin.build == found.from_settings  # a sink is built from its settings and env
            assert plugin.build(plugin.settings(SINK_WEBHOOK_URL="http://x"), None).url == "http://x"
        elif group == "dagger.functions":
            assert plugin.build().name == "Triple"  # the declaration
        else:
            assert plugin.build is found
        if group == "dagger.transformers":
            assert found.name == "Upper"  # its messages name the class when it sets no name
    finally:
        registry.entries.pop("mine", None)
        sys.modules.pop(module, None)


def test_an_entry_point_naming_something_else_than_the_kinds_class_is_named(tmp_path, monkeypatch):
    install_plugin_package(tmp_path, monkeypatch, LOOKUPS, "not_a_lookup", "class Other:\n    pass\n", "x", "Other")
    try:
        with pytest.raises(DaggerConfigError, match=r"lookup 'x': entry point 'not_a_lookup:Other' names <class "):
            LOOKUPS.plugins()
        (tmp_path / "f").mkdir()
        install_plugin_package(tmp_path / "f", monkeypatch, UDFS, "not_a_function", "def f():\n    pass\n", "f", "f")
        with pytest.raises(DaggerConfigError, match="is not one function declared with udfs.declare"):
            UDFS.plugins()
    finally:
        sys.modules.pop("not_a_lookup", None)
        sys.modules.pop("not_a_function", None)

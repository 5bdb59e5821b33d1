"""The tests of tests/unit/plugins/test_plugin_api.py that start a server (Apache Kafka, a registry, a Spark job's services): the
file's own tests stay in the unit layer, these run as integration tests."""

from __future__ import annotations

import sys

import pytest

from dagger.plugins.lookup import LOOKUPS
from dagger.plugins.transformer import TRANSFORMERS
from dagger.plugins.udf import UDFS
from tests.conftest import install_plugin_package


@pytest.mark.parametrize(
    ("registry", "name", "code"),
    [
        (
            LOOKUPS,
            "redis",
            """
            from dagger.plugins.lookup import Lookup, LookupSettings, register_lookup
            class RedisSettings(LookupSettings):
                host: str
            class RedisLookup(Lookup):
                def plan(self, df):
                    return df, []
            register_lookup("redis", RedisSettings, RedisLookup)
            """,
        ),
        (
            TRANSFORMERS,
            "Upper",
            """
            from dagger.plugins.transformer import Transformer, TransformerArguments, register_transformer
            class UpperArguments(TransformerArguments):
                column: str
            class Upper(Transformer):
                name = "Upper"
                def transform(self, df):
                    return df
            register_transformer("Upper", UpperArguments, Upper)
            """,
        ),
        (
            UDFS,
            "Triple",
            """
            from udfs.declare import sql_function
            from dagger.plugins.udf import register_module
            import sys
            @sql_function("Triple", "x BIGINT", "BIGINT")
            def triple():
                '''Three times x.'''
                return "x * 3"
            register_module(sys.modules[__name__])
            """,
        ),
    ],
    ids=["lookup", "transformer", "function"],
)
def test_an_installed_packages_entry_point_registers_a_plugin_of_each_processor_kind(
    tmp_path, monkeypatch, registry, name, code
):
    module = f"plugin_{name.lower()}"
    install_plugin_package(tmp_path, monkeypatch, registry, module, code, name)
    try:
        plugin = registry.plugins()[name]
        assert plugin.build is not None and plugin.settings.__module__ in (module, "dagger.plugins.udf")
    finally:
        registry.entries.pop(name, None)
        sys.modules.pop(module, None)

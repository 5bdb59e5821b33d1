"""The plugin API: one registry per kind of plugin, each beside its contract, all registering the same way.

=============  =====================================  ==========================  =============================
kind           contract and registry                  users write                 entry-point group
=============  =====================================  ==========================  =============================
source         :mod:`dagger.plugins.source`           ``SOURCE_NAME``             ``dagger.sources``
input format   :mod:`dagger.plugins.format`           ``INPUT_DATATYPE``          ``dagger.formats``
sink           :mod:`dagger.plugins.sink`             ``SINK_TYPE``               ``dagger.sinks``
transformer    :mod:`dagger.plugins.transformer`      ``transformation_class``    ``dagger.transformers``
lookup         :mod:`dagger.plugins.lookup`           ``external_source`` keys    ``dagger.lookups``
function       :mod:`dagger.plugins.udf`              a SQL function's name       ``dagger.functions``
=============  =====================================  ==========================  =============================

Each plugin is one class (a SQL function: one declared function) and registers with
``register_<kind>(name, settings, build)``: the name users write, a typed settings model (the config reference is
generated from it) and a constructor (:mod:`dagger.plugins.registry`); or an installed package's entry point names
the class, whose ``settings_model`` attribute is its model, and nothing else is written. Sinks, transformers and
lookups are built per config entry as ``build(settings, env)``: the entry's validated settings and what the job's
plugins of the kind share (:class:`~dagger.plugins.sink.SinkEnv`, :class:`~dagger.plugins.processor.ProcessorEnv`).
Sources and formats serve every stream of theirs from one instance, whose methods take the bound stream (its typed
settings, :mod:`dagger.plugins.bound`) and an env (:class:`~dagger.plugins.source.SourceEnv`,
:class:`~dagger.plugins.format.FormatEnv`). A job config meets its
plugins in one place, :mod:`dagger.job.binding`, above the built-in plugins (transformers are resolved when the job is planned, since a
``PYTHON_FILES`` module may register one). This package's ``__init__`` imports nothing, so that a plugin
importing its contract never loads the built-in plugins.
"""

"""The plugin registries: the names users write in configs (``SINK_TYPE``, ``SOURCE_NAME``), each with its settings
model and its constructor.

This layer sits below the config model, which validates a job against it, and above nothing of the plugins: the
built-in plugins (:mod:`dagger.sinks`, :mod:`dagger.sources`) and installed packages register themselves here, and
are loaded by module name the first time a name is looked up.
"""

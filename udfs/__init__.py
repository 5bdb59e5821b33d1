"""The built-in UDF library, registered by name before a job's SQL runs (see the UDF issue)."""

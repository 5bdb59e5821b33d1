"""Longbow and Longbow+: history per key over days (reference/dagger.md §4.8). :mod:`dagger.longbow.schema`
decides from the SQL output columns which kind a query asks for and checks its columns."""

"""Spark tests use the one session-scoped local SparkSession fixture ``spark`` of
tests/conftest.py (shared with the Spark data source's interop tests)."""

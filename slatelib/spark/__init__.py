"""Spark integration: the ``slatedb`` data source and the export on Spark.

``register(spark)`` registers the data source on a session (and turns on Python data
source filter pushdown, which the source needs); the jobs register it themselves::

    import slatelib.spark
    slatelib.spark.register(spark)
    df = spark.read.format("slatedb").option("db", "s3://bucket/tenants/a/db").load()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
REGISTERED_CONF = "spark.slatelib.datasource.registered"


def register(spark: SparkSession) -> None:
    """Register the ``slatedb`` format on ``spark`` (idempotent: once per session)."""
    from slatelib.spark.datasource import SlateDbDataSource

    spark.conf.set(PUSHDOWN_CONF, "true")
    if spark.conf.get(REGISTERED_CONF, "false") == "true":
        return
    spark.dataSource.register(SlateDbDataSource)
    spark.conf.set(REGISTERED_CONF, "true")


__all__ = ["PUSHDOWN_CONF", "REGISTERED_CONF", "register"]

"""Spark integration: the ``slatedb`` data source and the export on Spark.

``register(spark)`` registers the data source on a session (and turns on Python data
source filter pushdown, which the source needs); the jobs register it themselves::

    import slatelib.spark
    slatelib.spark.register(spark)
    df = spark.read.format("slatedb").option("db", "s3://bucket/tenants/a/db").load()

The jobs' Spark side lives here too (``jobs/`` only parses arguments): ``session`` builds
the SparkSession, ``compaction`` runs compaction tasks on the executors, ``standing`` the
worker and service modes, ``gc`` the GC backend, ``isolation`` one database's failure as its
own result, and ``executors`` / ``guard`` are the seam every task goes through.
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

"""Build the SparkSession for a job. Nothing else lives here."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def build_spark(app_name: str, *, master: str | None = None,
                conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession for ``app_name``. ``master`` defaults to what spark-submit set, else
    ``local[*]``. Executors run this interpreter (the project's virtualenv) unless
    ``PYSPARK_PYTHON`` says otherwise."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif "spark.master" not in (conf or {}) and not os.environ.get("SPARK_MASTER"):
        builder = builder.config("spark.master", os.environ.get("SLATELIB_SPARK_MASTER", "local[*]"))
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.python.worker.reuse": "true",
        "spark.task.maxFailures": "4",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    for k, v in {**defaults, **(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SLATELIB_SPARK_LOG_LEVEL", "WARN"))
    return spark

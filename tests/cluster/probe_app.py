"""A PySpark application for the cluster tier: what the executors see. Prints one JSON
line, per task: the host, the Python, where ``slatelib`` is imported from, and what each
of the checkout's directories named on the command line holds there."""

from __future__ import annotations

import json
import sys
from typing import Any


def look(paths: list[str]) -> Any:
    def inside(_: Any) -> dict[str, Any]:
        import os
        import socket

        import slatelib

        seen = {p: sorted(os.listdir(p))[:5] if os.path.isdir(p) else None for p in paths}
        return {"host": socket.gethostname(), "python": sys.executable,
                "slatelib": slatelib.__file__, "cwd": os.getcwd(), "dirs": seen}
    return inside


def main() -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("slatelib-cluster-probe").getOrCreate()
    sc = spark.sparkContext
    got = sc.parallelize(range(4), 4).map(look(sys.argv[1:])).collect()
    print(json.dumps({"app_id": sc.applicationId, "tasks": got}))
    spark.stop()


if __name__ == "__main__":
    main()

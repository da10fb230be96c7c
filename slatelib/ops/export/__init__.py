"""Reading a checkpoint in parallel key ranges and exporting it (Parquet, Delta).

Spark-free: :mod:`slatelib.ops.export.scan` plans and executes the reads of one checkpoint
(what the Spark data source ``slatelib.spark`` fans out), :mod:`slatelib.ops.export.pin`
resolves and creates the checkpoints an export reads, :mod:`slatelib.ops.export.delta`
commits Parquet files and applies changes to a Delta table with delta-rs, and
:mod:`slatelib.ops.export.report` builds the job's report. Design:
docs/rfcs/0011-spark-datasource-and-export.md.
"""

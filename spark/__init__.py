"""RocketMQ data in Spark: Python Data Sources and the `rmq export parquet` command.

    from rmq_spark.session import build_session   # checks Java, registers the sources
    session = build_session("local[*]")
    df = session.read.format("rocketmq-store").load("/data/broker-a/store")
    df = session.read.format("rocketmq").option("namesrv", "ns:9876").option("topics", "T").load()

Modules: sources (the two data sources), schema (the row schema), export and
parquet_sink (the command and its idempotent writer), store_scan (CommitLog splits),
pull_client and live (blocking pulls from a broker), rows (records → Arrow batches),
options, session, java, progress.

The folder is spark/; the package is rmq_spark (rmq_spark/ links to it in the repository,
and the wheel installs it under that name): a top-level `spark` in site-packages would stand
in the way of users' own `spark` modules.

Nothing here imports Trio: Spark runs `read()` in plain Python worker processes, so the
code uses only the sans-IO rmq.protocol codecs and the synchronous rmq.store formats.
Needs pyspark 4.2+ (Python data sources with filter pushdown, read limits and
Trigger.AvailableNow) and pyarrow.
"""

"""A streaming query in a process of its own, for the kill -9 tests:
``python -m tests.spark.stream_job BOOTSTRAP TOPIC CHECKPOINT OUT [--available-now]``.

Reads the topic read_committed with maxOffsetsPerTrigger and appends
(partition, offset, value) to a parquet sink. Without --available-now it runs until
killed; with it, it drains what is committed and exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys

from tests.spark.conftest import spark_env


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("checkpoint")
    p.add_argument("out")
    p.add_argument("--max-offsets", type=int, default=1500)
    p.add_argument("--available-now", action="store_true")
    args = p.parse_args()
    os.environ.update(spark_env())

    from pyspark.sql import SparkSession

    from minibroker.spark import register

    spark = (SparkSession.builder.master("local[2]").appName("stream-job")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.streaming.minBatchesToRetain", "100")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    df = (spark.readStream.format("minibroker")
          .option("kafka.bootstrap.servers", args.bootstrap)
          .option("subscribe", args.topic)
          .option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(args.max_offsets))
          .option("kafkaConsumer.pollTimeoutMs", "30000")
          .load())
    writer = (df.selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
              .writeStream.format("parquet")
              .option("path", args.out)
              .option("checkpointLocation", args.checkpoint))
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime="0 seconds")
    query = writer.start()
    print("query started", flush=True)
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

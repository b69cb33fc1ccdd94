#!/usr/bin/env python3
"""An exactly-once data pipeline on Spark: transactional producers -> minibroker -> PySpark
Structured Streaming (read_committed) -> parquet, then the exactly-once audit of the log.

1. Transactional producers write orders (JSON) to a topic: most transactions commit, every
   fifth one aborts after its records reached the log, and a "zombie" instance is fenced
   mid-transaction when its successor (same transactional.id) starts - the coordinator
   aborts the zombie's transaction and its late commit fails.
2. Two streaming queries read the topic with ``format("minibroker")`` (read_committed):
   ``orders`` appends every order to parquet through Spark's file sink, and ``totals``
   aggregates per customer (count, amount) and rewrites a parquet snapshot of the complete
   result each micro-batch. Both keep their Kafka offsets in Spark checkpoints, so a
   restarted run writes every committed order once.
3. The outputs are checked against what the producers committed, and ``minibroker audit``
   (a Spark job over the broker's data directory) checks the log itself.

Run it from the repository root (two commands)::

    python3 -m venv .venv && .venv/bin/pip install -e '.[spark]'
    .venv/bin/python examples/spark_pipeline.py

It starts a private minibroker on a free loopback port (``--bootstrap`` uses a running
broker instead; give ``--data-dir`` too to audit it) and needs Java 17+ for Spark
(``JAVA_HOME``). Outputs stay in ``--work-dir`` (default: a new temp dir, printed).
Exit status 0 when the outputs hold each committed order exactly once and the audit passes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

CUSTOMERS = [f"customer-{i:02d}" for i in range(12)]
TXN_SIZE = 100


def log(msg: str) -> None:
    print(f"[spark_pipeline {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- 1. the producers -------------------------------------------------------------------------------

class Truth:
    """What the producers committed: the only orders the outputs may hold."""

    def __init__(self) -> None:
        self.orders: dict[int, tuple[str, int]] = {}  # order id -> (customer, amount)
        self.aborted = 0

    def totals(self) -> dict[str, tuple[int, int]]:
        out: dict[str, list[int]] = {}
        for customer, amount in self.orders.values():
            t = out.setdefault(customer, [0, 0])
            t[0] += 1
            t[1] += amount
        return {c: (n, s) for c, (n, s) in out.items()}


def _producer(bootstrap: str, tid: str):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    return p


def _write_txn(p, topic: str, first_id: int, n: int, rng: random.Random) -> dict[int, tuple[str, int]]:
    orders = {}
    for order_id in range(first_id, first_id + n):
        customer, amount = rng.choice(CUSTOMERS), rng.randint(1, 500)
        orders[order_id] = (customer, amount)
        value = json.dumps({"order": order_id, "customer": customer, "amount": amount})
        p.produce(topic, key=customer.encode(), value=value.encode())
    assert p.flush(30) == 0, "orders not delivered"
    return orders


def produce(bootstrap: str, topic: str, records: int, truth: Truth) -> None:
    from confluent_kafka import KafkaException

    rng = random.Random(8)
    shop = _producer(bootstrap, "shop-1")
    next_id = 0
    txns = records // TXN_SIZE
    for n in range(txns):
        shop.begin_transaction()
        orders = _write_txn(shop, topic, next_id, TXN_SIZE, rng)
        next_id += TXN_SIZE
        if n % 5 == 4:
            shop.abort_transaction(30)  # the records are in the log; read_committed skips them
            truth.aborted += len(orders)
        else:
            shop.commit_transaction(30)
            truth.orders.update(orders)
        if n == txns // 2:
            next_id = zombie_restart(bootstrap, topic, next_id, rng, truth, KafkaException)
    log(f"produced {len(truth.orders)} committed and {truth.aborted} aborted orders in {txns + 3} transactions")


def zombie_restart(bootstrap: str, topic: str, next_id: int, rng, truth: Truth, KafkaException) -> int:
    """Instance 1 of "shop-2" is mid-transaction when instance 2 starts: the coordinator
    fences instance 1 (epoch bump) and aborts its transaction; its commit then fails."""
    zombie = _producer(bootstrap, "shop-2")
    zombie.begin_transaction()
    orders = _write_txn(zombie, topic, next_id, TXN_SIZE, rng)
    truth.aborted += len(orders)
    next_id += TXN_SIZE
    successor = _producer(bootstrap, "shop-2")  # the restart: fences the zombie
    try:
        zombie.commit_transaction(10)
        raise AssertionError("the zombie's commit succeeded")
    except KafkaException as e:
        log(f"zombie fenced as expected: {e.args[0].name()}")
    successor.begin_transaction()
    truth.orders.update(_write_txn(successor, topic, next_id, TXN_SIZE, rng))
    successor.commit_transaction(30)
    return next_id + TXN_SIZE


# -- 2. the streaming job ---------------------------------------------------------------------------

def start_queries(spark, bootstrap: str, topic: str, work: Path, max_offsets: int):
    from pyspark.sql import functions as F

    from minibroker.spark import register

    register(spark)
    orders = (spark.readStream.format("minibroker")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(max_offsets))
              .load()
              .select(F.col("partition"), F.col("offset"),
                      F.from_json(F.col("value").cast("string"),
                                  "order long, customer string, amount long").alias("o"))
              .select("partition", "offset", "o.*"))
    raw = (orders.writeStream.format("parquet")
           .option("path", str(work / "orders"))
           .option("checkpointLocation", str(work / "checkpoints" / "orders"))
           .trigger(processingTime="1 second")
           .queryName("orders").start())

    def snapshot(batch, batch_id: int) -> None:
        # The complete aggregate after this batch: rewriting it is idempotent, so a batch
        # replayed after a crash leaves the same files.
        batch.write.mode("overwrite").parquet(str(work / "totals"))

    totals = (orders.groupBy("customer")
              .agg(F.count("*").alias("orders"), F.sum("amount").alias("amount"))
              .writeStream.outputMode("complete")
              .foreachBatch(snapshot)
              .option("checkpointLocation", str(work / "checkpoints" / "totals"))
              .trigger(processingTime="1 second")
              .queryName("totals").start())
    return [raw, totals]


# -- 3. checks ---------------------------------------------------------------------------------------

def check_outputs(spark, work: Path, truth: Truth) -> list[str]:
    problems = []
    rows = spark.read.parquet(str(work / "orders")).collect()
    ids = [r.order for r in rows]
    if len(ids) != len(set(ids)):
        problems.append(f"{len(ids) - len(set(ids))} orders written twice")
    if set(ids) != set(truth.orders):
        problems.append(f"orders: {len(set(truth.orders) - set(ids))} missing, "
                        f"{len(set(ids) - set(truth.orders))} that were never committed")
    got = {r.customer: (r.orders, r.amount) for r in spark.read.parquet(str(work / "totals")).collect()}
    if got != truth.totals():
        problems.append(f"totals differ: {got} != {truth.totals()}")
    log(f"parquet: {len(rows)} orders, {len(got)} customer totals"
        + ("" if problems else " - each committed order exactly once, totals match"))
    return problems


def audit(spark, data_dir: Path) -> bool:
    from minibroker.spark.audit import audit_with_spark, format_text, summarize

    t0 = time.perf_counter()
    reports = audit_with_spark(spark, str(data_dir))
    totals = summarize(reports)
    print(format_text(str(data_dir), reports, totals, time.perf_counter() - t0), flush=True)
    return totals["ok"]


def _spark_session():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (SparkSession.builder.master("local[2]").appName("minibroker-spark-pipeline")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None, spark=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", help="a running broker (default: start a private minibroker)")
    p.add_argument("--data-dir", type=Path, help="that broker's data directory, for the audit")
    p.add_argument("--work-dir", type=Path, help="parquet outputs and checkpoints (default: a temp dir)")
    p.add_argument("--topic", default="orders")
    p.add_argument("--records", type=int, default=20_000, help="orders to produce (default 20000)")
    p.add_argument("--max-offsets-per-trigger", type=int, default=4000)
    args = p.parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="spark-pipeline-"))
    work.mkdir(parents=True, exist_ok=True)
    log(f"work dir {work}")

    broker = None
    bootstrap, data_dir = args.bootstrap, args.data_dir
    if bootstrap is None:
        from minibroker.testing.broker import MiniBroker

        data_dir = work / "broker-data"
        broker = MiniBroker(data_dir=data_dir, name="spark-pipeline", num_partitions=4).start()
        bootstrap = broker.bootstrap_servers
        broker.create_topic(args.topic, partitions=4)
        log(f"minibroker on {bootstrap}, data in {data_dir}")
    own_spark = spark is None
    queries = []
    try:
        spark = spark or _spark_session()
        truth = Truth()
        queries = start_queries(spark, bootstrap, args.topic, work, args.max_offsets_per_trigger)
        produce(bootstrap, args.topic, args.records, truth)
        for q in queries:
            q.processAllAvailable()  # everything committed is in the outputs
        for q in queries:
            q.stop()
        problems = check_outputs(spark, work, truth)
        ok = audit(spark, data_dir) if data_dir is not None else True
        if problems or not ok:
            for line in problems:
                log(f"FAIL: {line}")
            return 1
        log("OK")
        return 0
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
        if own_spark and spark is not None:
            spark.stop()
        if broker is not None:
            broker.close()


if __name__ == "__main__":
    sys.exit(main())

"""``minibroker audit DATA_DIR``: prove, with one Spark job, that a log honours exactly-once.

Each Kafka partition of the data directory is one Spark task (the data source
``minibroker_audit``), which walks the partition's segments read-only and checks the
invariants in ``audit_checks``; the driver reads ``__transaction_state`` and hands every
task what the coordinator decided for its partition (a task reads it again only for a
transaction that began after that read, see ``audit_partition``). The report names each broken
invariant per partition; the exit status is 1 when any failed, 0 otherwise (2: bad
arguments). ``--local`` runs the same checks in this process without Spark.

Under ``spark-submit`` the job uses the session Spark gives it; run directly it starts a
local one (``--master``, default ``local[*]``), which needs Java 17+ (``JAVA_HOME``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .audit_checks import FAILURE
from .audit_tasks import plan, run_task
from .extra import SparkExtraMissing, java_missing, require_spark

# -- the Spark side -------------------------------------------------------------------------------


def audit_with_spark(spark, data_dir: str, topics: list[str] | None = None) -> list[dict]:
    """Run the audit as a Spark job; one report dict per partition, sorted."""
    from .audit_source import AuditSource

    spark.dataSource.register(AuditSource)
    df = (spark.read.format(AuditSource.name()).option("path", os.path.abspath(data_dir))
          .option("topics", ",".join(topics or [])).load())
    reports = [json.loads(row.report) for row in df.collect()]
    return sorted(reports, key=lambda d: (d["topic"], d["partition"]))


def audit_locally(data_dir: str, topics: list[str] | None = None) -> list[dict]:
    return [run_task(t) for t in plan(data_dir, topics)]


# -- the report -----------------------------------------------------------------------------------


def summarize(reports: list[dict]) -> dict:
    failures = [f for r in reports for f in r["findings"] if f["severity"] == FAILURE]
    kinds: dict[str, int] = {}
    for f in failures:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    return {
        "ok": not failures,
        "partitions": len(reports),
        "batches": sum(r["batches"] for r in reports),
        "records": sum(r["records"] for r in reports),
        "failures": len(failures),
        "failure_kinds": kinds,
        "warnings": sum(1 for r in reports for f in r["findings"] if f["severity"] != FAILURE),
    }


def format_text(data_dir: str, reports: list[dict], totals: dict, seconds: float) -> str:
    lines = [f"minibroker audit {data_dir}: {totals['partitions']} partitions, "
             f"{totals['records']:,} records in {totals['batches']:,} batches ({seconds:.1f} s)"]
    for r in reports:
        status = "ok" if r["ok"] else "FAIL"
        lines.append(f"  {r['topic']}-{r['partition']}: {status}  records={r['data_records']} "
                     f"committed_txns={r['committed_txns']} aborted_txns={r['aborted_txns']} "
                     f"open_txns={r['open_txns']} lso={r['last_stable']} hw={r['log_end']}")
        for f in r["findings"]:
            where = f" offset {f['offset']}" if f["offset"] >= 0 else ""
            who = (f" producer {f['producer_id']} epoch {f['producer_epoch']}"
                   if f["producer_id"] >= 0 else "")
            lines.append(f"      {f['severity'].upper()} {f['kind']}:{where}{who}: {f['detail']}")
    if totals["ok"]:
        lines.append(f"result: OK ({totals['warnings']} warnings)")
    else:
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(totals["failure_kinds"].items()))
        lines.append(f"result: FAIL ({totals['failures']} broken invariants: {kinds})")
    return "\n".join(lines)


def _spark_session(master: str):
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("minibroker-audit").config("spark.ui.enabled", "false")
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Not under spark-submit (which starts the JVM first and brings its own master).
        builder = builder.master(master)
    return builder.getOrCreate(), True


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="minibroker audit",
        description="Check a data directory's logs for exactly-once defects: duplicated "
                    "(producer id, epoch, sequence), transactions without markers, aborted records "
                    "visible to read_committed, offset gaps and disorder. Exits 1 when any invariant fails.")
    p.add_argument("data_dir",
                   help="a minibroker (or Kafka) data directory; read only, a broker may be running")
    p.add_argument("--topic", action="append", dest="topics", metavar="TOPIC",
                   help="audit only this topic (repeatable); default: every topic, internal ones included")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.add_argument("--local", action="store_true", help="run the checks in this process, without Spark")
    p.add_argument("--master", default="local[*]",
                   help="Spark master when not under spark-submit (default local[*])")
    args = p.parse_args(argv)
    if not os.path.isdir(args.data_dir):
        print(f"minibroker audit: {args.data_dir} is not a directory", file=sys.stderr)
        return 2
    if not args.local:
        try:
            require_spark("minibroker audit")
        except SparkExtraMissing as e:
            print(f"{e}; or run the same checks without Spark: minibroker audit --local {args.data_dir}",
                  file=sys.stderr)
            return 2
        if java_missing():
            print("minibroker audit: Spark needs Java 17 or 21 (set JAVA_HOME or put java on PATH); "
                  f"or run the same checks without Spark: minibroker audit --local {args.data_dir}",
                  file=sys.stderr)
            return 2
    started = time.perf_counter()
    if args.local:
        reports = audit_locally(args.data_dir, args.topics)
    else:
        spark, own = _spark_session(args.master)
        try:
            reports = audit_with_spark(spark, args.data_dir, args.topics)
        finally:
            if own:
                spark.stop()
    seconds = time.perf_counter() - started
    totals = summarize(reports)
    if args.json:
        print(json.dumps({"data_dir": args.data_dir, "seconds": round(seconds, 3), **totals,
                          "reports": reports}, indent=1))
    else:
        print(format_text(args.data_dir, reports, totals, seconds))
    return 0 if totals["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

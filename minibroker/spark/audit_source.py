"""The data source ``minibroker_audit``: one Spark task audits one Kafka partition.

Rows are ``(topic, partition, report)`` with the partition's report as JSON; the
planning (listing partitions, reading ``__transaction_state``) happens on the driver.
"""

from __future__ import annotations

import json

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .audit_tasks import AuditTask, plan, run_task


class AuditPartition(InputPartition):
    def __init__(self, task: AuditTask) -> None:
        self.task = task


class AuditReader(DataSourceReader):
    def __init__(self, data_dir: str, topics: list[str]) -> None:
        self.data_dir = data_dir
        self.topics = topics

    def partitions(self):
        return [AuditPartition(t) for t in plan(self.data_dir, self.topics)]

    def read(self, partition):
        if isinstance(partition, AuditPartition):
            t = partition.task
            yield (t.topic, t.partition, json.dumps(run_task(t)))


class AuditSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "minibroker_audit"

    def schema(self):
        return "topic string, partition int, report string"

    def reader(self, schema):
        topics = [t for t in self.options.get("topics", "").split(",") if t]
        return AuditReader(self.options["path"], topics)

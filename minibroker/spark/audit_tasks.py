"""The audit's unit of work: one task per Kafka partition, planned on the driver and run
by a Spark task (``audit_source``) or in this process (``audit --local``).

Apart from ``audit.py`` so that the data source can import it without importing the
module that registers the data source.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from minibroker_storage.offline import partition_dirs

from .audit_checks import audit_partition
from .coordinator_log import CoordinatorView, PartitionExpectations, read_coordinator_log

__all__ = ["AuditTask", "plan", "run_task"]

# One row per partition: its report as JSON (a report is small; findings are capped).
_MAX_FINDINGS = 1000


@dataclass(frozen=True)
class AuditTask:
    topic: str
    partition: int
    path: str
    expect: PartitionExpectations
    coordinator_known: bool


def plan(data_dir: str, topics: list[str] | None = None) -> list[AuditTask]:
    view: CoordinatorView = read_coordinator_log(data_dir)
    known = view.available and not view.unreadable_records
    tasks = []
    for p in partition_dirs(data_dir):
        if topics and p.topic not in topics:
            continue
        tasks.append(AuditTask(p.topic, p.partition, p.path, view.for_partition((p.topic, p.partition)),
                               known))
    return tasks


def run_task(task: AuditTask) -> dict:
    report = audit_partition(task.path, task.topic, task.partition, task.expect, task.coordinator_known,
                             data_dir=os.path.dirname(task.path))
    d = report.to_dict()
    if len(d["findings"]) > _MAX_FINDINGS:
        d["findings_dropped"] = len(d["findings"]) - _MAX_FINDINGS
        d["findings"] = d["findings"][:_MAX_FINDINGS]
    return d

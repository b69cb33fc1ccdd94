"""``GET /metrics``: the broker in Prometheus' text format, read at scrape time.

One custom collector on a registry of its own (not prometheus_client's global one, which would
mix in the process's other collectors and outlive a broker in tests). Nothing is updated on
the request path for it: the counters it shows are the ones the broker keeps anyway
(request_counts.py, the transaction machine's stats), the gauges are computed from the
broker's state when Prometheus asks (views.py).

Counters count since the broker started; errors are answers with a non-zero error code, at the
top or in any partition (the hand-encoded Fetch answer carries its first partition error in
``Response.error_code``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from minibroker_storage.lazylog import get_logger

from . import registry_views, share_views, views
from .request_counts import api_name

log = get_logger("minibroker.control.metrics")

# The transaction machine's stats keys, and what each metric says of them.
_TXN_STATS = (
    ("committed", "transactions_committed", "Transactions committed."),
    ("aborted", "transactions_aborted",
     "Transactions aborted (by the producer, a timeout or a new instance)."),
    ("timed_out", "transactions_timed_out",
     "Transactions the coordinator aborted because transaction.timeout.ms passed."),
    ("fenced_by_new_instance", "transactions_fenced",
     "Open transactions aborted because a new instance of their transactional id started."),
    ("requests_fenced", "transaction_requests_fenced",
     "Requests refused because their producer epoch was fenced (a zombie's)."),
)


class BrokerCollector(Collector):
    def __init__(self, plane: Any) -> None:
        self.plane = plane

    def collect(self) -> Iterator[Metric]:
        broker = self.plane.broker
        counts = self.plane.counts
        now = self.plane.clock.wall_ms()

        requests = CounterMetricFamily("minibroker_requests", "Requests received, by API.",
                                       labels=["api"])
        for key, n in sorted(counts.by_api().items()):
            requests.add_metric([api_name(key)], n)
        yield requests
        errors = CounterMetricFamily("minibroker_request_errors",
                                     "Answers with a non-zero error code, by API.", labels=["api"])
        for key, n in sorted(counts.errors.items()):
            errors.add_metric([api_name(key)], n)
        yield errors
        yield CounterMetricFamily("minibroker_bytes_in", "Bytes read from Kafka client connections.",
                                  value=counts.bytes_in)
        yield CounterMetricFamily("minibroker_bytes_out", "Bytes written to Kafka client connections.",
                                  value=counts.bytes_out)
        if broker is None:
            return

        stats = broker.txn_coordinator.machine.stats
        for key, name, doc in _TXN_STATS:
            yield CounterMetricFamily(f"minibroker_{name}", doc, value=stats.get(key, 0))
        open_txns = views.open_transactions(broker, now)
        yield GaugeMetricFamily("minibroker_open_transactions",
                                "Transactions begun and not yet completed.", value=len(open_txns))
        yield GaugeMetricFamily(
            "minibroker_oldest_open_transaction_age_seconds",
            "Age of the oldest open transaction (0 when none is open).",
            value=max((t["age_ms"] for t in open_txns), default=0) / 1000)

        parts = views.partitions(broker)
        hw = GaugeMetricFamily("minibroker_partition_high_watermark", "High watermark (log end).",
                               labels=["topic", "partition"])
        start = GaugeMetricFamily("minibroker_partition_log_start_offset", "Log start offset.",
                                  labels=["topic", "partition"])
        lso_lag = GaugeMetricFamily(
            "minibroker_partition_lso_lag",
            "High watermark minus last stable offset: records read_committed consumers cannot "
            "read yet because a transaction is open.", labels=["topic", "partition"])
        size = GaugeMetricFamily("minibroker_partition_size_bytes", "Size of the log on disk.",
                                 labels=["topic", "partition"])
        for r in parts:
            labels = [r["topic"], str(r["partition"])]
            hw.add_metric(labels, r["high_watermark"])
            start.add_metric(labels, r["log_start_offset"])
            lso_lag.add_metric(labels, r["lso_lag"])
            size.add_metric(labels, r["size_bytes"])
        yield from (hw, start, lso_lag, size)

        stable = {(r["topic"], r["partition"]): (r["last_stable_offset"], r["high_watermark"])
                  for r in parts}
        lag = GaugeMetricFamily(
            "minibroker_consumer_group_lag",
            "Records a read_committed member of the group has yet to read: last stable offset "
            "minus committed offset.", labels=["group", "topic", "partition"])
        members = GaugeMetricFamily("minibroker_consumer_group_members", "Members of the group.",
                                    labels=["group", "type"])
        for g in views.groups(broker, stable):
            members.add_metric([g["group_id"], g["type"]], len(g["members"]))
            for o in g["offsets"]:
                if o["lag"] is not None:
                    lag.add_metric([g["group_id"], o["topic"], str(o["partition"])], o["lag"])
        yield from (lag, members)
        yield from _share_metrics(broker)
        yield from _registry_metrics(broker)


def _share_metrics(broker: Any) -> Iterator[Metric]:
    """Share groups: records in flight by state (gauges, read from the live partitions) and
    deliveries, redeliveries and archived records since the broker started (the history's counts)."""
    labels = ["group", "topic", "partition"]
    in_flight = GaugeMetricFamily(
        "minibroker_share_records",
        "Records of a share partition in flight (from its start offset), by state.",
        labels=[*labels, "state"])
    deliveries = CounterMetricFamily(
        "minibroker_share_deliveries", "Records acquired by a share consumer (each delivery counts).",
        labels=labels)
    redeliveries = CounterMetricFamily(
        "minibroker_share_redeliveries",
        "Records delivered again after a lock expiry, a release, a member leaving or a broker restart.",
        labels=labels)
    archived = CounterMetricFamily(
        "minibroker_share_archived",
        "Records archived: rejected, at the delivery limit, in an aborted transaction or past the log start.",
        labels=labels)
    for g in share_views.groups(broker)["groups"]:
        for row in g["partitions"]:
            ls = [g["group_id"], row["topic"], str(row["partition"])]
            for state, n in (row.get("in_flight") or {}).items():
                in_flight.add_metric([*ls, state], n)
            deliveries.add_metric(ls, row["deliveries"])
            redeliveries.add_metric(ls, row["redeliveries"])
            archived.add_metric(ls, row["archived"])
    yield from (in_flight, deliveries, redeliveries, archived)
    dlq = getattr(getattr(broker, "share_coordinator", None), "dlq", None)
    if dlq is not None:
        written = CounterMetricFamily(
            "minibroker_share_dlq_records",
            "Records a share group wrote to its dead-letter queue topic (KIP-1191; Kafka's "
            "ShareGroupMetrics DeadLetterQueueRecordCount).", labels=["group"])
        failed = CounterMetricFamily(
            "minibroker_share_dlq_failed_records",
            "Records a share group archived without a dead-letter copy because the DLQ topic was "
            "refused or could not be written (the log says why).", labels=["group"])
        for group, n in sorted(dlq.written.items()):
            written.add_metric([group], n)
        for group, n in sorted(dlq.failed.items()):
            failed.add_metric([group], n)
        yield from (written, failed)


def _registry_metrics(broker: Any) -> Iterator[Metric]:
    """The built-in Schema Registry, when it serves: its state's sizes (gauges) and its answers
    since the start by route pattern and HTTP status (a counter)."""
    counts = registry_views.counts(broker)
    if counts is None:
        return
    yield GaugeMetricFamily("minibroker_schema_registry_subjects",
                            "Subjects with a live version.", value=counts["subjects"])
    yield GaugeMetricFamily("minibroker_schema_registry_deleted_subjects",
                            "Subjects whose every version is soft-deleted.", value=counts["deleted_subjects"])
    versions = GaugeMetricFamily("minibroker_schema_registry_versions",
                                 "Versions of all subjects, live or soft-deleted.", labels=["state"])
    versions.add_metric(["live"], counts["versions"])
    versions.add_metric(["deleted"], counts["deleted_versions"])
    yield versions
    yield GaugeMetricFamily("minibroker_schema_registry_schemas",
                            "Schema ids (one per distinct schema, whatever the subjects using it).",
                            value=counts["schemas"])
    requests = CounterMetricFamily("minibroker_schema_registry_requests",
                                   "Schema Registry answers, by method, route and HTTP status.",
                                   labels=["method", "route", "status"])
    for (method, route, status), n in sorted(registry_views.requests(broker).items()):
        requests.add_metric([method, route, str(status)], n)
    yield requests


def add_routes(router: Any, plane: Any) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(plane))

    async def metrics(request: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    router.add_get("/metrics", metrics)

"""Builders of the requests handler tests send."""

from __future__ import annotations

import datetime

from kio.index import load_request_schema

from minibroker_protocol import codec
from minibroker_protocol.build import build, nested
from minibroker_protocol.records import build_batch


def req(key: int, version: int, /, **fields):
    # the codec's class: kio's, or minibroker_protocol.schemas' for a Kafka 4.4 version kio lacks
    return build(codec.request_type(key, version) or load_request_schema(key, version), **fields)


def api_versions(version: int = 3):
    return req(18, version, client_software_name="raw-test", client_software_version="1.0")


def metadata(topics, version: int = 12, auto: bool = True):
    cls = load_request_schema(3, version)
    T = nested(cls, "MetadataRequestTopic")
    ts = None if topics is None else tuple(build(T, name=t, topic_id=None) for t in topics)
    return build(cls, topics=ts, allow_auto_topic_creation=auto,
                 include_topic_authorized_operations=False,
                 include_cluster_authorized_operations=False)


def create_topics(specs, version: int = 7, validate_only: bool = False):
    cls = load_request_schema(19, version)
    T = nested(cls, "CreatableTopic")
    C = nested(cls, "CreatableTopicConfig")
    topics = tuple(
        build(T, name=name, num_partitions=n, replication_factor=rf, assignments=(),
              configs=tuple(build(C, name=k, value=v) for k, v in (cfg or {}).items()))
        for name, n, rf, cfg in specs
    )
    return build(cls, topics=topics, timeout=datetime.timedelta(seconds=5),
                 validate_only=validate_only)


def produce(topic: str, partition: int, records: bytes | None, version: int = 9, acks: int = -1):
    cls = load_request_schema(0, version)
    T = nested(cls, "TopicProduceData")
    P = nested(cls, "PartitionProduceData")
    return build(cls, transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=5),
                 topic_data=(build(T, name=topic, partition_data=(build(P, index=partition, records=records),)),))


def fetch(topic: str, partitions: list[tuple[int, int, int]], *, version: int = 12,
          max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 50 << 20,
          isolation: int = 0):
    cls = load_request_schema(1, version)
    T = nested(cls, "FetchTopic")
    P = nested(cls, "FetchPartition")
    parts = tuple(build(P, partition=p, current_leader_epoch=-1, fetch_offset=off,
                        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=pmax)
                  for p, off, pmax in partitions)
    return build(cls, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes,
                 max_bytes=max_bytes, isolation_level=isolation, session_id=0, session_epoch=-1,
                 topics=(build(T, topic=topic, partitions=parts),), forgotten_topics_data=(),
                 rack_id="", replica_id=-1)


def list_offsets(topic: str, partition: int, timestamp: int, version: int = 7, isolation: int = 0):
    cls = load_request_schema(2, version)
    T = nested(cls, "ListOffsetsTopic")
    P = nested(cls, "ListOffsetsPartition")
    return build(cls, replica_id=-1, isolation_level=isolation,
                 topics=(build(T, name=topic, partitions=(build(P, partition_index=partition,
                                                                current_leader_epoch=-1,
                                                                timestamp=timestamp),)),),
                 timeout=datetime.timedelta(seconds=1))


def batch(n: int = 3, size: int = 10, ts: int | None = None) -> bytes:
    recs = [{"key": f"k{i}".encode(), "value": bytes([65 + i % 26]) * size,
             **({"timestamp": ts + i} if ts is not None else {})} for i in range(n)]
    return build_batch(recs)

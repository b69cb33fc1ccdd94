"""A streams group's topology (KIP-1071) and what the topics make of it.

A Kafka Streams member sends its topology when it joins: subtopologies, each with its source
topics, the repartition topics it writes (sinks) and reads (sources), its state changelog topics
and its copartition groups. The coordinator keeps the first one the group gets (by topology
epoch) and *configures* it against the cluster's topics, as Kafka's
``streams.topics.InternalTopicManager.configureTopics`` does:

* a source topic that does not exist makes the topology unconfigurable: status
  MISSING_SOURCE_TOPICS, no tasks;
* a repartition source topic takes its partition count from the topic info when given, else from
  the subtopologies that write to it (the most partitions among their source topics);
* each subtopology has as many tasks as its source (and repartition source) topics have
  partitions (copartitioned: they must agree, else INCORRECTLY_PARTITIONED_TOPICS);
* a changelog topic has one partition per task of its subtopology;
* an internal topic (repartition or changelog) that does not exist is to be created by the
  coordinator: status MISSING_INTERNAL_TOPICS until it exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ...core.java_hash import java_string_hash

# StreamsGroupHeartbeatResponse.Status codes (StreamsGroupHeartbeatResponse.Status in Kafka)
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int  # 0: derived
    replication_factor: int  # 0: the broker's default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[tuple[str, ...], ...] = ()  # topic names, sources and repartition


@dataclass(frozen=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass
class Configured:
    """The topology against the topics of one moment."""
    tasks: dict[str, int] = field(default_factory=dict)  # subtopology id -> number of tasks
    # name -> (partitions, replication factor, configs) of internal topics that do not exist yet
    missing_internal: dict[str, tuple[int, int, dict[str, str]]] = field(default_factory=dict)
    internal_partitions: dict[str, int] = field(default_factory=dict)  # computed counts
    statuses: list[tuple[int, str]] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        """Tasks can be assigned: nothing missing, nothing mispartitioned."""
        return not self.statuses and not self.missing_internal


def configure(topology: Topology, partitions: Mapping[str, int]) -> Configured:
    """``partitions``: every existing topic's partition count."""
    out = Configured()
    missing_sources = sorted({t for s in topology.subtopologies for t in s.source_topics
                              if t not in partitions})
    if missing_sources:
        out.statuses.append((MISSING_SOURCE_TOPICS,
                             f"Source topics {', '.join(missing_sources)} are missing."))
        return out
    # Repartition topics: explicit count, else derived from their writers' sources (Kafka's
    # RepartitionTopics.setRepartitionSourceTopicPartitionCount), repeated until it settles
    # since a writer may itself read a repartition topic.
    rep: dict[str, int] = {}
    for s in topology.subtopologies:
        for t in s.repartition_source_topics:
            if t.partitions > 0:
                rep[t.name] = t.partitions
    for _ in range(len(topology.subtopologies) + 1):
        changed = False
        for s in topology.subtopologies:
            counts = [partitions[t] for t in s.source_topics]
            counts += [rep[t.name] for t in s.repartition_source_topics if t.name in rep]
            if not counts:
                continue
            for sink in s.repartition_sink_topics:
                if sink not in rep or (rep[sink] < max(counts) and not _explicit(topology, sink)):
                    rep[sink] = max(counts)
                    changed = True
        if not changed:
            break
    unknown = sorted({t.name for s in topology.subtopologies for t in s.repartition_source_topics
                      if t.name not in rep})
    if unknown:
        out.statuses.append((MISSING_SOURCE_TOPICS,
                             f"Cannot compute the number of partitions of repartition topics "
                             f"{', '.join(unknown)}."))
        return out
    for s in topology.subtopologies:
        sizes_of = {t: partitions[t] for t in s.source_topics}
        sizes_of.update({t.name: rep[t.name] for t in s.repartition_source_topics})
        for group in s.copartition_groups:
            sizes = {sizes_of[t] for t in group if t in sizes_of}
            if len(sizes) > 1:
                out.statuses.append((INCORRECTLY_PARTITIONED_TOPICS,
                                     f"Following topics do not have the same number of "
                                     f"partitions: [{', '.join(sorted(group))}]"))
        out.tasks[s.subtopology_id] = max(sizes_of.values(), default=0)
    for s in topology.subtopologies:
        for t in s.repartition_source_topics:
            out.internal_partitions[t.name] = rep[t.name]
            if t.name not in partitions:
                out.missing_internal[t.name] = (rep[t.name], t.replication_factor, dict(t.configs))
        for t in s.state_changelog_topics:
            n = t.partitions if t.partitions > 0 else out.tasks[s.subtopology_id]
            out.internal_partitions[t.name] = n
            if t.name not in partitions:
                out.missing_internal[t.name] = (n, t.replication_factor, dict(t.configs))
    if out.missing_internal:
        # Kafka joins the names of a HashSet<String> (seen on the reference: the order follows
        # the names, not the topology)
        out.statuses.append((MISSING_INTERNAL_TOPICS, "Internal topics are missing: "
                             + ", ".join(java_hash_set_order(out.missing_internal))))
    return out


def _explicit(topology: Topology, name: str) -> bool:
    return any(t.name == name and t.partitions > 0
               for s in topology.subtopologies for t in s.repartition_source_topics)


def java_hash_set_order(items: Iterable[str]) -> tuple[str, ...]:
    """The iteration order of a java.util.HashSet<String> holding these strings: by bucket of the
    spread hash in the smallest table that holds them, insertion order within a bucket."""
    names = list(dict.fromkeys(items))
    n = 16
    while len(names) > n * 3 // 4:
        n *= 2

    def bucket(s: str) -> int:
        h = java_string_hash(s) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (n - 1)
    return tuple(sorted(names, key=bucket))

"""Virtual brokers (``--brokers N``): one process, one copy of the data, N node ids with
their own listeners, partition leaders and coordinators spread over them as a Kafka cluster
spreads them.

Theory of operation. Every connection belongs to the node whose listener accepted it.
The cluster says, for each partition, its replicas (``replication.factor`` of the node ids,
Kafka's round-robin from a start that moves with the partition), its in-sync replicas (the
replicas whose node is up) and its leader (the preferred replica, unless moved or down: then
the next in-sync replica); the group and transaction coordinators are the leaders of the
``__consumer_offsets`` / ``__transaction_state`` partitions of their key, as in Kafka. Requests
that reach a node which is not the leader (Produce, Fetch, ListOffsets) or not the coordinator
(the transaction and group APIs) are answered NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR exactly as
from a Kafka cluster, and clients find the new one through Metadata / FindCoordinator.

The data is one copy whatever the replication factor: a stopped node makes its partitions
move, not their records disappear. Replication factors and the replica lists a client gave
explicitly (CreateTopics / CreatePartitions assignments, reported as given, in their order)
are kept in the data dir (``cluster.json``); leader moves and stopped nodes are not (a restart
elects the preferred leaders again, as a whole Kafka cluster restarting would). No I/O here but that file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from minibroker_storage.lazylog import get_logger

from .core.java_hash import java_string_hash

log = get_logger("minibroker.cluster")

STATE_FILE = "cluster.json"


def connection_node(ctx) -> int | None:
    """The node whose listener a request came in on (None: a single broker's)."""
    return getattr(getattr(ctx.connection, "listener", None), "node_id", None)


# Which coordinator each API goes to (KafkaApis): the transaction coordinator (key type 1) or
# the group coordinator (0). TxnOffsetCommit is the group's; AddOffsetsToTxn the transaction's.
_TXN_APIS = frozenset({22, 24, 25, 26})          # InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn
_GROUP_APIS = frozenset({8, 9, 11, 12, 13, 14, 28, 47, 68, 76, 90, 91, 92})
# OffsetCommit, OffsetFetch, JoinGroup, Heartbeat, LeaveGroup, SyncGroup, TxnOffsetCommit,
# OffsetDelete, ConsumerGroupHeartbeat, ShareGroupHeartbeat, Describe/Alter/DeleteShareGroupOffsets


def coordinator_key(api_key: int, request) -> tuple[int, str] | None:
    """(key type, key) of the coordinator a request must reach, None for other requests."""
    if api_key in _TXN_APIS:
        tid = getattr(request, "transactional_id", None) or getattr(
            request, "v3_and_below_transactional_id", None)
        return (1, tid) if tid else None
    if api_key in _GROUP_APIS:
        gid = getattr(request, "group_id", None)
        if gid is None:
            groups = list(getattr(request, "groups", None) or ())
            gid = getattr(groups[0], "group_id", None) if len(groups) == 1 else None
        return (0, gid) if gid else None
    return None


def manual_assignment_error(replicas, nodes, factor: int | None = None) -> str | None:
    """Why a replica list a client named is refused (INVALID_REPLICA_ASSIGNMENT), or None: Kafka's
    ReplicationControlManager.validateManualPartitionAssignment, its checks in its order."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    previous = None
    for node in sorted(replicas):
        if node not in nodes:
            return (f"The manual partition assignment includes broker {node}, but no such broker is "
                    "registered.")
        if node == previous:
            return f"The manual partition assignment includes the broker {node} more than once."
        previous = node
    if factor is not None and len(replicas) != factor:
        return (f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but "
                f"this is not consistent with previous partitions, which have {factor} replica(s).")
    return None


def all_fenced(partition: int) -> str:
    return (f"All brokers specified in the manual partition assignment for partition {partition} are fenced "
            "or in controlled shutdown.")


class ClusterError(ValueError):
    """An operation the cluster cannot do; the message is one line."""


@dataclass
class Cluster:
    node_ids: list[int]
    data_dir: Path | None = None
    up: set[int] = field(init=False)
    replication: dict[str, int] = field(default_factory=dict)
    # replica lists given explicitly, per topic and partition (the rest are placed round-robin)
    assigned: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    # leaders put elsewhere than the first in-sync replica (a move, or kept after a stop)
    moved: dict[tuple[str, int], int] = field(default_factory=dict)
    # the partitions whose leader changes are counted, and their leader epochs
    known: set[tuple[str, int]] = field(default_factory=set)
    epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    # told each new leader epoch: the partition's log starts it at its end (Partition.makeLeader)
    on_epoch: Callable[[str, int, int], None] | None = None

    def __post_init__(self) -> None:
        self.up = set(self.node_ids)
        if self.data_dir is not None:
            try:
                saved = json.loads((self.data_dir / STATE_FILE).read_text())
                self.replication = {str(k): int(v) for k, v in saved.get("replication", {}).items()}
                self.assigned = {str(t): {int(p): [int(n) for n in ids] for p, ids in parts.items()}
                                 for t, parts in saved.get("assigned", {}).items()}
            except (OSError, ValueError, AttributeError, TypeError):
                self.replication, self.assigned = {}, {}

    @property
    def size(self) -> int:
        return len(self.node_ids)

    # -- placement -------------------------------------------------------------------
    def set_replication(self, topic: str, factor: int) -> None:
        if factor == self.replication.get(topic, 1):
            return
        self.replication[topic] = factor
        self._save()

    def assign(self, topic: str, replicas: dict[int, list[int]]) -> None:
        """Partitions whose replicas a client named (checked by the caller): kept as given."""
        if not replicas:
            return
        self.assigned.setdefault(topic, {}).update({p: list(ids) for p, ids in replicas.items()})
        self._save()

    def forget(self, topic: str) -> None:
        dropped = self.replication.pop(topic, None) is not None
        if self.assigned.pop(topic, None) is not None or dropped:
            self._save()
        self.moved = {tp: n for tp, n in self.moved.items() if tp[0] != topic}
        self.known = {tp for tp in self.known if tp[0] != topic}
        self.epochs = {tp: e for tp, e in self.epochs.items() if tp[0] != topic}

    def replicas(self, topic: str, partition: int) -> list[int]:
        given = self.assigned.get(topic)
        if given is not None and partition in given:
            return given[partition]
        factor = min(self.replication.get(topic, 1), self.size)
        # Kafka starts each topic's round-robin at a random broker; a hash keeps it stable here.
        start = (java_string_hash(topic) & 0x7FFFFFFF) + partition
        return [self.node_ids[(start + i) % self.size] for i in range(factor)]

    def isr(self, topic: str, partition: int) -> list[int]:
        return [n for n in self.replicas(topic, partition) if n in self.up]

    def leader(self, topic: str, partition: int) -> int | None:
        """The partition's leader, None while every replica is down (LEADER_NOT_AVAILABLE)."""
        moved = self.moved.get((topic, partition))
        if moved is not None and moved in self.up:
            return moved
        isr = self.isr(topic, partition)
        return isr[0] if isr else None

    def leader_epoch(self, topic: str, partition: int) -> int:
        # Moves and stops are what change a leader here; both are counted per partition.
        return self.epochs.get((topic, partition), 0)

    def preferred_read_replica(self, topic: str, partition: int, client_rack: str,
                               rack_of: Callable[[int], str | None]) -> int | None:
        """KIP-392: the replica a consumer in ``client_rack`` should read from, None for the
        leader. RackAwareReplicaSelector.select over the replicas that are up (Kafka's live
        replicas holding the fetch offset: here every one, the data being one copy): the leader
        if it is in the rack or none is, else one in the rack (ReplicaManager.findPreferredReadReplica
        never names the leader itself)."""
        leader = self.leader(topic, partition)
        same = [n for n in self.isr(topic, partition) if rack_of(n) == client_rack]
        if not same or leader in same:
            return None
        return same[0]

    def serves_consumer(self, node: int | None, topic: str, partition: int) -> bool:
        """Whether ``node`` may answer a consumer's Fetch v11+ (KIP-392): the leader or a
        follower that is up (FetchParams.fetchOnlyLeader is false once client metadata is sent)."""
        return node is None or node in self.isr(topic, partition)

    def not_leader(self, node: int | None, topic: str, partition: int) -> bool:
        """A partition request to ``node`` that Kafka would answer NOT_LEADER_OR_FOLLOWER."""
        return node is not None and self.leader(topic, partition) != node

    def controller(self) -> int:
        return min(self.up) if self.up else -1

    # -- operations (the control plane's) --------------------------------------------
    def _check_node(self, node: int) -> None:
        if node not in self.node_ids:
            raise ClusterError(f"no broker {node} (brokers: {', '.join(map(str, self.node_ids))})")

    def _leaders(self) -> dict[tuple[str, int], int | None]:
        return {tp: self.leader(*tp) for tp in self.known}

    def observe(self, topic: str, partitions: int) -> None:
        """Partitions whose leader changes are counted in their leader epoch."""
        self.known.update((topic, p) for p in range(partitions))

    def _bump_changed(self, before: dict[tuple[str, int], int | None]
                      ) -> dict[tuple[str, int], tuple[int | None, int | None]]:
        """The partitions whose leader changed since ``before`` (old, new), epochs bumped."""
        changed = {}
        for tp, old in before.items():
            new = self.leader(*tp)
            if new != old:
                self.epochs[tp] = self.epochs.get(tp, 0) + 1
                changed[tp] = (old, new)
                if self.on_epoch is not None:
                    self.on_epoch(tp[0], tp[1], self.epochs[tp])
        return changed

    @staticmethod
    def _lines(changed: dict[tuple[str, int], tuple[int | None, int | None]]) -> list[str]:
        return [f"{t}-{p}: {old} -> {new}" for (t, p), (old, new) in changed.items()]

    def stop(self, node: int) -> list[str]:
        self._check_node(node)
        if node not in self.up:
            raise ClusterError(f"broker {node} is already stopped")
        if len(self.up) == 1:
            raise ClusterError(f"broker {node} is the last one up")
        before = self._leaders()
        self.up.discard(node)
        changed = self._bump_changed(before)
        # The new leaders keep leading when the broker comes back (Kafka moves leadership back
        # only by a preferred-leader election: here, an explicit move).
        for tp, (_old, new) in changed.items():
            if new is not None:
                self.moved[tp] = new
        lines = self._lines(changed)
        log.warning("cluster.broker_stopped", broker=node, leaders_moved=lines)
        return lines

    def start(self, node: int) -> list[str]:
        self._check_node(node)
        if node in self.up:
            raise ClusterError(f"broker {node} is already up")
        before = self._leaders()
        self.up.add(node)
        lines = self._lines(self._bump_changed(before))
        log.info("cluster.broker_started", broker=node, leaders_moved=lines)
        return lines

    def move_leader(self, topic: str, partition: int, node: int) -> list[str]:
        self._check_node(node)
        if node not in self.replicas(topic, partition):
            raise ClusterError(f"broker {node} is not a replica of {topic}-{partition} "
                               f"(replicas: {self.replicas(topic, partition)})")
        if node not in self.up:
            raise ClusterError(f"broker {node} is stopped")
        self.known.add((topic, partition))
        before = self._leaders()
        self.moved[(topic, partition)] = node
        lines = self._lines(self._bump_changed(before))
        log.info("cluster.leader_moved", topic=topic, partition=partition, broker=node, changed=lines)
        return lines

    def elect(self, topic: str, partition: int, preferred: bool) -> str:
        """ElectLeaders for one partition: 'elected', 'not_needed', or why it cannot be done
        ('preferred_unavailable', 'no_eligible_leader'), as Kafka's controller decides."""
        self.known.add((topic, partition))
        leader = self.leader(topic, partition)
        if not preferred:  # unclean: only a partition without a leader needs one
            if leader is not None:
                return "not_needed"
            return "no_eligible_leader"  # every replica is stopped: there is no one to elect
        first = self.replicas(topic, partition)[0]
        if leader == first:
            return "not_needed"
        if first not in self.up:
            return "preferred_unavailable"
        before = self._leaders()
        self.moved.pop((topic, partition), None)
        lines = self._lines(self._bump_changed(before))
        log.info("cluster.leader_elected", topic=topic, partition=partition, broker=first, changed=lines)
        return "elected"

    def describe(self) -> dict:
        return {"brokers": [{"node_id": n, "up": n in self.up} for n in self.node_ids],
                "controller": self.controller()}

    def _save(self) -> None:
        if self.data_dir is None:
            return
        path = self.data_dir / STATE_FILE
        tmp = path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
        assigned = {t: {str(p): ids for p, ids in parts.items()} for t, parts in self.assigned.items()}
        state = {"replication": self.replication, "assigned": assigned}
        tmp.write_text(json.dumps(state, sort_keys=True) + "\n")
        os.replace(tmp, path)

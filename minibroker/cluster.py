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

The data is one copy whatever the replication factor: a stopped node makes its partitions move,
not their records disappear. Replica lists a client gives (CreateTopics / CreatePartitions
assignments) are reported as given, in their order. A reassignment (AlterPartitionReassignments)
gives a partition an explicit replica list too; since every replica is this process, it
completes at once unless a replica it adds is stopped: then it stays in progress (listed, as
Kafka lists one whose new replicas have not caught up) until that node starts. Replication
factors, explicit replica lists and reassignments in progress are kept in the data dir
(``cluster.json``); leader moves and stopped nodes are not (a restart elects the preferred
leaders again, as a whole Kafka cluster restarting would). No I/O here but that file.
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
    """The virtual brokers (--brokers N): who is up, partition leaders and their epochs."""
    node_ids: list[int]
    data_dir: Path | None = None
    up: set[int] = field(init=False)
    replication: dict[str, int] = field(default_factory=dict)
    # leaders put elsewhere than the first in-sync replica (a move, or kept after a stop)
    moved: dict[tuple[str, int], int] = field(default_factory=dict)
    # the partitions whose leader changes are counted, and their leader epochs
    known: set[tuple[str, int]] = field(default_factory=set)
    epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    # told each new leader epoch: the partition's log starts it at its end (Partition.makeLeader)
    on_epoch: Callable[[str, int, int], None] | None = None
    # replica lists given explicitly (CreateTopics / CreatePartitions assignments, reported as
    # given) or set by a reassignment, in place of the round-robin placement
    assigned: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    # reassignments in progress: the target replicas, and the replicas before it began
    reassigning: dict[tuple[str, int], tuple[list[int], list[int]]] = field(default_factory=dict)
    # the KRaft quorum's epoch: 1 at the first election, one more at each controller change
    quorum_epoch: int = 1

    def __post_init__(self) -> None:
        self.up = set(self.node_ids)
        if self.data_dir is not None:
            try:
                saved = json.loads((self.data_dir / STATE_FILE).read_text())
                self.replication = {str(k): int(v) for k, v in saved.get("replication", {}).items()}
                self.assigned = {(t, int(p)): [int(n) for n in r]
                                 for t, parts in saved.get("assigned", {}).items() for p, r in parts.items()}
                self.reassigning = {(t, int(p)): ([int(n) for n in target], [int(n) for n in original])
                                    for t, parts in saved.get("reassigning", {}).items()
                                    for p, (target, original) in parts.items()}
            except (OSError, ValueError, AttributeError, TypeError):
                self.replication, self.assigned, self.reassigning = {}, {}, {}

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
        self.assigned.update({(topic, p): list(ids) for p, ids in replicas.items()})
        self._save()

    def forget(self, topic: str) -> None:
        placed = any(tp[0] == topic for tp in (*self.assigned, *self.reassigning))
        self.assigned = {tp: r for tp, r in self.assigned.items() if tp[0] != topic}
        self.reassigning = {tp: r for tp, r in self.reassigning.items() if tp[0] != topic}
        if self.replication.pop(topic, None) is not None or placed:
            self._save()
        self.moved = {tp: n for tp, n in self.moved.items() if tp[0] != topic}
        self.known = {tp for tp in self.known if tp[0] != topic}
        self.epochs = {tp: e for tp, e in self.epochs.items() if tp[0] != topic}

    def replicas(self, topic: str, partition: int) -> list[int]:
        ongoing = self.reassigning.get((topic, partition))
        if ongoing is not None:
            # PartitionReassignmentReplicas: the target, then the replicas it removes
            target, original = ongoing
            return target + [n for n in original if n not in target]
        assigned = self.assigned.get((topic, partition))
        if assigned is not None:
            return list(assigned)
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
        before, controller = self._leaders(), self.controller()
        self.up.discard(node)
        self._quorum_changed(controller)
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
        before, controller = self._leaders(), self.controller()
        self.up.add(node)
        self._quorum_changed(controller)
        # the reassignments that waited for this node complete now (its replicas "caught up")
        for tp, (target, _original) in list(self.reassigning.items()):
            if set(target) <= self.up:
                self._complete(tp, target)
        lines = self._lines(self._bump_changed(before))
        log.info("cluster.broker_started", broker=node, leaders_moved=lines)
        return lines

    def _quorum_changed(self, before: int) -> None:
        if self.controller() != before:
            self.quorum_epoch += 1

    # -- reassignments (AlterPartitionReassignments) -------------------------------------
    def reassignment_error(self, topic: str, partition: int, target: list[int],
                           allow_factor_change: bool) -> tuple[str, str] | None:
        """Why ``target`` cannot be the partition's replicas: (error name, Kafka's message), as
        ReplicationControlManager.validateManualPartitionAssignment and
        validatePartitionReplicationFactorUnchanged word it; None when it can."""
        if not target:
            return ("invalid_replica_assignment",
                    "The manual partition assignment includes an empty replica list.")
        seen: set[int] = set()
        for n in target:
            if n not in self.node_ids:  # a stopped virtual broker is still registered (fenced)
                return ("invalid_replica_assignment",
                        f"The manual partition assignment includes broker {n}, "
                        "but no such broker is registered.")
            if n in seen:
                return ("invalid_replica_assignment",
                        f"The manual partition assignment includes the broker {n} more than once.")
            seen.add(n)
        if not allow_factor_change:
            ongoing = self.reassigning.get((topic, partition))
            # during a reassignment the factor is the target's (replicas + adding - removing)
            current = len(ongoing[0]) if ongoing is not None else len(self.replicas(topic, partition))
            if current != len(target):
                return ("invalid_replication_factor",
                        f"The replication factor is changed from {current} to {len(target)}")
        return None

    def reassign(self, topic: str, partition: int, target: list[int]) -> list[str]:
        """Move the partition's replicas to ``target`` (checked by :meth:`reassignment_error`):
        at once when every node of it is up, else once the last of them starts."""
        tp = (topic, partition)
        self.known.add(tp)
        original = self.reassigning.pop(tp, (None, self.replicas(topic, partition)))[1]
        if target == original or set(target) <= self.up:
            before = self._leaders()
            self._complete(tp, target)
            lines = self._lines(self._bump_changed(before))
        else:
            self.reassigning[tp] = (list(target), list(original))
            self._save()
            lines = []
        log.info("cluster.partition_reassigned", topic=topic, partition=partition, replicas=target,
                 from_replicas=original, done=tp not in self.reassigning, leaders_moved=lines)
        return lines

    def cancel_reassignment(self, topic: str, partition: int) -> bool:
        """Back to the replicas before the reassignment; False when none is in progress."""
        ongoing = self.reassigning.pop((topic, partition), None)
        if ongoing is None:
            return False
        self.assigned[(topic, partition)] = list(ongoing[1])
        self._save()
        log.info("cluster.reassignment_cancelled", topic=topic, partition=partition, replicas=ongoing[1])
        return True

    def ongoing(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """Reassignments in progress: (replicas, adding, removing), as ListPartitionReassignments."""
        return {tp: (self.replicas(*tp), [n for n in target if n not in original],
                     [n for n in original if n not in target])
                for tp, (target, original) in self.reassigning.items()}

    def _complete(self, tp: tuple[str, int], target: list[int]) -> None:
        """The partition's replicas become ``target``. The leader stays if it is one of them and
        up; otherwise the first of them up leads (PartitionChangeBuilder's election)."""
        leader = self.leader(*tp)
        self.reassigning.pop(tp, None)
        self.assigned[tp] = list(target)
        if leader is not None and leader in target and leader in self.up:
            self.moved[tp] = leader
        else:
            self.moved.pop(tp, None)
        self._save()

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
        assigned: dict[str, dict[str, list[int]]] = {}
        for (t, p), r in self.assigned.items():
            assigned.setdefault(t, {})[str(p)] = r
        reassigning: dict[str, dict[str, list[list[int]]]] = {}
        for (t, p), (target, original) in self.reassigning.items():
            reassigning.setdefault(t, {})[str(p)] = [target, original]
        tmp.write_text(json.dumps({"replication": self.replication, "assigned": assigned,
                                   "reassigning": reassigning}, sort_keys=True) + "\n")
        os.replace(tmp, path)

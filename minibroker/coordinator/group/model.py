"""What the group coordinator holds: groups, their members and committed offsets."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from minibroker_protocol.errors import ErrorCode

from ..timers import Deadline
from . import consumer_assignors as assignors
from .consumer_member import ConsumerMember
from .state import GroupState
from .streams_state import StreamsGroupState


class GroupError(Exception):
    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


@dataclass(eq=False)  # identity: the adapter keys a member's pending answers by it
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # Waiting for an answer to its JoinGroup / SyncGroup (the adapter holds the future).
    awaiting_join: bool = False
    awaiting_sync: bool = False
    expiry: Deadline | None = None
    is_new: bool = True

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


@dataclass
class Offset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    log_offset: int = -1  # where its record sits in __consumer_offsets


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending: dict[str, Deadline | None] = field(default_factory=dict)  # MEMBER_ID_REQUIRED ids
    offsets: dict[tuple[str, int], Offset] = field(default_factory=dict)
    # producer id -> offsets committed in its open transaction
    # (Kafka's pendingTransactionalOffsetCommits)
    txn_offsets: dict[int, dict[tuple[str, int], Offset]] = field(default_factory=dict)
    join_timer: Deadline | None = None
    initial_delay_until: float = 0.0  # the clock's monotonic time
    # A member joined a new group (generation 0) during its initial delay: the delay runs
    # once more (Kafka's GroupMetadata.newMemberAdded).
    new_member_added: bool = False
    # The group's last GroupMetadataValue in the log, as written: what a replay (and so
    # a coordinator snapshot) knows of its generation and members.
    persisted_value: bytes | None = None
    # A KIP-848 consumer group's membership (consumer_group.py); None for a classic group or
    # one that only stores offsets.
    consumer: ConsumerGroupState | None = None
    # A KIP-1071 streams group's membership and topology (streams_group.py), else None.
    streams: StreamsGroupState | None = None

    @property
    def group_type(self) -> str:
        if self.streams is not None:
            return "streams"
        return "consumer" if self.consumer is not None else "classic"

    def all_joined(self) -> bool:
        return not self.pending and all(m.awaiting_join for m in self.members.values())

    def has_pending_txn_offset(self, tp: tuple[str, int]) -> bool:
        return any(tp in offs for offs in self.txn_offsets.values())


@dataclass
class ConsumerGroupState:
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, assignors.Assignment] = field(default_factory=dict)
    # (topic id, partition) -> epoch of the member holding it (assigned or pending revocation)
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    # topic name -> partitions (-1: no such topic) of what the members subscribe, at the last check
    subscription_metadata: dict[str, int] | None = None
    topics_fingerprint: int | None = None
    last_assignment_ms: int | None = None
    regex_topics: dict[str, frozenset[str]] = field(default_factory=dict)
    regex_pending: set[str] = field(default_factory=set)
    session: dict[str, Deadline] = field(default_factory=dict)
    rebalance: dict[str, Deadline] = field(default_factory=dict)

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (Kafka's ConsumerGroup.preferredServerAssignor)."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        return max(sorted(counts), key=lambda a: counts[a])

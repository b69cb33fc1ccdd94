"""What a streams group holds (its members, topology, target assignment), apart from the
heartbeat's logic in :mod:`.streams_group` so that :mod:`.model` can name it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..timers import Deadline
from . import streams_assignor as sa
from . import streams_topology as st

__all__ = ["StreamsGroupState", "StreamsMember"]


@dataclass(frozen=True)
class StreamsMember:
    member_id: str
    member_epoch: int = 0
    previous_epoch: int = -1
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    topology_epoch: int = -1
    rebalance_timeout_ms: int = -1
    active: Mapping[str, frozenset[int]] = field(default_factory=dict)
    standby: Mapping[str, frozenset[int]] = field(default_factory=dict)
    warmup: Mapping[str, frozenset[int]] = field(default_factory=dict)
    revoking: Mapping[str, frozenset[int]] = field(default_factory=dict)  # active, being let go
    task_offsets: tuple[tuple[str, int, int], ...] = ()
    task_end_offsets: tuple[tuple[str, int, int], ...] = ()

    @property
    def state(self) -> str:
        if any(self.revoking.values()):
            return "UNREVOKED_TASKS"
        return "STABLE"


@dataclass
class StreamsGroupState:
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: st.Topology | None = None
    configured: st.Configured | None = None
    members: dict[str, StreamsMember] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, sa.TaskAssignment] = field(default_factory=dict)
    created_ms: int = 0
    topics_fingerprint: int | None = None
    endpoint_epoch: int = 0
    shutdown_requested_by: str | None = None
    last_assignment_ms: int | None = None  # when a target with tasks was last computed
    delay_bumped: bool = False  # the initial delay's own epoch bump is done
    session: dict[str, Deadline] = field(default_factory=dict)
    rebalance: dict[str, Deadline] = field(default_factory=dict)

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.configured is None or not self.configured.ready:
            return "NotReady"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not self.reconciled(m) for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def reconciled(self, m: StreamsMember) -> bool:
        """At the assignment epoch, nothing left to revoke and nothing still to get from
        another member (Kafka's UNRELEASED_TASKS counts as reconciling, seen on the reference)."""
        if m.member_epoch != self.assignment_epoch or m.state != "STABLE":
            return False
        target = self.target.get(m.member_id)
        wanted = sa.to_tasks(target.active) if target is not None else frozenset()
        return sa.to_tasks(m.active) == wanted

    def active_holder(self, task: sa.Task, but: str) -> str | None:
        """Another member that holds the active task, or is still revoking it."""
        s, p = task
        for m in self.members.values():
            if m.member_id != but and (p in m.active.get(s, ()) or p in m.revoking.get(s, ())):
                return m.member_id
        return None

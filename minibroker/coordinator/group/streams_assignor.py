"""The streams groups' server-side task assignor: sticky and balanced, after Kafka's
``streams.assignor.StickyTaskAssignor`` (the broker's default ``sticky`` assignor).

A task is (subtopology id, partition). Members of the same Kafka Streams process (one per stream
thread) share a process id; a process's capacity is its number of members. Active tasks:

1. each task stays with the member that held it in the previous target, while that member is
   below its fair share (tasks / members, rounded up), overall and of the task's subtopology;
2. the rest go, in task order, to the member holding the fewest tasks of that subtopology, then
   the fewest in all (ties: the member whose process holds the fewest tasks, then the member
   id), so subtopologies, threads and processes stay balanced.

Standby tasks (``streams.num.standby.replicas``): each task with state gets that many standbys on
*other* processes than its active one (a standby on the same process protects nothing), kept
where they were when possible, else on the least loaded process. No warm-up tasks: Kafka's
sticky assignor makes none either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

Task = tuple[str, int]
Tasks = Mapping[str, frozenset[int]]  # subtopology id -> partitions


@dataclass(frozen=True)
class MemberSpec:
    member_id: str
    process_id: str
    previous_active: frozenset[Task] = frozenset()
    previous_standby: frozenset[Task] = frozenset()


@dataclass
class TaskAssignment:
    active: dict[str, frozenset[int]] = field(default_factory=dict)
    standby: dict[str, frozenset[int]] = field(default_factory=dict)
    warmup: dict[str, frozenset[int]] = field(default_factory=dict)


def to_tasks(t: Tasks) -> frozenset[Task]:
    return frozenset((s, p) for s, ps in t.items() for p in ps)


def from_tasks(tasks: set[Task] | frozenset[Task]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}


def assign(members: list[MemberSpec], tasks_per_subtopology: Mapping[str, int],
           num_standby: int = 0, stateful: frozenset[str] | None = None) -> dict[str, TaskAssignment]:
    """``stateful``: the subtopologies with state (changelog topics); only their tasks get
    standbys (seen on Kafka 4.4: a stateless task has nothing to keep warm). None: all."""
    if not members:
        return {}
    members = sorted(members, key=lambda m: m.member_id)
    all_tasks = sorted((s, p) for s, n in tasks_per_subtopology.items() for p in range(n))
    active: dict[str, set[Task]] = {m.member_id: set() for m in members}
    process_of = {m.member_id: m.process_id for m in members}
    process_load: dict[str, int] = {m.process_id: 0 for m in members}
    quota = math.ceil(len(all_tasks) / len(members)) if all_tasks else 0
    # each subtopology's tasks spread too (seen on Kafka 4.4: two members of a two-subtopology
    # group hold one task of each, not both tasks of one)
    sub_quota = {s: math.ceil(n / len(members)) for s, n in tasks_per_subtopology.items()}
    owner: dict[Task, str] = {}
    valid = set(all_tasks)

    def in_sub(mid: str, s: str) -> int:
        return sum(1 for t in active[mid] if t[0] == s)

    for m in members:
        for t in sorted(m.previous_active):
            if (t in valid and t not in owner and len(active[m.member_id]) < quota
                    and in_sub(m.member_id, t[0]) < sub_quota[t[0]]):
                owner[t] = m.member_id
                active[m.member_id].add(t)
                process_load[m.process_id] += 1
    for t in all_tasks:
        if t in owner:
            continue
        mid = min(active, key=lambda k: (in_sub(k, t[0]), len(active[k]),
                                         process_load[process_of[k]], k))
        owner[t] = mid
        active[mid].add(t)
        process_load[process_of[mid]] += 1
    standby: dict[str, set[Task]] = {m.member_id: set() for m in members}
    processes = sorted(set(process_of.values()))
    if num_standby > 0 and len(processes) > 1:
        load = {m.member_id: len(active[m.member_id]) for m in members}
        by_process: dict[str, list[str]] = {}
        for m in members:
            by_process.setdefault(m.process_id, []).append(m.member_id)
        previous = {m.member_id: m.previous_standby for m in members}
        for t in all_tasks:
            if stateful is not None and t[0] not in stateful:
                continue
            used = {process_of[owner[t]]}
            for _ in range(num_standby):
                candidates = [mid for mid in active if process_of[mid] not in used]
                if not candidates:
                    break
                sticky = [mid for mid in candidates if t in previous[mid]]
                pick = min(sticky or candidates, key=lambda k: (load[k], k))
                standby[pick].add(t)
                load[pick] += 1
                used.add(process_of[pick])
    return {m.member_id: TaskAssignment(active=from_tasks(active[m.member_id]),
                                        standby=from_tasks(standby[m.member_id]))
            for m in members}

"""A share partition's records told as stories, each ending with a one-line diagnosis: why was
record 42 delivered three times, and why is it archived?

:func:`explain` is pure: the events :class:`~.history.ShareHistory` kept (or the
:class:`~.partition.HistoryEvent` list a partition returned), optionally the partition's live
in-flight view and the broker's start times, in; text and the same as data (``--json``) out.
Each event covers a range of offsets; the offsets are cut where any event's range begins or
ends, and neighbouring offsets whose histories read the same are told once ("offsets 40-49").

The diagnosis names what ended each delivery but the last — the redelivery's cause: the lock
expired (``share.record.lock.duration.ms`` passed without an acknowledgement), the consumer
RELEASEd it, its member left or closed its share session, or the broker restarted (an
acquisition is never persisted, in Kafka neither: after a restart the record is available again
with the delivery count it had before that acquisition; the history shows it as an acquisition
with no give-back before the next one). Then what became of it: accepted, rejected, archived at
the delivery limit (``share.delivery.count.limit``), archived for another reason (an aborted
transaction, the log start offset moving past it, a gap), still held, or waiting.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..story_time import clock_time, seconds
from .partition import Action, HistoryEvent
from .record_state import RecordState

InFlightRow = tuple[int, int, RecordState, int, str, int | None]

# What ended a delivery and let the record be delivered again, as the diagnosis says it.
_GIVE_BACK = {Action.LOCK_EXPIRED, Action.RELEASED, Action.MEMBER_RELEASED, Action.LEADER_MOVED}
RESTART = "broker_restart"

# Text shown per cause in the diagnosis's tally.
CAUSES = {
    Action.LOCK_EXPIRED: "lock expiry",
    Action.RELEASED: "release",
    Action.MEMBER_RELEASED: "member gone",
    Action.LEADER_MOVED: "leader moved",
    RESTART: "broker restart",
}


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _offsets(first: int, last: int) -> str:
    return f"offset {first}" if first == last else f"offsets {first}-{last}"


def as_dict(e: HistoryEvent | dict[str, Any], limit: int | None = None) -> dict[str, Any]:
    if isinstance(e, dict):
        return e
    out: dict[str, Any] = {"ts": e.at_ms, "first": e.first_offset, "last": e.last_offset,
                           "action": e.action, "member": e.member, "state": e.state.name,
                           "count": e.delivery_count}
    if e.lock_deadline_ms is not None:
        out["lock_ms"] = e.lock_deadline_ms
    if e.dlq_topic is not None:
        out["dlq"] = e.dlq_topic
    if limit is not None:
        out["limit"] = limit
    return out


@dataclass
class RecordStory:
    first_offset: int
    last_offset: int
    story: list[str] = field(default_factory=list)
    diagnosis: str = ""
    deliveries: int = 0
    redeliveries: dict[str, int] = field(default_factory=dict)  # cause -> how many
    state: str | None = None  # now (live view) or after the last kept event
    delivery_count: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"first_offset": self.first_offset, "last_offset": self.last_offset, "story": self.story,
                "diagnosis": self.diagnosis, "deliveries": self.deliveries,
                "redeliveries": self.redeliveries, "state": self.state,
                "delivery_count": self.delivery_count}

    def text(self) -> list[str]:
        return [f"{_offsets(self.first_offset, self.last_offset)}:", *(f"  {line}" for line in self.story),
                f"  Diagnosis: {self.diagnosis}"]


@dataclass
class ShareExplanation:
    group: str
    topic: str
    partition: int
    records: list[RecordStory] = field(default_factory=list)
    in_flight: list[dict[str, Any]] = field(default_factory=list)
    start_offset: int | None = None
    delivery_limit: int | None = None
    offset: int | None = None
    events: int = 0  # how many kept events the stories come from
    # False when nothing is known of the partition (or the offset): no history, no live state;
    # `share explain` then exits 1 instead of telling an empty story.
    known: bool = True
    summary: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.group, "topic": self.topic, "partition": self.partition,
                "offset": self.offset, "known": self.known, "start_offset": self.start_offset,
                "delivery_limit": self.delivery_limit, "events": self.events, "summary": self.summary,
                "in_flight": self.in_flight, "records": [r.as_dict() for r in self.records]}

    def text(self) -> str:
        lines = [f"Share group `{self.group}`, partition {self.topic}-{self.partition}"
                 + (f", offset {self.offset}" if self.offset is not None else "")]
        if self.in_flight:
            lines.append(f"  In flight from start offset {self.start_offset}:")
            for r in self.in_flight:
                held = (f", held by {r['member']} until {clock_time(r['lock_deadline_ms'])}"
                        if r["member"] else "")
                lines.append(f"    {_offsets(r['first_offset'], r['last_offset'])}: {r['state']}, "
                             f"delivery count {r['delivery_count']}{held}")
        for rec in self.records:
            lines += [f"  {line}" for line in rec.text()]
        lines.append(f"Summary: {self.summary}")
        return "\n".join(lines)


def in_flight_rows(rows: Iterable[InFlightRow]) -> list[dict[str, Any]]:
    return [{"first_offset": f, "last_offset": la, "state": st.name, "delivery_count": n,
             "member": m or None, "lock_deadline_ms": d} for f, la, st, n, m, d in rows]


def explain(group: str, topic: str, partition: int,
            events: Sequence[HistoryEvent | dict[str, Any]], *,
            in_flight: Sequence[InFlightRow] | None = None, start_offset: int | None = None,
            delivery_limit: int | None = None, broker_starts: Sequence[int] = (),
            offset: int | None = None) -> ShareExplanation:
    """``in_flight``: the live partition's :meth:`~.partition.SharePartition.in_flight` rows
    (with its ``start_offset`` and delivery limit); a data directory has none. ``offset``:
    only that record's story."""
    evs = [as_dict(e) for e in events]
    evs = [e for e in evs if isinstance(e.get("first"), int) and isinstance(e.get("last"), int)]
    rows = list(in_flight or ())
    if offset is not None:
        evs = [{**e, "first": offset, "last": offset} for e in evs if e["first"] <= offset <= e["last"]]
        rows = [(offset, offset, *r[2:]) for r in rows if r[0] <= offset <= r[1]]
    if delivery_limit is None:
        delivery_limit = next((e["limit"] for e in reversed(evs) if isinstance(e.get("limit"), int)), None)
    x = ShareExplanation(group, topic, partition, in_flight=in_flight_rows(rows), start_offset=start_offset,
                         delivery_limit=delivery_limit, offset=offset, events=len(evs),
                         known=bool(evs or rows or (offset is None and in_flight is not None)))
    x.records = _stories(evs, rows, delivery_limit, sorted(broker_starts))
    x.summary = _summary(x, offset)
    return x


def _segments(evs: list[dict[str, Any]], rows: list[InFlightRow]
              ) -> list[tuple[int, int, list[dict[str, Any]], InFlightRow | None]]:
    """Offsets cut where any event's or live row's range begins or ends: (first, last, the
    events covering it in order, its live row)."""
    cuts = sorted({e["first"] for e in evs} | {e["last"] + 1 for e in evs}
                  | {r[0] for r in rows} | {r[1] + 1 for r in rows})
    if not cuts:
        return []
    covering: list[list[dict[str, Any]]] = [[] for _ in cuts]
    live: list[InFlightRow | None] = [None] * len(cuts)
    for e in evs:
        for i in range(bisect.bisect_left(cuts, e["first"]), bisect.bisect_left(cuts, e["last"] + 1)):
            covering[i].append(e)
    for r in rows:
        for i in range(bisect.bisect_left(cuts, r[0]), bisect.bisect_left(cuts, r[1] + 1)):
            live[i] = r
    out = []
    for i in range(len(cuts) - 1):
        if covering[i] or live[i] is not None:
            out.append((cuts[i], cuts[i + 1] - 1, covering[i], live[i]))
    return out


def _stories(evs: list[dict[str, Any]], rows: list[InFlightRow], limit: int | None,
             starts: list[int]) -> list[RecordStory]:
    out: list[RecordStory] = []
    prev_key: Any = None
    for first, last, covering, row in _segments(evs, rows):
        # what the story depends on, offsets aside: neighbours with the same are told once
        key = (tuple(tuple(sorted((k, v) for k, v in e.items() if k not in ("first", "last")))
                     for e in covering), row[2:] if row is not None else None)
        if out and key == prev_key and out[-1].last_offset + 1 == first:
            out[-1].last_offset = last
            continue
        rec = _story(first, last, covering, row, limit, starts)
        out.append(rec)
        prev_key = key
    return out


def _member(m: str | None) -> str:
    return f"member {m}" if m else "no member"


def _restart_between(starts: list[int], after: int, upto: int) -> int | None:
    i = bisect.bisect_right(starts, upto) - 1
    return starts[i] if i >= 0 and starts[i] >= after else None


def _of(count: int, limit: int | None) -> str:
    return f"delivery {count} of {limit}" if limit is not None else f"delivery {count}"


def _archived_why(e: dict[str, Any], limit: int | None) -> str:
    count = e.get("count", 0)
    if limit is None:
        return "archived (the delivery limit was reached, or the start offset had moved past it)"
    if count >= limit:
        return f"archived: delivery limit {limit} reached"
    return "archived: the share partition's start offset had moved past it"


def _line(e: dict[str, Any], limit: int | None) -> str:
    line = _plain_line(e, limit)
    if e.get("dlq"):
        line += f", written to the dead-letter queue {e['dlq']}"
    return line


def _plain_line(e: dict[str, Any], limit: int | None) -> str:
    at, action, who = clock_time(e.get("ts")), e.get("action"), _member(e.get("member"))
    count, lock, state = e.get("count", 0), e.get("lock_ms"), e.get("state")
    back = "available" if state == "AVAILABLE" else _archived_why(e, limit) if state == "ARCHIVED" else state
    if action == Action.ACQUIRED:
        held = ""
        if lock is not None:
            held = f", lock until {clock_time(lock)} ({seconds(lock - e.get('ts', 0))})"
        return f"{at}  acquired by {who} — {_of(count, limit)}{held}"
    if action == Action.RENEWED:
        return f"{at}  lock renewed by {who} until {clock_time(lock)}"
    if action == Action.ACCEPTED:
        return f"{at}  ACCEPTED by {who}"
    if action == Action.RELEASED:
        return f"{at}  RELEASED by {who} → {back}"
    if action == Action.REJECTED:
        return f"{at}  REJECTED by {who} → archived, never delivered again"
    if action == Action.GAP:
        return f"{at}  acknowledged by {who} as a gap (no record there) → archived"
    if action == Action.LOCK_EXPIRED:
        deadline = f" (deadline {clock_time(lock)})" if lock is not None else ""
        return f"{at}  lock of {who} expired{deadline}, no acknowledgement came → {back}"
    if action == Action.MEMBER_RELEASED:
        return f"{at}  {who} left the group or closed its share session while holding it → {back}"
    if action == Action.LEADER_MOVED:
        return (f"{at}  the partition's leader moved while {who} held it: the new leader loaded the "
                f"persisted state (acquisitions are not persisted) → available, delivery count {count}")
    if action == Action.ABORTED_TXN:
        return f"{at}  archived: the record belongs to an aborted transaction (read_committed group)"
    if action == Action.LOG_START_MOVED:
        return f"{at}  archived: the log start offset moved past it (retention or DeleteRecords)"
    if action == Action.NOT_IN_LOG:
        return f"{at}  archived: the log no longer holds it"
    return f"{at}  {action} ({who}) → {state}"


def _story(first: int, last: int, covering: list[dict[str, Any]], row: InFlightRow | None,
           limit: int | None, starts: list[int]) -> RecordStory:
    rec = RecordStory(first, last)
    causes: list[tuple[str, dict[str, Any], int | None]] = []  # (cause, event, restart time)
    pending: tuple[str, dict[str, Any], int | None] | None = None  # what ended the last delivery
    prev: dict[str, Any] | None = None
    for e in covering:
        if e.get("action") == Action.ACQUIRED:
            if prev is None and e.get("count", 0) > 1:
                rec.story.append(f"(deliveries before the {_nth(e.get('count', 0))} are older than the kept "
                                 "history)")
            if prev is not None and prev.get("state") == "ACQUIRED":
                # a delivery nobody ended: the broker forgot the acquisition when it restarted
                t = _restart_between(starts, prev.get("ts", 0), e.get("ts", 0))
                if t is not None:
                    back = e.get("count", 1) - 1
                    rec.story.append(f"{clock_time(t)}  broker restarted: acquisitions are not persisted, so "
                                     f"the record was available again with delivery count {back}")
                else:
                    # no start recorded in between: a restart is the likely cause, not a known one
                    rec.story.append("no kept event ended that delivery: the broker restarted (acquisitions "
                                     "are not persisted) or the history lost the event")
                pending = (RESTART, prev, t)
            if pending is not None:
                causes.append(pending)
                pending = None
            rec.deliveries += 1
        elif e.get("action") in _GIVE_BACK and e.get("state") == "AVAILABLE":
            pending = (str(e.get("action")), e, None)
        rec.story.append(_line(e, limit))
        prev = e
    now_line, now_state, now_count = _now(prev, row, starts, limit)
    if now_line:
        rec.story.append(now_line)
        if prev is not None and prev.get("state") == "ACQUIRED" and now_state == "AVAILABLE":
            pending = (RESTART, prev, _restart_between(starts, prev.get("ts", 0), 2**63))
    rec.state, rec.delivery_count = now_state, now_count
    for cause, _e, _t in causes:
        rec.redeliveries[cause] = rec.redeliveries.get(cause, 0) + 1
    rec.diagnosis = _diagnose(rec, prev, row, causes, pending, limit)
    return rec


def _nth(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def _now(last: dict[str, Any] | None, row: InFlightRow | None, starts: list[int],
         limit: int | None) -> tuple[str | None, str | None, int | None]:
    """The live state when it says more than the last kept event; without one (a data dir), a
    broker start after an acquisition nobody ended gave the record back."""
    if row is None:
        if last is None:
            return None, None, None
        restart = _restart_between(starts, last.get("ts", 0), 2**63)
        if last.get("state") == "ACQUIRED" and restart is not None and restart > last.get("ts", 0):
            back = last.get("count", 1) - 1
            return (f"{clock_time(restart)}  broker restarted: acquisitions are not persisted, so the record "
                    f"is available again with delivery count {back}"), "AVAILABLE", back
        return None, last.get("state"), last.get("count")
    _f, _l, st, count, member, deadline = row
    if (last is not None and last.get("state") == st.name and last.get("count") == count
            and (st is not RecordState.ACQUIRED or last.get("member") == member)):
        return None, st.name, count
    if last is None:
        what = "no history kept for it"
    elif last.get("state") == "ACQUIRED" and st is RecordState.AVAILABLE:
        what = "the broker restarted since its last acquisition (not persisted)"
    else:
        what = "its later events are not in the kept history"
    held = f" by {_member(member)}, lock until {clock_time(deadline)}" if member else ""
    return f"now: {st.name}{held}, {_of(count, limit)} — {what}", st.name, count


def _cause_text(cause: str, e: dict[str, Any], restart_at: int | None) -> str:
    at = clock_time(e.get("ts"))
    if cause == Action.LOCK_EXPIRED:
        return f"the lock of {_member(e.get('member'))} expired at {at}"
    if cause == Action.RELEASED:
        return f"{_member(e.get('member'))} RELEASED it at {at}"
    if cause == Action.MEMBER_RELEASED:
        return f"{_member(e.get('member'))} left or closed its session at {at}"
    if cause == Action.LEADER_MOVED:
        return f"the partition's leader moved at {at} while {_member(e.get('member'))} held it"
    if restart_at is None:
        return f"the delivery to {_member(e.get('member'))} ended with no kept event (a broker restart?)"
    return f"the broker restarted at {clock_time(restart_at)} while {_member(e.get('member'))} held it"


def _diagnose(rec: RecordStory, last: dict[str, Any] | None, row: InFlightRow | None,
              causes: list[tuple[str, dict[str, Any], int | None]],
              pending: tuple[str, dict[str, Any], int | None] | None, limit: int | None) -> str:
    if last is None and row is None:
        return "No history kept for this record."
    n = rec.deliveries
    redelivered = ""
    if causes:
        redelivered = (f"redelivered {_times(len(causes))} because "
                       + "; then ".join(_cause_text(c, e, t) for c, e, t in causes))
    delivered = f"delivered {_times(n)}" if n else "no delivery in the kept history"
    history = redelivered or delivered
    state, count = rec.state, rec.delivery_count
    action = last.get("action") if last is not None else None
    who = _member(last.get("member")) if last is not None else ""
    if state == "ACKNOWLEDGED":
        return f"Accepted by {who} on {_of(count or n, limit)}; {history}."
    if state == "ARCHIVED":
        if action == Action.REJECTED:
            return f"Rejected by {who} on {_of(count or n, limit)}: archived, not redelivered; {history}."
        if action in _GIVE_BACK:
            why = _archived_why(last or {}, limit)
            ended = _cause_text(str(action), last or {}, None)
            return f"{why[0].upper()}{why[1:]} — the last delivery ended because {ended}; {history}."
        reasons = {Action.ABORTED_TXN: "it belongs to an aborted transaction",
                   Action.LOG_START_MOVED: "the log start offset moved past it",
                   Action.NOT_IN_LOG: "the log no longer holds it",
                   Action.GAP: f"{who} acknowledged it as a gap"}
        return f"Archived: {reasons.get(str(action), 'see the story')}; {history}."
    if state == "ACQUIRED":
        if row is not None and row[4]:
            return (f"Held by {_member(row[4])} ({_of(row[3], limit)}), lock until "
                    f"{clock_time(row[5])}; {history}.")
        return f"Acquired by {who} ({_of(count or n, limit)}) when the history ends; {history}."
    if state == "AVAILABLE":
        if pending is not None:
            return (f"Available again because {_cause_text(*pending)} (after {_of(count or 0, limit)}); "
                    f"{history}.")
        return f"Available, not yet delivered again; {history}."
    return f"{state}; {history}."


def _summary(x: ShareExplanation, offset: int | None) -> str:
    if not x.known:
        what = f"offset {offset}" if offset is not None else "this partition"
        return f"No history and no live state for {what} (never delivered here, or expired from the history)."
    recs = x.records
    count = sum(r.last_offset - r.first_offset + 1 for r in recs)
    redelivered = sum(r.last_offset - r.first_offset + 1 for r in recs if r.redeliveries)
    tally: dict[str, int] = {}
    for r in recs:
        for cause, k in r.redeliveries.items():
            tally[cause] = tally.get(cause, 0) + k * (r.last_offset - r.first_offset + 1)
    why = ", ".join(f"{CAUSES.get(c, c)} {k}" for c, k in sorted(tally.items(), key=lambda i: -i[1]))
    at_limit = sum(r.last_offset - r.first_offset + 1 for r in recs
                   if r.diagnosis.startswith("Archived: delivery limit"))
    s = f"{count} record{'s' if count != 1 else ''} told from {x.events} event{'s' if x.events != 1 else ''}"
    s += f"; {redelivered} redelivered" + (f" ({why})" if why else "")
    if at_limit:
        s += f"; {at_limit} archived at the delivery limit"
    return s + "."

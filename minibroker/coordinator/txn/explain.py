"""A transactional id's timeline told as a story, ending with a one-line diagnosis.

:func:`explain` is pure: the events the coordinator recorded (``timeline.py``) in, lines of
text and a diagnosis out, plus the same as data (``--json``). The diagnosis answers the question
people ask — "why was I fenced?" — from what happened last: a refusal is explained by the event
that moved the epoch past the refused one (a new instance, named by its client id and address;
or the coordinator's abort after ``transaction.timeout.ms``, with how late it came), an abort by
timeout by its deadline, an open transaction by its age against its timeout and the partitions
whose last stable offset it holds back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..story_time import clock_time, seconds

FENCING_ERRORS = {"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "INVALID_PRODUCER_ID_MAPPING"}


def _who(e: dict[str, Any], prefix: str = "") -> str:
    client = e.get(prefix + "client_id")
    address = e.get(prefix + "address")
    software = e.get(prefix + "software")
    parts = [f"client `{client}`" if client else "a client without client id"]
    if address:
        parts.append(address.rsplit(":", 1)[0] if address.count(":") == 1 else address)
    if software:
        parts.append(software)
    return ", ".join(parts)


def _tp(tp: Any) -> str:
    return f"{tp[0]}-{tp[1]}" if isinstance(tp, (list, tuple)) and len(tp) == 2 else str(tp)


@dataclass
class Explanation:
    transactional_id: str
    story: list[str] = field(default_factory=list)
    diagnosis: str = ""
    held: list[dict[str, Any]] = field(default_factory=list)  # per partition: how long the LSO waited
    events: list[dict[str, Any]] = field(default_factory=list)
    title: str | None = None  # the heading of the text ("Producer id 7" for an idempotent producer)
    # False when nothing at all is known of the id: no history here, and (the caller adds) no
    # coordinator state either — `txn explain` then exits 1 instead of telling an empty story.
    known: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"transactional_id": self.transactional_id, "known": self.known, "events": self.events,
                "story": self.story, "diagnosis": self.diagnosis, "lso_held": self.held}

    def text(self) -> str:
        lines = [self.title or f"Transactional id {self.transactional_id}"]
        lines += [f"  {line}" for line in self.story]
        lines.append(f"Diagnosis: {self.diagnosis}")
        return "\n".join(lines)


def _line(e: dict[str, Any], held: dict[str, Any] | None = None) -> str | None:
    """One event as a line of the story; ``held``: a marker's hold on its partition's LSO."""
    kind, at = e.get("kind"), clock_time(e.get("ts"))
    pid_epoch = f"producer {e.get('producer_id')} epoch {e.get('epoch')}"
    if kind == "init":
        before = ""
        if e.get("previous_epoch") is not None and e.get("previous_epoch", -1) >= 0:
            before = f" (was {e.get('previous_producer_id')}/{e.get('previous_epoch')})"
        return f"{at}  InitProducerId from {_who(e)}: {pid_epoch}{before} — {e.get('reason')}"
    if kind in ("add_partitions", "add_offsets"):
        parts = ", ".join(_tp(tp) for tp in e.get("partitions", ()))
        begins = f"transaction begins (timeout {seconds(e.get('timeout_ms'))}); " if e.get("begins") else ""
        how = "with its first record (transactions v2)" if e.get("implicit") else "by " + _who(e)
        if kind == "add_offsets":
            return f"{at}  {begins}offsets of group `{e.get('group')}` join ({parts}) {how}"
        joins = "joins" if len(e.get("partitions", ())) == 1 else "join"
        return f"{at}  {begins}{parts} {joins} the transaction {how}"
    if kind == "end_txn":
        what = "commit" if e.get("commit") else "abort"
        extra = " — a retry of one already done, answered success" if e.get("retry") else ""
        extra += " (nothing to abort)" if e.get("empty") else ""
        return f"{at}  EndTxn({what}) from {_who(e)}, {pid_epoch}{extra}"
    if kind == "prepare":
        return (f"{at}  Prepare{'Commit' if e.get('commit') else 'Abort'} logged ({pid_epoch}; "
                f"{e.get('reason')})")
    if kind == "epoch_fence":
        return f"{at}  epoch fenced: {e.get('old_epoch')} → {e.get('new_epoch')} ({e.get('reason')})"
    if kind == "marker":
        what = "COMMIT" if e.get("commit") else "ABORT"
        tp = (e.get("topic"), e.get("partition"))
        how = ""
        if held is not None:
            how = f"; LSO held from offset {held['first_offset']} for {seconds(held['held_ms'])}"
        elif e.get("first_offset") is None:
            how = "; no records there"
        return f"{at}  {what} marker in {_tp(tp)} at offset {e.get('offset')}{how}"
    if kind == "complete":
        what = "Committed" if e.get("commit") else "Aborted"
        took = f" after {seconds(e.get('duration_ms'))}" if e.get("duration_ms", -1) >= 0 else ""
        errs = f"; marker errors {e.get('marker_errors')}" if e.get("marker_errors") else ""
        n = e.get("partitions")
        return (f"{at}  {what}{took} ({n} partition{'' if n == 1 else 's'}; {e.get('reason')}); "
                f"the producer goes on as {e.get('next_producer_id')}/{e.get('next_epoch')}{errs}")
    if kind == "fenced":
        return (f"{at}  FENCED: a new instance ({_who(e, 'by_')}) called InitProducerId while "
                f"{pid_epoch} had a transaction open since {clock_time(e.get('start_ms'))}; "
                "the coordinator aborts it")
    if kind == "timeout_abort":
        return (f"{at}  TIMED OUT: the transaction began at {clock_time(e.get('start_ms'))}, "
                f"timeout {seconds(e.get('timeout_ms'))}, deadline {clock_time(e.get('deadline_ms'))}; "
                f"no EndTxn came — the coordinator aborts it {seconds(e.get('late_ms'))} past the "
                "deadline and bumps the epoch")
    if kind == "refused":
        where = f" ({e.get('topic')}-{e.get('partition')})" if e.get("topic") is not None else ""
        current = (f"; current is {e.get('current_producer_id')}/{e.get('current_epoch')}"
                   if e.get("current_epoch") is not None else "")
        by = f" from {_who(e)}" if e.get("client_id") or e.get("address") else ""
        return f"{at}  REFUSED {e.get('api')}{where}{by}: {e.get('error')} for {pid_epoch}{current}"
    if kind == "roll_forward":
        return f"{at}  broker restarted with the transaction in {e.get('state')}: finishing it"
    if kind == "expired":
        return f"{at}  transactional id expired after {seconds(e.get('idle_ms'))} idle"
    if kind == "duplicate":
        return (f"{at}  duplicate batch in {e.get('topic')}-{e.get('partition')} (sequence "
                f"{e.get('first_sequence')}, epoch {e.get('epoch')}): a retry, answered with its offset "
                f"{e.get('offset')} and not written again")
    if kind == "broker_stopped":
        return f"{at}  BROKER STOPPED"
    if kind == "broker_started":
        down = f" after {seconds(e['down_ms'])} down" if e.get("down_ms") is not None else ""
        crash = " (the run before ended without a stop: killed or crashed)" if e.get("after_crash") else ""
        return f"{at}  BROKER STARTED{down}{crash}"
    return None


def _outages(broker_events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The broker's stops and starts as story events, each start with how long it was down."""
    out: list[dict[str, Any]] = []
    down_since = None
    for e in broker_events:
        if e.get("kind") == "stopped":
            down_since = e.get("ts")
            out.append({"ts": e.get("ts"), "kind": "broker_stopped"})
        elif e.get("kind") == "started":
            since = down_since if down_since is not None else e.get("last_activity_ms")
            out.append({"ts": e.get("ts"), "kind": "broker_started", "after_crash": e.get("after_crash"),
                        "down_since_ms": since,
                        "down_ms": e.get("ts", 0) - since if since is not None else None})
            down_since = None
    return out


def _merge(events: list[dict[str, Any]], broker_events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The id's events with the broker's outages that fall inside its span."""
    if not events or not broker_events:
        return list(events)
    first, last = events[0].get("ts", 0), events[-1].get("ts", 0)
    # strictly after the first event: the start the id's first request came after is no news
    inside = [e for e in _outages(broker_events) if first < e.get("ts", 0) <= last]
    return sorted([*events, *inside], key=lambda e: e.get("ts", 0))


def _epoch_mover(events: list[dict[str, Any]], before: int, epoch: int | None) -> dict[str, Any] | None:
    """The latest event before index ``before`` that moved the epoch beyond ``epoch``: a
    timeout abort, a fence by a new instance, or a new instance's InitProducerId (told by the
    fence that came with it, when the new instance found a transaction open)."""
    for j in range(before - 1, -1, -1):
        e = events[j]
        kind = e.get("kind")
        if kind in ("timeout_abort", "fenced"):
            return e
        if kind == "init" and (epoch is None or e.get("epoch", -1) > epoch
                               or e.get("producer_id") != e.get("previous_producer_id")):
            for k in range(j - 1, -1, -1):
                if events[k].get("kind") == "fenced":
                    return events[k]
                if events[k].get("kind") not in ("epoch_fence", "prepare", "marker", "complete"):
                    break
            return e
    return None


def _outage_during(events: list[dict[str, Any]], timeout: dict[str, Any]) -> str:
    """", while the broker was down 3.0 s (12:00:01 to 12:00:04)" when an outage overlapped the
    transaction that timed out — the seeds' incident — else ""."""
    for e in events:
        overlaps = (e.get("down_since_ms") is not None and e["down_since_ms"] <= timeout.get("ts", 0)
                    and e.get("ts", 0) >= timeout.get("start_ms", 0))
        if e.get("kind") == "broker_started" and overlaps:
            return (f"; the broker was down {seconds(e.get('down_ms'))} of it "
                    f"({clock_time(e['down_since_ms'])} to {clock_time(e.get('ts'))})")
    return ""


def _cause(e: dict[str, Any], events: list[dict[str, Any]] | None = None) -> str:
    kind = e.get("kind")
    if kind == "timeout_abort":
        age = (e.get("ts", 0) - e.get("start_ms", 0))
        return (f"the coordinator aborted its transaction at {clock_time(e.get('ts'))}: no EndTxn "
                f"{seconds(age)} after the transaction began, timeout {seconds(e.get('timeout_ms'))}"
                + _outage_during(events or [], e))
    if kind == "fenced":
        return (f"a new instance ({_who(e, 'by_')}) started at {clock_time(e.get('ts'))} while this one "
                "was in a transaction")
    return f"a new instance ({_who(e)}) started at {clock_time(e.get('ts'))}"


def explain(transactional_id: str, events: list[dict[str, Any]], now_ms: int | None = None,
            open_txn: dict[str, Any] | None = None,
            broker_events: list[dict[str, Any]] | None = None, title: str | None = None,
            producer: int | None = None) -> Explanation:
    """``open_txn``: the coordinator's live view when the transaction is open now
    (start_ms, timeout_ms, partitions) — a live broker knows it, a data dir may not.
    ``broker_events``: the broker's starts and stops, told where they fall in the story.
    ``producer``: the events are an idempotent producer id's (diagnosed by its refusals)."""
    events = _merge(events, broker_events or [])
    x = Explanation(transactional_id, events=list(events), title=title, known=bool(events))
    if not events:
        x.diagnosis = "No history for this transactional id (never used here, or expired from the history)."
        return x
    added: dict[tuple[str, int], int] = {}
    for i, e in enumerate(events):
        if e.get("kind") in ("add_partitions", "add_offsets"):
            for tp in e.get("partitions", ()):
                added.setdefault((tp[0], tp[1]), e.get("ts", 0))
        held = None
        if e.get("kind") == "marker":
            tp = (e.get("topic"), e.get("partition"))
            if e.get("first_offset") is not None and tp in added:
                held = {"topic": tp[0], "partition": tp[1], "from_ms": added[tp], "to_ms": e.get("ts"),
                        "held_ms": e.get("ts", 0) - added[tp], "first_offset": e.get("first_offset"),
                        "marker_offset": e.get("offset")}
                x.held.append(held)
        line = _line(e, held)
        if line is not None and e.get("kind") == "refused" and e.get("error") in FENCING_ERRORS:
            # the rule, with who broke it: "epoch 0 < current 2: fenced by a new instance (...)"
            mover = _epoch_mover(events, i, e.get("epoch"))
            rule = f"epoch {e.get('epoch')} < current {e.get('current_epoch')}" \
                if e.get("current_epoch") is not None else f"epoch {e.get('epoch')} is not the current one"
            line += f" — {rule}: " + (f"fenced because {_cause(mover, events)}" if mover is not None
                                      else "fenced by an event older than the kept history")
        if line is not None:
            x.story.append(line)
        if e.get("kind") == "complete":
            added.clear()
    x.diagnosis = _diagnose(events, now_ms, open_txn) if producer is None else _diagnose_producer(events)
    return x


def explain_producer(producer_id: int, events: list[dict[str, Any]]) -> Explanation:
    """An idempotent producer id's story: its InitProducerId, refusals and recognised retries."""
    return explain(str(producer_id), events, title=f"Producer id {producer_id}", producer=producer_id)


def _diagnose_producer(events: list[dict[str, Any]]) -> str:
    """An idempotent producer: what went wrong last, and how many retries were recognised."""
    duplicates = sum(1 for e in events if e.get("kind") == "duplicate")
    refused = [e for e in events if e.get("kind") == "refused"]
    dup = (f"{duplicates} duplicate batch{'es' if duplicates != 1 else ''} recognised (retries answered "
           "with their first offsets, not written twice)")
    if refused:
        r = refused[-1]
        return (f"Last refused at {clock_time(r.get('ts'))}: {r.get('api')} to {r.get('topic')}-"
                f"{r.get('partition')} {r.get('error')} ({r.get('message')}); {dup}.")
    if duplicates:
        return f"{dup[0].upper()}{dup[1:]}; nothing refused."
    return "Nothing refused and no retry seen: every batch was written once."


# The events that change a transactional id's state (a refusal, a duplicate or a broker restart
# do not): the last of them says what the id's state is now.
_STATE_KINDS = {"init", "add_partitions", "add_offsets", "prepare", "complete", "epoch_fence", "fenced",
                "timeout_abort", "expired", "roll_forward"}


def _committed_since(events: list[dict[str, Any]]) -> bool:
    """The id's current state is CompleteCommit: a later epoch's transaction committed, so a
    fence before (or a zombie's refusal after) it is history, not what the id is now."""
    last = next((e for e in reversed(events) if e.get("kind") in _STATE_KINDS), None)
    return last is not None and last.get("kind") == "complete" and bool(last.get("commit"))


def _diagnose(events: list[dict[str, Any]], now_ms: int | None, open_txn: dict[str, Any] | None) -> str:
    last_i, last = len(events) - 1, events[-1]
    if _committed_since(events):
        # The headline is the current state; the fence stays in the story, pointed at.
        committed = _diagnose_state(events, last)
        refusals = [e for e in events if e.get("kind") == "refused" and e.get("error") in FENCING_ERRORS]
        fences = [e for e in events if e.get("kind") == "fenced"]
        if refusals:
            r = refusals[-1]
            committed += (f" An older instance's {r.get('api')} with epoch {r.get('epoch')} was refused at "
                          f"{clock_time(r.get('ts'))} ({r.get('error')}); the story tells why.")
        elif fences:
            committed += (f" An older instance was fenced at {clock_time(fences[-1].get('ts'))}; the story "
                          "tells by whom.")
        return committed
    # The last fencing refusal explains the client's exception.
    for i in range(last_i, -1, -1):
        e = events[i]
        if e.get("kind") == "refused" and e.get("error") in FENCING_ERRORS:
            mover = _epoch_mover(events, i, e.get("epoch"))
            refused = (f"{e.get('api')} with epoch {e.get('epoch')} refused at {clock_time(e.get('ts'))} "
                       f"({e.get('error')}")
            if e.get("current_epoch") is not None:
                refused += f"; current epoch {e.get('current_epoch')}"
            refused += ")"
            if mover is not None:
                return f"Fenced: {refused} because {_cause(mover, events)}."
            return f"Fenced: {refused}; the event that moved the epoch is older than the kept history."
        if e.get("kind") in ("init", "complete") and i < last_i:
            break  # a later, healthy life of the id: the refusal above it is old news
    if open_txn is not None and open_txn.get("start_ms", -1) > 0 and now_ms is not None:
        age = now_ms - open_txn["start_ms"]
        parts = ", ".join(_tp(tp) for tp in open_txn.get("partitions", ()))
        return (f"Open for {seconds(age)} of its {seconds(open_txn.get('timeout_ms'))} timeout; it holds "
                f"back the last stable offset of {parts or 'no partition yet'} (read_committed "
                "consumers wait for it).")
    return _diagnose_state(events, last)


def _diagnose_state(events: list[dict[str, Any]], last: dict[str, Any]) -> str:
    """What the id's last decisive event says of it (no refusal to explain, nothing open)."""
    for e in reversed(events):
        kind = e.get("kind")
        if kind == "timeout_abort":
            age = e.get("ts", 0) - e.get("start_ms", 0)
            return (f"Aborted by the coordinator: no EndTxn {seconds(age)} after the transaction began, "
                    f"timeout {seconds(e.get('timeout_ms'))}{_outage_during(events, e)}; the producer's "
                    "next request is fenced.")
        if kind == "fenced":
            return (f"Fenced at {clock_time(e.get('ts'))} by a new instance ({_who(e, 'by_')}) started while "
                    "this one was in a transaction.")
        if kind == "complete":
            what = "Committed" if e.get("commit") else "Aborted"
            by = "" if e.get("commit") else f" ({e.get('reason')})"
            return f"{what} at {clock_time(e.get('ts'))}{by}; nothing is pending."
        if kind == "expired":
            return f"Expired at {clock_time(e.get('ts'))} after {seconds(e.get('idle_ms'))} without use."
        if kind == "init":
            return f"Initialized at {clock_time(e.get('ts'))} ({e.get('reason')}); no transaction since."
    return f"Last event: {last.get('kind')} at {clock_time(last.get('ts'))}."

"""The share session cache: which partitions a member's ShareFetch covers, and its epochs.

Theory of operation
-------------------
Kafka's ``ShareSessionCache`` and ``ShareSession`` (server/.../share/session/), the session part
of ``SharePartitionManager.newContext`` and ``acknowledgeSessionUpdate``
(core/src/main/java/kafka/server/share/SharePartitionManager.java) and
``CachedSharePartition.maybeUpdateResponseData`` (server/.../share/CachedSharePartition.java).

A session is keyed by (group id, member id) and carries an epoch::

    ShareFetch epoch 0  -> a new session, epoch 1 (replacing the key's old one *without*
                           releasing what the member holds; acknowledgements on it: INVALID_REQUEST)
    epoch == session's  -> the fetch/ack proceeds and the epoch advances (MAX_VALUE wraps to 1)
    epoch -1            -> the request is served, then the session closes and the member's
                           records are released (no session: SHARE_SESSION_NOT_FOUND)
    otherwise           -> INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND

ShareAcknowledge never opens a session (epoch 0 is INVALID_SHARE_SESSION_EPOCH). A full cache
(``group.share.max.share.sessions``) refuses a new session with SHARE_SESSION_LIMIT_REACHED;
nothing is evicted for idleness. A session remembers the connection that opened it: when that
connection goes, the session goes and the member's records are released
(``ClientConnectionDisconnectListener``), unless the session was already replaced or removed.

Everything here is synchronous bookkeeping; the caller releases records in the share
partitions this returns and writes the responses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from minibroker_protocol.errors import ErrorCode

INITIAL_EPOCH = 0  # ShareRequestMetadata.INITIAL_EPOCH
FINAL_EPOCH = -1  # ShareRequestMetadata.FINAL_EPOCH
MAX_EPOCH = 2**31 - 1
DEFAULT_MAX_SESSIONS = 2000  # group.share.max.share.sessions

# A share partition as sessions know it: (topic id, partition index).
PartitionKey = tuple[str, int]
SessionKey = tuple[str, str, int | None]  # (group id, member id, the broker that holds it)


def next_epoch(epoch: int) -> int:
    """ShareRequestMetadata.nextEpoch: after the final epoch stays final, wraps past MAX_VALUE."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == MAX_EPOCH:
        return 1
    return epoch + 1


class ShareSessionError(Exception):
    """A top-level refusal: the response carries only this code (no partitions)."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    connection_id: str
    # insertion-ordered; the value is CachedSharePartition.requiresUpdateInResponse
    partitions: dict[PartitionKey, bool] = field(default_factory=dict)
    # Each Kafka broker has its own ShareSessionCache: a member fetching from three leaders has
    # three sessions with their own epochs. Virtual brokers (--brokers N) keep theirs apart by
    # node id (None: a single broker).
    node: int | None = None

    @property
    def key(self) -> SessionKey:
        return (self.group_id, self.member_id, self.node)


@dataclass(frozen=True)
class FetchContext:
    """What newContext decided: which partitions this ShareFetch covers and how to answer.
    ``partitions`` are the ones to fetch from. ``full``: a new session (epoch 0) or the final
    request (-1); a full response lists every partition, an incremental one only those
    :meth:`ShareSessionCache.response_partitions` keeps.
    ``close_after``: epoch -1, the caller releases the session once the response is built."""
    session: ShareSession | None
    partitions: tuple[PartitionKey, ...]
    full: bool
    close_after: bool = False


@dataclass(frozen=True)
class PartitionResult:
    has_records: bool = False
    error: ErrorCode = ErrorCode.none


class ShareSessionCache:
    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[SessionKey, ShareSession] = {}
        # connection id -> (session key, stale); stale once the session was removed or replaced
        self._by_connection: dict[str, tuple[SessionKey, bool]] = {}
        self._members_per_group: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str, node: int | None = None) -> ShareSession | None:
        return self._sessions.get((group_id, member_id, node))

    def members(self, group_id: str) -> int:
        return self._members_per_group.get(group_id, 0)

    # ------------------------------------------------------------------ ShareFetch

    def new_context(self, group_id: str, member_id: str, epoch: int, partitions: Iterable[PartitionKey],
                    forgotten: Iterable[PartitionKey], has_acknowledgements: bool,
                    connection_id: str, node: int | None = None) -> FetchContext:
        """SharePartitionManager.newContext; raises ShareSessionError."""
        wanted = _dedupe(partitions)
        key = (group_id, member_id, node)
        if epoch == FINAL_EPOCH:
            if key not in self._sessions:
                raise ShareSessionError(ErrorCode.share_session_not_found)
            # Kafka's FinalContext: no epoch check and nothing fetched (its valid partitions are
            # none); the request only acknowledges, and its answer lists the acknowledged ones
            return FetchContext(self._sessions[key], (), full=True, close_after=True)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                raise ShareSessionError(ErrorCode.invalid_request)
            # replaced, not closed: the member keeps what it acquired in the old session
            self._remove(key)
            if len(self._sessions) >= self.max_sessions:
                raise ShareSessionError(ErrorCode.share_session_limit_reached)
            opened = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), connection_id,
                                  {p: False for p in wanted}, node)
            self._sessions[key] = opened
            self._members_per_group[group_id] = self._members_per_group.get(group_id, 0) + 1
            self._by_connection[connection_id] = (key, False)
            return FetchContext(opened, tuple(wanted), full=True)
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found)
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch)
        for p in wanted:  # ShareSession.update: new partitions are listed in the next response
            if p not in session.partitions:
                session.partitions[p] = True
        for p in forgotten:
            session.partitions.pop(p, None)
        session.epoch = next_epoch(session.epoch)
        return FetchContext(session, tuple(session.partitions), full=False)

    def response_partitions(self, context: FetchContext,
                            results: Mapping[PartitionKey, PartitionResult]) -> list[PartitionKey]:
        """Which partitions the response lists: all of a full one; of an incremental one those
        with records, an error, or news to tell (maybeUpdateResponseData) — an error also makes
        the partition listed once more in the next response."""
        if context.full or context.session is None:
            return [p for p in context.partitions if p in results]
        session = context.session
        out: list[PartitionKey] = []
        for p in context.partitions:
            r = results.get(p)
            if r is None:
                continue
            must = r.has_records
            if session.partitions.get(p, False):
                must = True
                session.partitions[p] = False
            if r.error != ErrorCode.none:
                session.partitions[p] = True
                must = True
            if must:
                out.append(p)
        return out

    # ------------------------------------------------------------------ ShareAcknowledge

    def acknowledge_update(self, group_id: str, member_id: str, epoch: int,
                           node: int | None = None) -> ShareSession:
        """SharePartitionManager.acknowledgeSessionUpdate; raises ShareSessionError. With epoch -1
        the caller releases the session after acknowledging."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch)
        session = self._sessions.get((group_id, member_id, node))
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found)
        if epoch == FINAL_EPOCH:
            return session
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch)
        session.epoch = next_epoch(session.epoch)
        return session

    # ------------------------------------------------------------------ endings

    def release(self, group_id: str, member_id: str, node: int | None = None) -> ShareSession:
        """releaseSession (after an epoch -1 request, or the member left the group): the session
        goes; the caller releases the member's records in ``session.partitions``. Raises
        ShareSessionError(SHARE_SESSION_NOT_FOUND) when there is none."""
        session = self._remove((group_id, member_id, node))
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found)
        return session

    def on_disconnect(self, connection_id: str) -> tuple[ShareSession | None, bool]:
        """ClientConnectionDisconnectListener.onDisconnect: (the session removed, whose member's
        records the caller releases — None if it had already gone; whether its group now has no
        session left, Kafka's onGroupEmpty, when the caller drops the group's share partitions)."""
        entry = self._by_connection.pop(connection_id, None)
        if entry is None:
            return None, False
        key, stale = entry
        removed = None if stale else self._remove(key)
        group_id = key[0]
        empty = self._members_per_group.get(group_id, 0) == 0
        if empty:
            self._members_per_group.pop(group_id, None)
        return removed, empty

    def remove_all(self) -> list[ShareSession]:
        """share.version turned below 1 (onShareVersionToggle): every session dropped, nothing
        released (the share partitions are dropped with them)."""
        gone = list(self._sessions.values())
        self._sessions.clear()
        self._members_per_group.clear()
        return gone

    def _remove(self, key: SessionKey) -> ShareSession | None:
        session = self._sessions.pop(key, None)
        if session is None:
            return None
        count = self._members_per_group.get(session.group_id, 0)
        self._members_per_group[session.group_id] = max(0, count - 1)
        entry = self._by_connection.get(session.connection_id)
        if entry is not None:
            # Kafka marks the connection's entry stale whichever session it names (one entry per
            # connection, the last session opened on it), so a disconnect then releases nothing
            self._by_connection[session.connection_id] = (entry[0], True)
        return session


def _dedupe(partitions: Iterable[PartitionKey]) -> list[PartitionKey]:
    """librdkafka may repeat a topic entry for non-adjacent partitions; the set is what counts."""
    return list(dict.fromkeys(partitions))

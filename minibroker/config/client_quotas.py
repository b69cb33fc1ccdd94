"""Client quotas (KIP-546): the entities AlterClientQuotas sets quotas on, Kafka's validation of
them, DescribeClientQuotas' filters, and which quota a connection's user and client id fall under.

Kafka: ClientQuotaControlManager (alterClientQuotas, validateEntity, configKeysForEntityType,
validateQuotaKeyValue), ClientQuotasImage.describe, and ClientQuotaManager.DefaultQuotaCallback
(quotaMetricTags, quotaLimit) for enforcement. Kafka answers from Java HashMaps (the entities, the
types inside an entity, the keys of an entity's quotas), so the answers here follow their
iteration order (``java_order``): clients and the differential tests see the same lists.
"""

from __future__ import annotations

import ipaddress
import math
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from minibroker_protocol.errors import ErrorCode
from minibroker_storage import client_quotas as store
from minibroker_storage.lazylog import get_logger

from ..core.java_hash import java_string_hash

log = get_logger("minibroker.quotas")

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = "producer_byte_rate", "consumer_byte_rate"
REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE = "request_percentage", "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

_INT, _LONG, _DOUBLE = "INT", "LONG", "DOUBLE"
# QuotaConfig.userAndClientQuotaConfigs() and ipConfigs()
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: _LONG, CONSUMER_BYTE_RATE: _LONG,
                    REQUEST_PERCENTAGE: _DOUBLE, CONTROLLER_MUTATION_RATE: _DOUBLE}
IP_KEYS = {CONNECTION_CREATION_RATE: _INT}
_INT_MAX, _LONG_MAX = 2**31 - 1, float(2**63 - 1)

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# an entity as a hashable key: ((type, name or None for the default), ...) sorted by type
Key = tuple[tuple[str, str | None], ...]
# (quota key, value or None to remove it)
Op = tuple[str, float | None]


class QuotaRefusal(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _h(s: str | None) -> int:
    return 0 if s is None else java_string_hash(s)


def entity_hash(key: Key) -> int:
    """ClientQuotaEntity.hashCode: Objects.hash(entries), 31 + the map's hash (the sum of key
    hash XOR value hash)."""
    return (31 + sum((_h(t) ^ _h(n)) for t, n in key)) & 0xFFFFFFFF


def java_order(items: Iterable[Any], hash_of: Callable[[Any], int], table: int = 16) -> list[Any]:
    """The iteration order of a java.util.HashMap holding ``items`` (put in this order): by
    bucket of the spread hash in the table that holds them (``table`` slots at first),
    insertion order within a bucket."""
    items = list(items)
    n = table
    while len(items) > n * 3 // 4:
        n *= 2

    def bucket(item: Any) -> int:
        h = hash_of(item) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (n - 1)
    return sorted(items, key=bucket)


def key_of(entity: dict[str, str | None]) -> Key:
    return tuple(sorted(entity.items()))


def ordered_entity(key: Key) -> list[tuple[str, str | None]]:
    """The entity's (type, name) pairs as Kafka lists them."""
    # an entity's map is made for its few types (4 slots: client-id, user, then ip)
    return java_order(key, lambda tn: _h(tn[0]), table=4)


def entity_text(key: Key) -> str:
    """ClientQuotaEntity.toString, as Kafka's error messages print it."""
    inner = ", ".join(f"{t}={'null' if n is None else n}" for t, n in ordered_entity(key))
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _valid_ip_entity(name: str | None) -> bool:
    """InetAddress.getByName: an address literal, or a name that resolves."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


def _check_value(keys: dict[str, str], key: str, value: float) -> None:
    """ClientQuotaControlManager.validateQuotaKeyValue, with the broker's finite-number check
    (checked against Kafka 4.4: after the key, before the sign)."""
    kind = keys.get(key)
    if kind is None:
        raise QuotaRefusal(ErrorCode.invalid_request, f"Invalid configuration key {key}")
    if not math.isfinite(value):
        raise QuotaRefusal(ErrorCode.invalid_request, f"Quota {key} must be a finite number")
    if value <= 0.0:
        raise QuotaRefusal(ErrorCode.invalid_request, f"Quota {key} must be greater than 0")
    if kind == _DOUBLE:
        return
    if kind == _INT and value > _INT_MAX:
        raise QuotaRefusal(ErrorCode.invalid_request, f"Proposed value for {key} is too large for an INT.")
    if kind == _LONG and value > _LONG_MAX:
        raise QuotaRefusal(ErrorCode.invalid_request, f"Proposed value for {key} is too large for a LONG.")
    if abs(math.fmod(value, 1.0)) > 1e-6:
        raise QuotaRefusal(ErrorCode.invalid_request, f"{key} cannot be a fractional value.")


def _entity_keys(key: Key) -> dict[str, str]:
    """validateEntity then configKeysForEntityType: the quota keys the entity may have."""
    if not key:
        raise QuotaRefusal(ErrorCode.invalid_request, "Invalid empty client quota entity")
    for t, n in ordered_entity(key):
        if t not in (USER, CLIENT_ID, IP):
            raise QuotaRefusal(ErrorCode.invalid_request, f"Unhandled client quota entity type: {t}")
        if n is not None and not n:
            raise QuotaRefusal(ErrorCode.invalid_request, f"Empty {t} not supported")
    types = dict(key)
    if IP in types:
        if USER in types or CLIENT_ID in types:
            # sic: Kafka's message lacks the space
            raise QuotaRefusal(ErrorCode.invalid_request, "Invalid quota entity combination, IP entity should"
                                                          "not be combined with User or ClientId")
        if not _valid_ip_entity(types[IP]):
            raise QuotaRefusal(ErrorCode.invalid_request,
                               f"{types[IP]} is not a valid IP or resolvable host.")
        return IP_KEYS
    return USER_CLIENT_KEYS


class ClientQuotas:
    """Every entity's quotas, kept in ``client-quotas.json`` (storage/client_quotas.py)."""

    def __init__(self, data_dir: Any, entries: list[store.Entry] | None = None) -> None:
        self.data_dir = data_dir
        # insertion-ordered: Kafka's HashMap order depends on it within a bucket
        self._quotas: dict[Key, dict[str, float]] = {}
        for entity, quotas in entries or ():
            self._quotas[key_of(entity)] = dict(quotas)
        # per quota key, the entity shapes that have ever had it since start (Kafka's
        # quotaTypesEnabled, which only grows until a restart)
        self._levels: dict[str, set[tuple[bool, bool]]] = {}
        for key, quotas in self._quotas.items():
            self._enable(key, quotas)

    @classmethod
    def load(cls, data_dir: Any) -> ClientQuotas:
        try:
            entries = store.load(data_dir)
        except store.ClientQuotasFileError as e:
            log.warning("quotas.unreadable", reason=str(e))
            entries = []
        return cls(data_dir, entries)

    def _enable(self, key: Key, quotas: dict[str, float]) -> None:
        types = dict(key)
        for q in quotas:
            self._levels.setdefault(q, set()).add((USER in types, CLIENT_ID in types))

    @property
    def any(self) -> bool:
        return bool(self._levels)

    def entities(self) -> dict[Key, dict[str, float]]:
        return {k: dict(v) for k, v in self._quotas.items()}

    # -- AlterClientQuotas ----------------------------------------------------------------
    def alter(self, entries: Sequence[tuple[Sequence[tuple[str, str | None]], Sequence[Op]]],
              validate_only: bool) -> list[tuple[Key, ErrorCode, str | None]]:
        """ClientQuotaControlManager.alterClientQuotas: (entity, error, message) per distinct
        entity, in Kafka's order; the valid entities' changes applied unless ``validate_only``."""
        results: dict[Key, tuple[ErrorCode, str | None]] = {}
        changes: list[tuple[Key, str, float | None]] = []
        for given, ops in entries:
            entity: dict[str, str | None] = {}
            for t, n in given:  # the broker reads the entity into a map: a repeated type's last name wins
                entity[t] = n
            key = key_of(entity)
            alterations: dict[str, float | None] = {}
            for k, v in ops:
                if k in alterations:
                    results[key] = (ErrorCode.invalid_request, f"Duplicate quota key {k} not updating "
                                                               f"quota for this entity {entity_text(key)}")
                else:
                    alterations[k] = v
            if key in results:
                results[key] = (ErrorCode.invalid_request, f"Ignoring duplicate entity {entity_text(key)}")
                continue
            try:
                changes += self._entity_changes(key, alterations)
                results[key] = (ErrorCode.none, None)
            except QuotaRefusal as e:
                results[key] = (e.code, e.message)
        if changes and not validate_only:
            for key, k, v in changes:
                quotas = self._quotas.setdefault(key, {})
                if v is None:
                    quotas.pop(k, None)
                    if not quotas:
                        del self._quotas[key]
                else:
                    quotas[k] = v
                    self._enable(key, {k: v})
            store.save(self.data_dir, [(dict(k), dict(q)) for k, q in self._quotas.items()])
            log.info("quotas.altered", changes=[(entity_text(k), q, v) for k, q, v in changes])
        return [(k, *results[k]) for k in java_order(results, entity_hash)]

    def _entity_changes(self, key: Key, alterations: dict[str, float | None]) -> \
            list[tuple[Key, str, float | None]]:
        allowed = _entity_keys(key)
        current = self._quotas.get(key, {})
        out: list[tuple[Key, str, float | None]] = []
        for k in java_order(alterations, java_string_hash):
            v = alterations[k]
            if v is None:
                if k in current:
                    out.append((key, k, None))
                continue
            _check_value(allowed, k, v)
            if current.get(k) != v:
                out.append((key, k, v))
        return out

    # -- DescribeClientQuotas -------------------------------------------------------------
    def describe(self, components: Sequence[tuple[str, int, str | None]], strict: bool
                 ) -> list[tuple[list[tuple[str, str | None]], list[tuple[str, float]]]]:
        """ClientQuotasImage.describe: the matching entities and their quotas, as Kafka lists them."""
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for t, match_type, match in components:
            if not t:
                raise QuotaRefusal(ErrorCode.invalid_request, "Invalid empty entity type.")
            if t in exact or t in typed:
                raise QuotaRefusal(ErrorCode.invalid_request,
                                   f"Entity type {t} cannot appear more than once in the filter.")
            if t not in (IP, USER, CLIENT_ID):
                raise QuotaRefusal(ErrorCode.unsupported_version, f"Unsupported entity type {t}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaRefusal(ErrorCode.invalid_request,
                                       "Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[t] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise QuotaRefusal(ErrorCode.invalid_request,
                                       "Request specified MATCH_TYPE_DEFAULT, but also specified a match "
                                       "string.")
                exact[t] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise QuotaRefusal(ErrorCode.invalid_request,
                                       "Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                                       "string.")
                typed.add(t)
            else:
                raise QuotaRefusal(ErrorCode.invalid_request, f"Unknown match type {match_type}")
        if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
            raise QuotaRefusal(ErrorCode.invalid_request,
                               "Invalid entity filter component combination. IP filter component should "
                               "not be used with user or clientId filter component.")
        if strict and not exact and not typed:
            return []
        matched = []
        # walked in the image's order, which decides between two matches in one bucket
        for key in java_order(self._quotas, entity_hash):
            types = dict(key)
            if any(t not in types or types[t] != n for t, n in exact.items()):
                continue
            if any(t not in types for t in typed):
                continue
            matched.append(key)
        # Kafka copies the matches into a new HashMap (grown from a small table), then lists it,
        # leaving out under ``strict`` the entities of more types than the filter names
        out = []
        for key in java_order(matched, entity_hash, table=2):
            if strict and len(key) != len(exact) + len(typed):
                continue
            quotas = self._quotas[key]
            out.append((ordered_entity(key), [(q, quotas[q]) for q in java_order(quotas, java_string_hash)]))
        return out

    # -- enforcement: DefaultQuotaCallback ------------------------------------------------
    def metric_tags(self, quota: str, user: str, client_id: str) -> tuple[str, str]:
        """quotaMetricTags: (user, client id) naming the sensor a request is measured on; a
        quota set on a user alone is shared by all its client ids, and so on."""
        levels = self._levels.get(quota, set())
        if not levels or levels == {(False, True)}:
            return ("", client_id)
        if levels == {(True, False)}:
            return (user, "")
        if levels == {(True, True)}:
            return (user, client_id)
        q = self._quotas
        if _has(q, quota, ((USER, user), (CLIENT_ID, client_id))) or \
                _has(q, quota, ((USER, user), (CLIENT_ID, None))):
            return (user, client_id)
        if _has(q, quota, ((USER, user),)):
            return (user, "")
        if _has(q, quota, ((USER, None), (CLIENT_ID, client_id))) or \
                _has(q, quota, ((USER, None), (CLIENT_ID, None))):
            return (user, client_id)
        if _has(q, quota, ((USER, None),)):
            return (user, "")
        return ("", client_id)

    def limit(self, quota: str, tags: tuple[str, str]) -> float | None:
        """quotaLimit: the bound of the sensor named by ``tags``; None when there is none."""
        user, client_id = tags
        q = self._quotas
        candidates: tuple[Key, ...] = ()
        if user and client_id:
            candidates = ((("client-id", client_id), ("user", user)), (("client-id", None), ("user", user)),
                          (("client-id", client_id), ("user", None)), (("client-id", None), ("user", None)))
        elif user:
            candidates = ((("user", user),), (("user", None),))
        elif client_id:
            candidates = ((("client-id", client_id),), (("client-id", None),))
        for key in candidates:
            v = q.get(key, {}).get(quota)
            if v is not None:
                return v
        return None


def _has(q: dict[Key, dict[str, float]], quota: str, entity: tuple[tuple[str, str | None], ...]) -> bool:
    return quota in q.get(tuple(sorted(entity)), {})

"""Fault rules: which requests a rule catches, when it fires, and what it does then.

Theory of operation. A rule is data (what an operator posts to the control plane or writes
in a ``--faults`` file) checked when it is added, so a bad rule is one clear line and never
half a rule. The dispatcher describes each decoded request as :class:`RequestFacts` (its API
and version, who sent it, the transactional ids, groups and topic-partitions it names) and
asks :meth:`FaultBook.decide` for the first rule, in the order they were added, that
*matches* and *fires*. Matching is pure; firing is counted per rule:

- ``nth``: the rule fires on the nth request it matches (1 = the first), then stays quiet
  (with ``count`` > 1: on the nth and the ``count - 1`` after it);
- ``count``: it fires on the next ``count`` matches, ``-1`` for every one (default 1);
- ``probability`` with ``seed``: each match fires with that probability, from a generator
  seeded per rule, so a run is replayed exactly (within ``count``, when given).

Nothing here touches a socket or a clock: how an action is carried out (answer an error,
hold, delay, crash) is the dispatcher's business (minibroker/control/faults/actions.py).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger

from ..request_counts import api_name

log = get_logger("minibroker.faults")

ACTIONS = ("error", "error-after-apply", "drop-response", "delay", "disconnect", "hold", "crash", "throttle")

# Named points of the transaction and produce paths where a ``crash`` rule may kill the broker
# (besides ``before-apply``/``after-apply`` of any request it matches).
CRASH_POINTS = {
    "txn.after_prepare": "EndTxn: PrepareCommit/PrepareAbort is in __transaction_state, no marker yet",
    "txn.after_first_marker": "EndTxn: the first partition's marker is written, the others not",
    "txn.before_complete": "EndTxn: every marker is written, CompleteCommit/CompleteAbort not yet",
    "produce.after_append": "Produce: the batch is in the log, the answer not sent",
}
REQUEST_POINTS = ("before-apply", "after-apply")

_FIELDS = ("id", "api", "min_version", "max_version", "client_id", "client_software",
           "transactional_id", "group", "topic", "partition", "broker", "nth", "count",
           "probability", "seed", "action", "error", "message", "delay_ms", "when", "point",
           "throttle_ms")


class FaultError(ValueError):
    """A rule that cannot be: the one line says why."""


@dataclass(frozen=True)
class RequestFacts:
    """What a request is and names, for matching (minibroker/control/faults/subjects.py reads them)."""

    api_key: int
    api_version: int
    client_id: str | None = None
    client_software: str = "unknown"
    transactional_ids: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    topic_partitions: frozenset[tuple[str, int]] = frozenset()
    broker: int | None = None


@dataclass
class FaultRule:
    id: int
    action: str
    api: int | None = None
    min_version: int | None = None
    max_version: int | None = None
    client_id: str | None = None
    client_software: str | None = None
    transactional_id: str | None = None
    group: str | None = None
    topic: str | None = None
    partition: int | None = None
    broker: int | None = None
    nth: int | None = None
    count: int = 1
    probability: float | None = None
    seed: int | None = None
    error: int | None = None
    message: str | None = None
    delay_ms: int = 0
    when: str = "before"
    point: str | None = None
    throttle_ms: int | None = None
    matched: int = 0
    fired: int = 0
    _rng: random.Random | None = field(default=None, repr=False)

    # -- matching (pure) -------------------------------------------------------------
    def matches(self, f: RequestFacts) -> bool:
        if self.api is not None and f.api_key != self.api:
            return False
        if self.min_version is not None and f.api_version < self.min_version:
            return False
        if self.max_version is not None and f.api_version > self.max_version:
            return False
        if self.client_id is not None and f.client_id != self.client_id:
            return False
        if self.client_software is not None and f.client_software != self.client_software:
            return False
        if self.transactional_id is not None and self.transactional_id not in f.transactional_ids:
            return False
        if self.group is not None and self.group not in f.groups:
            return False
        if self.topic is not None:
            if self.partition is None:
                if not any(t == self.topic for t, _ in f.topic_partitions):
                    return False
            elif (self.topic, self.partition) not in f.topic_partitions:
                return False
        return self.broker is None or f.broker is None or f.broker == self.broker

    def exhausted(self) -> bool:
        if self.count < 0:
            return False
        return self.fired >= self.count

    # -- firing (counted) ------------------------------------------------------------
    def fire(self) -> bool:
        """Count one match; whether the rule fires on it."""
        self.matched += 1
        if self.exhausted():
            return False
        if self.nth is not None and self.matched < self.nth:
            return False
        if self.probability is not None:
            if self._rng is None:
                self._rng = random.Random(self.seed)
            if self._rng.random() >= self.probability:
                return False
        self.fired += 1
        return True

    @property
    def error_name(self) -> str | None:
        return None if self.error is None else ErrorCode(self.error).name.upper()

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "action": self.action}
        for name in _FIELDS[1:]:
            value = getattr(self, name)
            if name in ("action", "count", "delay_ms", "when"):
                continue
            if value is not None:
                out[name] = value
        if self.api is not None:
            out["api"] = api_name(self.api)
        if self.error is not None:
            out["error"] = self.error_name
            out["error_code"] = self.error
        if self.action == "delay":
            out["delay_ms"] = self.delay_ms
        if self.action == "disconnect":
            out["when"] = self.when
        out["count"] = self.count
        out["matched"] = self.matched
        out["fired"] = self.fired
        return out


_API_BY_NAME = {k.name.lower(): int(k) for k in ApiKey}


def parse_api(value: object) -> int:
    if isinstance(value, bool):
        raise FaultError(f"api {value!r} is neither an API name nor a key")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    key = _API_BY_NAME.get(text.lower().replace("_", ""))
    if key is None:
        raise FaultError(f"unknown API {text!r} (names as Kafka spells them: EndTxn, Produce, ...)")
    return key


def parse_error(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return int(ErrorCode(value))
        except ValueError:
            raise FaultError(f"unknown error code {value}") from None
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        return parse_error(int(text))
    try:
        return int(ErrorCode[text.lower()])
    except KeyError:
        raise FaultError(f"unknown error {text!r} (Kafka's names: CONCURRENT_TRANSACTIONS, "
                         f"NOT_COORDINATOR, ...)") from None


def _int(spec: Mapping[str, Any], name: str, lo: int | None = None) -> int | None:
    value = spec.get(name)
    if value is None:
        return None
    if isinstance(value, bool):
        raise FaultError(f"{name} must be an integer, not {value!r}")
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise FaultError(f"{name} must be an integer, not {value!r}") from None
    if lo is not None and n < lo:
        raise FaultError(f"{name} must be >= {lo}, not {n}")
    return n


def _text(spec: Mapping[str, Any], name: str) -> str | None:
    value = spec.get(name)
    return None if value is None else str(value)


def parse_rule(spec: Mapping[str, Any], rule_id: int) -> FaultRule:
    """A rule from its JSON form; FaultError (one line) when any part of it is wrong."""
    if not isinstance(spec, Mapping):
        raise FaultError("a fault rule is a JSON object")
    unknown = sorted(set(spec) - set(_FIELDS) - {"error_code"})
    if unknown:
        raise FaultError(f"unknown field(s) {', '.join(unknown)} (known: {', '.join(_FIELDS[1:])})")
    action = _text(spec, "action")
    if action not in ACTIONS:
        raise FaultError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    rule = FaultRule(id=rule_id, action=action)
    if spec.get("api") is not None:
        rule.api = parse_api(spec["api"])
    rule.min_version = _int(spec, "min_version", 0)
    rule.max_version = _int(spec, "max_version", 0)
    if (rule.min_version is not None and rule.max_version is not None
            and rule.min_version > rule.max_version):
        raise FaultError(f"min_version {rule.min_version} > max_version {rule.max_version}")
    rule.client_id = _text(spec, "client_id")
    rule.client_software = _text(spec, "client_software")
    rule.transactional_id = _text(spec, "transactional_id")
    rule.group = _text(spec, "group")
    rule.topic = _text(spec, "topic")
    rule.partition = _int(spec, "partition", 0)
    if rule.partition is not None and rule.topic is None:
        raise FaultError("partition needs topic")
    rule.broker = _int(spec, "broker", 0)
    rule.nth = _int(spec, "nth", 1)
    count = _int(spec, "count", -1)
    rule.count = 1 if count is None else count
    if rule.count == 0:
        raise FaultError("count must be >= 1, or -1 for every matching request")
    if spec.get("probability") is not None:
        try:
            rule.probability = float(spec["probability"])
        except (TypeError, ValueError):
            raise FaultError(f"probability must be a number, not {spec['probability']!r}") from None
        if not 0.0 < rule.probability <= 1.0:
            raise FaultError(f"probability must be in (0, 1], not {rule.probability}")
        if count is None:
            rule.count = -1  # a probability without a count applies to every match
    rule.seed = _int(spec, "seed")
    rule.message = _text(spec, "message")
    error = spec.get("error", spec.get("error_code"))
    if action in ("error", "error-after-apply"):
        if error is None:
            raise FaultError(f"action {action} needs an error (a Kafka error name or code)")
        rule.error = parse_error(error)
        if rule.error == 0:
            raise FaultError("error NONE is not a fault")
        if rule.api is not None:
            from .error_answers import error_shape_problem
            problem = error_shape_problem(rule.api)
            if problem is not None:
                raise FaultError(problem)
    elif error is not None:
        raise FaultError(f"error is only for the actions error and error-after-apply, not {action}")
    if action == "delay":
        delay = _int(spec, "delay_ms", 0)
        if delay is None:
            raise FaultError("action delay needs delay_ms")
        rule.delay_ms = delay
    when = _text(spec, "when")
    if when is not None:
        if action != "disconnect":
            raise FaultError("when is only for the action disconnect")
        if when not in ("before", "after"):
            raise FaultError(f"when must be before or after (applying the request), not {when!r}")
        rule.when = when
    throttle = _int(spec, "throttle_ms", 1)
    if action == "throttle":
        if throttle is None:
            raise FaultError("action throttle needs throttle_ms")
        rule.throttle_ms = throttle
    elif throttle is not None:
        raise FaultError(f"throttle_ms is only for the action throttle, not {action}")
    point = _text(spec, "point")
    if action == "crash":
        if point is None:
            point = "before-apply"
        if point not in CRASH_POINTS and point not in REQUEST_POINTS:
            raise FaultError(f"unknown crash point {point!r} (points: "
                             f"{', '.join([*REQUEST_POINTS, *CRASH_POINTS])})")
        if point in REQUEST_POINTS and rule.api is None:
            raise FaultError(f"crash at {point} needs api: which request it follows")
        rule.point = point
    elif point is not None:
        raise FaultError("point is only for the action crash")
    if action != "crash" and rule.api is None:
        raise FaultError(f"action {action} needs api: which requests it applies to")
    return rule


def parse_rules(specs: Iterable[Mapping[str, Any]], first_id: int = 1) -> list[FaultRule]:
    """Every rule of a batch checked before any is used; FaultError ``rule N: why`` otherwise."""
    rules = []
    for n, spec in enumerate(specs, 1):
        try:
            rules.append(parse_rule(spec, first_id + n - 1))
        except FaultError as e:
            raise FaultError(f"rule {n}: {e}") from None
    return rules


class FaultBook:
    """The rules in force, in the order they were added, and how often each fired."""

    def __init__(self, rules: Iterable[Mapping[str, Any]] = ()) -> None:
        self.rules: dict[int, FaultRule] = {}
        self._next_id = 1
        self.add_all(rules)

    def add(self, spec: Mapping[str, Any]) -> FaultRule:
        return self.add_all([spec], numbered=False)[0]

    def add_all(self, specs: Iterable[Mapping[str, Any]], numbered: bool = True) -> list[FaultRule]:
        """Add a batch, all or nothing (a refusal names the rule when ``numbered``)."""
        specs = list(specs)
        rules = (parse_rules(specs, self._next_id) if numbered
                 else [parse_rule(spec, self._next_id + i) for i, spec in enumerate(specs)])
        for rule in rules:
            self.rules[rule.id] = rule
            log.info("fault.added", **rule.describe())
        self._next_id += len(rules)
        return rules

    def remove(self, rule_id: int) -> FaultRule | None:
        rule = self.rules.pop(rule_id, None)
        if rule is not None:
            log.info("fault.removed", id=rule_id, fired=rule.fired)
        return rule

    def clear(self) -> list[FaultRule]:
        gone = list(self.rules.values())
        self.rules.clear()
        if gone:
            log.info("fault.cleared", rules=len(gone))
        return gone

    def listing(self) -> list[dict[str, Any]]:
        return [r.describe() for r in self.rules.values()]

    def __bool__(self) -> bool:
        return bool(self.rules)

    def decide(self, facts: RequestFacts) -> FaultRule | None:
        """The first rule that matches this request and fires on it (request rules only:
        a crash at a named point is asked for with :meth:`at_point`)."""
        for rule in self.rules.values():
            if rule.action == "crash" and rule.point not in REQUEST_POINTS:
                continue
            if rule.matches(facts) and rule.fire():
                return rule
        return None

    def at_point(self, point: str, transactional_id: str | None = None,
                 topic: str | None = None, partition: int | None = None) -> FaultRule | None:
        """The crash rule, if any, that fires at this named point of the broker's work."""
        for rule in self.rules.values():
            if rule.action != "crash" or rule.point != point:
                continue
            if rule.transactional_id is not None and rule.transactional_id != transactional_id:
                continue
            if rule.topic is not None and rule.topic != topic:
                continue
            if rule.partition is not None and rule.partition != partition:
                continue
            if rule.fire():
                return rule
        return None


def read_rules_file(path: Any) -> list[Mapping[str, Any]]:
    """The rules of a ``--faults`` file (``{"rules": [...]}`` or a list), each checked; a
    FaultError naming the file and the rule otherwise."""
    import json
    from pathlib import Path

    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as e:
        raise FaultError(f"--faults {str(p)!r}: cannot read it: {e.strerror or e}") from None
    except ValueError as e:
        raise FaultError(f"--faults {str(p)!r}: not JSON: {e}") from None
    specs = data.get("rules") if isinstance(data, dict) else data
    if not isinstance(specs, list):
        raise FaultError(f"--faults {str(p)!r}: expected {{\"rules\": [...]}} or a list of rules")
    try:
        parse_rules(specs)
    except FaultError as e:
        raise FaultError(f"--faults {str(p)!r}: {e}") from None
    return specs

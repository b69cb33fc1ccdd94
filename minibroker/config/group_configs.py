"""Group configs (GROUP config resources): the per-group overrides of the broker's group.*
settings that share, KIP-848 consumer and streams groups read, as Kafka 4.4 defines them.

Kafka: group-coordinator/.../GroupConfig.java (CONFIG_DEF, ALL_GROUP_CONFIG_SYNONYMS,
validateNames, then ConfigDef.parse, then validateValues against the broker's min/max bounds)
and ConfigHelper.createGroupConfigEntry (what DescribeConfigs lists). Values are kept parsed
and printed back as ConfigDef prints them (" 50000 " is kept as "50000").

minibroker has no options for the broker's group.*.min/max bounds: they are Kafka's defaults,
widened to take in the broker default when --group-consumer-* sets one outside them (Kafka
refuses to start with a default outside its own bounds, so the defaults always lie inside).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from minibroker_storage import group_configs as store
from minibroker_storage.lazylog import get_logger

from . import topic_configs as tc
from .options import Config

log = get_logger(__name__)

DYNAMIC_GROUP_CONFIG = 8  # DescribeConfigs config_source of a group's own value

INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1

# The streams assignors a broker registers (group.streams.assignors): Kafka's default list, the
# one assignor minibroker's streams groups have (coordinator/group/streams_assignor.py).
STREAMS_ASSIGNORS = ("sticky",)

_RESET_DOC = (
    "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically "
    "reset the offset to the earliest offset</li><li>latest: automatically reset the offset to the "
    "latest offset</li><li>by_duration:&lt;duration&gt;: automatically reset the offset to a "
    "configured duration from the current timestamp. &lt;duration&gt; must be specified in ISO8601 "
    "format (PnDTnHnMn.nS). Negative duration is not allowed.</li><li>anything else: throw exception "
    "to the share consumer.</li></ul>")


class GroupConfigError(ValueError):
    """A value Kafka refuses, with its INVALID_CONFIG message."""


@dataclass(frozen=True)
class GroupConfigDef:
    """A group config Kafka defines: type, default, synonym and bounds."""
    name: str
    type: int
    doc: str
    default: Callable[[Config], str]
    # the broker config DescribeConfigs names as the default's synonym (None: the name itself)
    synonym: str | None = None
    at_least: int | None = None
    internal: bool = False  # listed by DescribeConfigs only when the group sets it
    choices: tuple[str, ...] | None = None
    bounds: Callable[[Config], tuple[int | None, int]] | None = None  # the broker's (min, max)


def _const(value: str) -> Callable[[Config], str]:
    return lambda c: value


def _opt(attr: str) -> Callable[[Config], str]:
    return lambda c: str(getattr(c, attr))


def _between(lo: int, hi: int, attr: str | None = None) -> Callable[[Config], tuple[int | None, int]]:
    def bounds(c: Config) -> tuple[int | None, int]:
        if attr is None:
            return lo, hi
        d = int(getattr(c, attr))
        return min(lo, d), max(hi, d)
    return bounds


def _at_most(hi: int) -> Callable[[Config], tuple[int | None, int]]:
    return lambda c: (None, hi)


_D = GroupConfigDef
_CS, _CH, _CA = ("group_consumer_session_timeout_ms", "group_consumer_heartbeat_interval_ms",
                 "group_consumer_assignment_interval_ms")

# In CONFIG_DEF's order, which is the order Kafka parses (and so reports the first bad value in).
DEFS: tuple[GroupConfigDef, ...] = (
    _D("consumer.session.timeout.ms", tc.INT,
       "The timeout to detect client failures when using the consumer group protocol.",
       _opt(_CS), "group.consumer.session.timeout.ms", 1, bounds=_between(45000, 60000, _CS)),
    _D("consumer.heartbeat.interval.ms", tc.INT,
       "The heartbeat interval given to the members of a consumer group.",
       _opt(_CH), "group.consumer.heartbeat.interval.ms", 1, bounds=_between(5000, 15000, _CH)),
    _D("consumer.assignment.interval.ms", tc.INT,
       "The interval between assignment updates for a consumer group.",
       _opt(_CA), "group.consumer.assignment.interval.ms", 0, bounds=_between(0, 15000, _CA)),
    _D("consumer.assignor.offload.enable", tc.BOOLEAN,
       "Whether to offload consumer group assignment to a group coordinator background thread.",
       _const("true"), "group.consumer.assignor.offload.enable", internal=True),
    _D("share.session.timeout.ms", tc.INT,
       "The timeout to detect client failures when using the share group protocol.",
       _const("45000"), "group.share.session.timeout.ms", 1, bounds=_between(45000, 60000)),
    _D("share.heartbeat.interval.ms", tc.INT,
       "The heartbeat interval given to the members of a share group.",
       _const("5000"), "group.share.heartbeat.interval.ms", 1, bounds=_between(5000, 15000)),
    _D("share.record.lock.duration.ms", tc.INT,
       "The record acquisition lock duration in milliseconds for share groups.",
       _const("30000"), "group.share.record.lock.duration.ms", 1000, bounds=_between(15000, 60000)),
    _D("share.delivery.count.limit", tc.INT,
       "The maximum number of delivery attempts for a record delivered to a share group.",
       _const("5"), "group.share.delivery.count.limit", 2, bounds=_between(2, 10)),
    _D("share.partition.max.record.locks", tc.INT,
       "Share-group record lock limit per share-partition.",
       _const("2000"), "group.share.partition.max.record.locks", 100, bounds=_between(100, 4000)),
    _D("share.auto.offset.reset", tc.STRING, _RESET_DOC, _const("latest")),
    _D("share.isolation.level", tc.STRING,
       'Controls how to read records written transactionally. If set to "read_committed", the share '
       "group will only deliver transactional records which have been committed. If set to "
       '"read_uncommitted", the share group will return all messages, even transactional messages '
       "which have been aborted. Non-transactional records will be returned unconditionally in "
       "either mode.",
       _const("read_uncommitted"), choices=("read_committed", "read_uncommitted")),
    _D("share.renew.acknowledge.enable", tc.BOOLEAN,
       "Whether the renew acknowledge type is enabled for the share group.", _const("true")),
    _D("share.assignment.interval.ms", tc.INT,
       "The interval between assignment updates for a share group.",
       _const("1000"), "group.share.assignment.interval.ms", 0, bounds=_between(0, 15000)),
    _D("share.assignor.offload.enable", tc.BOOLEAN,
       "Whether to offload share group assignment to a group coordinator background thread.",
       _const("true"), "group.share.assignor.offload.enable", internal=True),
    _D("streams.session.timeout.ms", tc.INT,
       "The timeout to detect client failures when using the streams group protocol.",
       _const("45000"), "group.streams.session.timeout.ms", 1, bounds=_between(45000, 60000)),
    _D("streams.heartbeat.interval.ms", tc.INT, "The heartbeat interval given to the members.",
       _const("5000"), "group.streams.heartbeat.interval.ms", 1, bounds=_between(5000, 15000)),
    _D("streams.num.standby.replicas", tc.INT, "The number of standby replicas for each task.",
       _const("0"), "group.streams.num.standby.replicas", 0, bounds=_at_most(2)),
    _D("streams.initial.rebalance.delay.ms", tc.INT,
       "The amount of time the group coordinator will wait for more streams clients to join a new "
       "group before performing the first rebalance. A longer delay means potentially fewer "
       "rebalances.", _const("3000"), "group.streams.initial.rebalance.delay.ms", 0),
    _D("streams.assignment.interval.ms", tc.INT,
       "The interval between assignment updates for a streams group.",
       _const("1000"), "group.streams.assignment.interval.ms", 0, bounds=_between(0, 15000)),
    _D("streams.assignor.offload.enable", tc.BOOLEAN,
       "Whether to offload streams group assignment to a group coordinator background thread.",
       _const("true"), "group.streams.assignor.offload.enable", internal=True),
    _D("streams.task.offset.interval.ms", tc.INT,
       "The interval in which the warmup task changelog offsets on a client are updated on the "
       "broker. The offsets are sent with the next heartbeat after this time has passed.",
       _const("60000"), "group.streams.task.offset.interval.ms", 1, internal=True),
    _D("streams.num.warmup.replicas", tc.INT, "The maximum number of warmup task replicas.",
       _const("2"), "group.streams.num.warmup.replicas", 0, internal=True, bounds=_at_most(20)),
    _D("streams.rack.aware.assignment.tags", tc.LIST,
       "List of client tag keys used to distribute standby replicas across Kafka Streams "
       "instances. When configured, and the used broker-side assignor supports it, it will make a "
       "best-effort to distribute standby tasks over each client tag dimension.",
       _const(""), "group.streams.rack.aware.assignment.tags"),
    _D("streams.acceptable.recovery.lag", tc.LONG,
       "The maximum acceptable lag (number of offsets to catch up) for a client to be considered "
       "caught-up enough to receive an active task assignment.",
       _const("10000"), "group.streams.acceptable.recovery.lag", 0, internal=True),
    _D("streams.assignor.name", tc.STRING,
       "The task assignor to use for this streams group, selected by short name from the assignors "
       "registered via the broker configuration group.streams.assignors. When unset, the group "
       "defaults to the first assignor configured in the broker's group.streams.assignors setting. "
       "Changing the assignor does not trigger a rebalance for the group; the new assignor takes "
       "effect on the next rebalance.", _const(STREAMS_ASSIGNORS[0]), "group.streams.assignors"),
    _D("errors.deadletterqueue.topic.name", tc.STRING,
       "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. "
       "If blank (the default), the group does not have a DLQ topic.", _const("")),
    _D("errors.deadletterqueue.copy.record.enable", tc.BOOLEAN,
       "When writing onto the dead-letter queue topic, whether to copy the original record onto the "
       "DLQ topic, or just write a record containing the context information headers.",
       _const("false")),
)
BY_NAME = {d.name: d for d in DEFS}

# GroupConfig.validateValues checks each kind's heartbeat interval before its session timeout.
_VALUE_ORDER = sorted(DEFS, key=lambda d: (d.name.split(".")[0] != "consumer",
                                           d.name.split(".")[0] != "share",
                                           "heartbeat" not in d.name))
_SESSION_OVER_HEARTBEAT = [(f"{k}.session.timeout.ms", f"{k}.heartbeat.interval.ms")
                           for k in ("consumer", "share", "streams")]

_INTEGER = re.compile(r"[+-]?[0-9]+")
# java.time.Duration.parse's grammar (case-insensitive)
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def _duration_ms(text: str) -> float | None:
    """The duration's milliseconds, or None when java.time.Duration.parse refuses it."""
    m = _DURATION.fullmatch(text)
    if m is None or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        return None
    days, hours, minutes, secs = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    frac = int((m.group(7) or "0").ljust(9, "0")) / 1e6
    if secs < 0 or (m.group(6) or "").startswith("-"):
        frac = -frac
    total = ((days * 24 + hours) * 60 + minutes) * 60_000 + secs * 1000 + frac
    return -total if m.group(1) == "-" else total


def _parse(d: GroupConfigDef, raw: str) -> str:
    """The value as ConfigDef.parse keeps it, printed back; a GroupConfigError as Kafka words it."""
    value = raw.strip()

    def invalid(why: str) -> GroupConfigError:
        return GroupConfigError(f"Invalid value {value} for configuration {d.name}: {why}")

    if d.type in (tc.INT, tc.LONG):
        top = INT32_MAX if d.type == tc.INT else INT64_MAX
        if not _INTEGER.fullmatch(value) or not -top - 1 <= int(value) <= top:
            raise invalid(f"Not a number of type {'INT' if d.type == tc.INT else 'LONG'}")
        if d.at_least is not None and int(value) < d.at_least:
            raise invalid(f"Value must be at least {d.at_least}")
        return str(int(value))
    if d.type == tc.BOOLEAN:
        if value.lower() not in ("true", "false"):
            raise invalid("Expected value to be either true or false")
        return value.lower()
    if d.type == tc.LIST:
        items = [v.strip() for v in value.split(",")] if value else []
        if any(not v for v in items):
            raise GroupConfigError(f"Configuration '{d.name}' values must not be empty.")
        return ",".join(items)
    if d.choices is not None and value not in d.choices:
        raise invalid(f"String must be one of: {', '.join(d.choices)}")
    if d.name == "share.auto.offset.reset":
        # case matters here, unlike in the client's auto.offset.reset (Kafka 4.4, checked)
        ok = value in ("latest", "earliest")
        if value.startswith("by_duration:"):
            ms = _duration_ms(value[len("by_duration:"):].strip())
            ok = ms is not None and ms >= 0
        if not ok:
            raise invalid(f"Invalid value `{value}` for configuration {d.name}. The value must be either "
                          "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
    return value


def validate(configs: dict[str, str], config: Config) -> dict[str, str]:
    """A group's whole set of overrides after an alteration, parsed; GroupConfigError on the first
    problem in Kafka's order (names, then each value's type, then the broker's bounds)."""
    for name in configs:
        if name not in BY_NAME:
            raise GroupConfigError(f"Unknown group config name: {name}")
    parsed = {d.name: _parse(d, configs[d.name]) for d in DEFS if d.name in configs}
    effective = {d.name: parsed.get(d.name, d.default(config)) for d in DEFS}
    for d in _VALUE_ORDER:
        if d.bounds is None:
            continue
        lo, hi = d.bounds(config)
        value = int(effective[d.name])
        if lo is None and value > hi:
            raise GroupConfigError(f"{d.name} must be less than or equal to {hi}")
        if lo is not None and not lo <= value <= hi:
            raise GroupConfigError(f"{d.name} must be in the range {lo} to {hi} inclusive.")
    assignor = effective["streams.assignor.name"]
    if assignor not in STREAMS_ASSIGNORS:
        raise GroupConfigError(f"streams.assignor.name '{assignor}' is not a registered task assignor. "
                               f"Registered assignors are: [{', '.join(STREAMS_ASSIGNORS)}].")
    if effective["errors.deadletterqueue.topic.name"].startswith("__"):
        raise GroupConfigError("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if int(effective[session]) <= int(effective[heartbeat]):
            raise GroupConfigError(f"{session} must be greater than {heartbeat}")
    return parsed


@dataclass(frozen=True)
class Entry:
    """One DescribeConfigs entry: (name, value, source, type, doc) and its synonyms
    ((name, value, source), the group's own first)."""
    name: str
    value: str
    source: int
    type: int
    doc: str
    synonyms: tuple[tuple[str, str, int], ...]


def describe(own: dict[str, str], config: Config) -> list[Entry]:
    """What DescribeConfigs lists for a group (ConfigHelper.createGroupConfigEntry): every
    public config, and an internal one only when the group sets it."""
    out = []
    for d in DEFS:
        if d.internal and d.name not in own:
            continue
        default = (d.synonym or d.name, d.default(config), tc.DEFAULT_CONFIG)
        if d.name in own:
            mine = (d.name, own[d.name], DYNAMIC_GROUP_CONFIG)
            out.append(Entry(d.name, own[d.name], DYNAMIC_GROUP_CONFIG, d.type, d.doc, (mine, default)))
        else:
            out.append(Entry(d.name, default[1], tc.DEFAULT_CONFIG, d.type, d.doc, (default,)))
    return out


class GroupConfigs:
    """Every group's own configs, kept in the data dir; ``group_config`` is the coordinators'
    read-only lookup (the group's value, else the broker default)."""

    def __init__(self, config: Config, groups: dict[str, dict[str, str]] | None = None) -> None:
        self.config = config
        self._groups = {g: dict(c) for g, c in (groups or {}).items() if c}

    @classmethod
    def load(cls, config: Config) -> GroupConfigs:
        try:
            groups = store.load(config.data_dir)
        except store.GroupConfigsFileError as e:
            log.warning("group_configs.unreadable", reason=str(e))
            groups = {}
        return cls(config, groups)

    def own(self, group_id: str) -> dict[str, str]:
        return dict(self._groups.get(group_id, {}))

    def groups(self) -> list[str]:
        """The groups with configs of their own (ListConfigResources)."""
        return sorted(self._groups)

    def group_config(self, group_id: str, name: str) -> str:
        own = self._groups.get(group_id)
        if own is not None and name in own:
            return own[name]
        return BY_NAME[name].default(self.config)

    def group_int(self, group_id: str, name: str) -> int:
        return int(self.group_config(group_id, name))

    def replace(self, group_id: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        """The group's whole set of overrides after an IncrementalAlterConfigs; GroupConfigError
        when Kafka would refuse it (nothing changes then)."""
        parsed = validate(configs, self.config)
        if validate_only or parsed == self._groups.get(group_id, {}):
            return
        groups = dict(self._groups)
        if parsed:
            groups[group_id] = parsed
        else:
            groups.pop(group_id, None)
        store.save(self.config.data_dir, groups)
        self._groups = groups
        log.info("group_configs.altered", group_id=group_id, configs=parsed)

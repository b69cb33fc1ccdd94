"""Broker configuration: the options, where each may come from, and what each accepts.

Every option is read, first source wins, from: the command line; a ``--wait-for-config``
file; ``KAFKA_*`` environment variables (Kafka's property names, config/properties.py);
``MINIBROKER_<OPTION>`` variables; ``server.properties`` files (``--config`` or the
positional argument); the built-in default. ``KAFKA_*`` sits above ``MINIBROKER_*`` so that
an environment written for apache/kafka behaves the same on the minibroker image, whose
own defaults are ``MINIBROKER_*`` variables.

Values are checked here, whatever their source, with the bounds Kafka's own validators put
on the property each option mirrors (KafkaConfig / LogConfig ``atLeast``), and every
problem becomes one line naming its source: ``ConfigError.problems``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from .features import GROUP_VERSION, TRANSACTION_VERSION
from .listeners import Listener, ListenerError, resolve
from .properties import (
    KAFKA_PROPERTIES,
    LISTENER_PROPERTIES,
    PropertiesError,
    env_to_property,
    filter_listeners,
    kafka_env,
    parse_properties,
)

if TYPE_CHECKING:
    import argparse

DEFAULT_PORT = 9092
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class FsyncPolicy:
    """When appends are fsynced: always, never, or every interval_ms."""
    mode: str  # "always" | "interval" | "never"
    interval_ms: int = 0

    @classmethod
    def parse(cls, text: str) -> FsyncPolicy:
        text = text.strip().lower()
        if text in ("always", "never"):
            return cls(text)
        if text.endswith("ms"):
            text = text[:-2]
        try:
            ms = int(text)
        except ValueError:
            raise ValueError("must be 'always', 'never' or a number of milliseconds") from None
        if ms <= 0:
            raise ValueError("the interval must be > 0 ms")
        return cls("interval", ms)

    def __str__(self) -> str:
        return self.mode if self.mode != "interval" else f"{self.interval_ms}ms"


@dataclass(frozen=True)
class Config:
    # A docstring of its own: without one, @dataclass writes the class's signature into
    # __doc__, formatting each of its ~100 fields through inspect: ~3 ms of every start.
    """Every setting of a broker, checked (``load`` makes it from all sources)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    advertised_host: str | None = None
    advertised_port: int | None = None
    data_dir: Path = Path("minibroker-data")
    node_id: int = 1
    brokers: int = 1
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    # Kafka's broker.rack: one rack for every virtual broker, or one each in node order
    broker_rack: tuple[str, ...] = ()
    # Kafka's replica.selector.class (KIP-392): "" (the leader serves consumers) or the rack-aware one
    replica_selector_class: str = ""
    auto_create_topics: bool = True
    fsync: FsyncPolicy = FsyncPolicy("interval", 1000)
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    retention_check_interval_ms: int = 300_000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000
    message_max_bytes: int = 1_048_588
    # Kafka's log.message.timestamp.* (the topics' message.timestamp.* defaults)
    log_message_timestamp_type: str = "CreateTime"
    log_message_timestamp_before_max_ms: int = 2**63 - 1
    log_message_timestamp_after_max_ms: int = 3_600_000  # Kafka 4.0's default (KIP-937)
    producer_id_expiration_ms: int = 86_400_000
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_check_interval_ms: int = 10_000
    transactional_id_expiration_check_interval_ms: int = 3_600_000
    transaction_state_partitions: int = 1
    offsets_topic_partitions: int = 1
    # segment.bytes of __consumer_offsets / __transaction_state when they are created: a roll
    # makes the history before it cleanable (compaction) and snapshots producer state
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    transaction_state_log_segment_bytes: int = 100 * 1024 * 1024
    group_initial_rebalance_delay_ms: int = 3000
    # KIP-848 consumer groups (Kafka's group.consumer.* defaults)
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_assignment_interval_ms: int = 1_000
    # KIP-1191 dead-letter queues of share groups (Kafka's errors.deadletterqueue.* broker configs)
    errors_deadletterqueue_auto_create_topics_enable: bool = False
    errors_deadletterqueue_topic_name_prefix: str = "dlq."
    producer_id_expiration_check_interval_ms: int = 600_000
    max_request_bytes: int = 104_857_600
    # Kafka's queued.max.request.bytes idea: the bytes every connection's unfinished or unhandled
    # requests may hold together; past it the broker stops reading sockets until memory frees.
    queued_max_request_bytes: int = 104_857_600
    # None: the level the data dir last finalized (UpdateFeatures), else config/features.py's default
    transaction_version: int | None = None
    group_version: int | None = None
    # Background checksum scrub of closed segments, bytes per second; 0 = off.
    scrub_bytes_per_sec: int = 0
    log_level: str = "info"
    log_format: str = "console"
    # Empty: one PLAINTEXT listener from host/port/advertised_host/advertised_port.
    listeners: tuple[Listener, ...] = ()
    listener_security_protocol_map: str | None = None
    # TLS of SSL listeners, from PEM files (Kafka: ssl.keystore.type=PEM)
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_cafile: Path | None = None
    ssl_client_auth: str = "none"
    # SASL listeners (security/sasl): mechanisms offered, users, and the bounds on a connection
    # that has not authenticated yet.
    sasl_mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    sasl_users: Path | None = None
    sasl_authentication_timeout_ms: int = 10_000
    connections_max_reauth_ms: int = 0
    # Delegation tokens (security/tokens.py): off without a secret key, as in Kafka.
    delegation_token_secret_key: str | None = None
    delegation_token_max_lifetime_ms: int = 604_800_000
    delegation_token_expiry_time_ms: int = 86_400_000
    delegation_token_expiry_check_interval_ms: int = 3_600_000
    # ACLs (security/acl): off unless --authorizer standard, as Kafka without authorizer.class.name.
    authorizer: str = "none"
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False
    ready_file: Path | None = None
    ephemeral: bool = False
    # The control plane (fault injection, clock, request log): off unless a listener is set.
    # Serve only what this Kafka release served (config/as_version.py).
    as_version: str | None = None
    max_api_versions: tuple[tuple[int, int], ...] | None = None
    control_listener: tuple[str, int] | None = None
    # The Schema Registry (issue 34): ("http" or "https", host, port); off unless set.
    schema_registry_listener: tuple[str, str, int] | None = None
    schema_registry_auth: str = "none"
    clock: str = "system"
    faults: Path | None = None
    # KIP-714: serve GetTelemetrySubscriptions/PushTelemetry. Kafka advertises them only when a
    # receiver of client metrics is configured; minibroker's receiver is the console, so 'auto'
    # serves them with --control-listener.
    client_telemetry: str = "auto"
    telemetry_max_bytes: int = 1_048_576

    @property
    def telemetry_enabled(self) -> bool:
        return self.client_telemetry == "on" or (self.client_telemetry == "auto"
                                                 and self.control_listener is not None)

    def rack_of(self, node: int) -> str | None:
        """The broker.rack of a (virtual) broker, None without one."""
        if not self.broker_rack:
            return None
        if len(self.broker_rack) == 1:
            return self.broker_rack[0]
        return self.broker_rack[node - self.node_id]

    @property
    def rack_aware(self) -> bool:
        return self.replica_selector_class == RACK_AWARE_SELECTOR

    @property
    def node_ids(self) -> list[int]:
        """The node ids of this process's (virtual) brokers: --node-id and the --brokers after it."""
        return [self.node_id + i for i in range(self.brokers)]

    def effective_listeners(self) -> tuple[Listener, ...]:
        if self.listeners:
            return self.listeners
        return (Listener("PLAINTEXT", self.host, self.port, self.advertised_host,
                         self.advertised_port),)

    def advertised(self, bound_port: int) -> tuple[str, int]:
        """The first listener's advertised address (what a bootstrap client is told)."""
        return self.effective_listeners()[0].advertised(bound_port)


class ConfigError(ValueError):
    """Every problem found, one line each, naming where the bad value came from."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


# -- value parsers: text -> value, or ValueError saying what is wrong ----------------------

def _integer(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError("not an integer") from None


def _int(lo: int, hi: int = INT64_MAX, why: str = "") -> Callable[[str], int]:
    def parse(text: str) -> int:
        v = _integer(text)
        if lo <= v <= hi:
            return v
        if hi < INT32_MAX:
            raise ValueError(f"must be between {lo} and {hi}{why}")
        raise ValueError(f"must be at least {lo}{why}" if v < lo else f"must be at most {hi}{why}")
    return parse


def _ms_or_forever(text: str) -> int:
    v = _integer(text)
    if v < -1:
        raise ValueError("must be -1 (forever) or at least 0")
    return v


def _bool(text) -> bool:
    if isinstance(text, bool):
        return text
    v = str(text).strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError("not true or false")


RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
_SELECTORS = ("", RACK_AWARE_SELECTOR, "org.apache.kafka.common.replica.LeaderSelector")


def _racks(text: str) -> tuple[str, ...]:
    racks = tuple(r.strip() for r in text.split(",")) if text.strip() else ()
    if any(not r for r in racks):
        raise ValueError("an empty rack name")
    return racks


def _selector(text: str) -> str:
    v = text.strip()
    if v not in _SELECTORS:
        raise ValueError(f"minibroker has {RACK_AWARE_SELECTOR} and "
                         "org.apache.kafka.common.replica.LeaderSelector (the default)")
    return "" if v.endswith(".LeaderSelector") else v


def _timestamp_type(text: str) -> str:
    # ConfigDef.ValidString: the names as Kafka spells them, case and all
    v = text.strip()
    if v not in ("CreateTime", "LogAppendTime"):
        raise ValueError("must be CreateTime or LogAppendTime")
    return v


def _choice(*values: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        v = text.strip().lower()
        if v not in values:
            raise ValueError(f"must be one of {', '.join(values)}")
        return v
    return parse


# authorizer.class.name in a server.properties names the class; Kafka 4's one ACL authorizer
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _authorizer(text: str) -> str:
    v = text.strip()
    if v in ("", "none"):
        return "none"
    if v in ("standard", STANDARD_AUTHORIZER):
        return "standard"
    raise ValueError(f"must be standard (or {STANDARD_AUTHORIZER}) or none")


def _text(text: str) -> str:
    return text.strip()


def _path(text: str) -> Path:
    if not text.strip():
        raise ValueError("empty path")
    return Path(text.strip())


def _log_dirs(text: str) -> Path:
    dirs = [d for d in text.split(",") if d.strip()]
    if len(dirs) > 1:
        raise ValueError("minibroker keeps its data in one directory, not a list")
    return _path(dirs[0] if dirs else "")


def _fsync(text: str) -> FsyncPolicy:
    return FsyncPolicy.parse(text)


_PORT = _int(0, 65535)


def _release(text: str) -> str:
    from .as_version import parse_release
    return parse_release(text)


def _max_versions(text: str) -> tuple[tuple[int, int], ...]:
    from .as_version import parse_max_versions
    return tuple(sorted(parse_max_versions(text).items()))


def _control_address(text: str) -> tuple[str, int]:
    """HOST:PORT or PORT (loopback); [::1]:PORT for an IPv6 address."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    return host, _PORT(port)


def _registry_address(text: str) -> tuple[str, str, int]:
    """[http://|https://]HOST:PORT, as Confluent's ``listeners`` (one; https serves the broker's
    --ssl-certfile/--ssl-keyfile)."""
    text = text.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "http", text
    scheme = scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"{scheme}:// is neither http:// nor https://")
    if "," in rest:
        raise ValueError("one listener only")
    host, port = _control_address(rest.rstrip("/"))
    return scheme, host, port


@dataclass(frozen=True)
class Option:
    """One broker option: its flag, parser, default and help, and its MINIBROKER_* variable."""
    flag: str
    parse: Callable[[str], object]
    default: object
    help: str
    metavar: str | None = None
    optional_value: bool = False   # "--ephemeral" alone means true

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    @property
    def env(self) -> str:
        return "MINIBROKER_" + self.dest.upper()


_D = Config()
# What --sasl-mechanisms may name (GSSAPI, Kerberos, is not served)
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_BYTES = "bytes"
OPTIONS: tuple[Option, ...] = (
    Option("--host", _text, _D.host, "address to listen on"),
    Option("--port", _PORT, _D.port, "TCP port to listen on (0-65535); 0 picks a free one"),
    Option("--advertised-host", _text, None,
           "host name clients are told to connect to in Metadata answers (default: --host, or "
           "localhost when listening on all addresses)"),
    Option("--advertised-port", _PORT, None,
           "port clients are told to connect to (default: the bound port)"),
    Option("--listeners", _text, None,
           "sockets to listen on, Kafka's listeners syntax, e.g. "
           "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092; an empty host means every "
           "interface, port 0 a free port; replaces --host/--port and the --advertised-host/"
           "--advertised-port shorthand; each listener speaks the protocol "
           "--listener-security-protocol-map gives its name (PLAINTEXT:// and SSL:// name themselves)",
           metavar="NAME://HOST:PORT,..."),
    Option("--listener-security-protocol-map", _text, None,
           "the security protocol of each listener name, Kafka's listener.security.protocol.map, "
           "e.g. INTERNAL:PLAINTEXT,EXTERNAL:SSL (default: each protocol names itself)",
           metavar="NAME:PROTOCOL,..."),
    Option("--ssl-certfile", _path, None,
           "the broker's certificate chain (PEM) for SSL listeners; 'minibroker certs DIR' writes one",
           metavar="FILE"),
    Option("--ssl-keyfile", _path, None, "the private key (PEM, unencrypted) of --ssl-certfile",
           metavar="FILE"),
    Option("--ssl-cafile", _path, None,
           "CA certificates (PEM) that client certificates are checked against (with --ssl-client-auth)",
           metavar="FILE"),
    Option("--ssl-client-auth", _choice("required", "requested", "none"), _D.ssl_client_auth,
           "whether SSL clients must present a certificate, Kafka's ssl.client.auth"),
    Option("--sasl-mechanisms", _text, _D.sasl_mechanisms,
           "the SASL mechanisms SASL_PLAINTEXT/SASL_SSL listeners offer, Kafka's "
           "sasl.enabled.mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (unsecured "
           "JWS tokens, for development only)", metavar="MECH,..."),
    Option("--sasl-users", _path, None,
           "users for SASL/PLAIN and SCRAM, one name:password a line ('#' comments); SCRAM users "
           "can also be made with AlterUserScramCredentials (kafka-configs.sh --alter --add-config "
           "'SCRAM-SHA-256=[password=...]')", metavar="FILE"),
    Option("--sasl-authentication-timeout-ms", _int(1), _D.sasl_authentication_timeout_ms,
           "a connection to a SASL listener that has not authenticated within this is closed"),
    Option("--connections-max-reauth-ms", _int(0), _D.connections_max_reauth_ms,
           "SASL sessions last this long and clients re-authenticate before the end (KIP-368, "
           "Kafka's connections.max.reauth.ms); 0: sessions do not expire"),
    Option("--delegation-token-secret-key", _text, None,
           "the key delegation tokens' HMACs are made with, Kafka's delegation.token.secret.key; "
           "without it CreateDelegationToken and the other token APIs answer "
           "DELEGATION_TOKEN_AUTH_DISABLED and no token logs in", metavar="KEY"),
    Option("--delegation-token-max-lifetime-ms", _int(1), _D.delegation_token_max_lifetime_ms,
           "the longest a delegation token lives, renewals included, Kafka's "
           "delegation.token.max.lifetime.ms"),
    Option("--delegation-token-expiry-time-ms", _int(1), _D.delegation_token_expiry_time_ms,
           "how long a delegation token lives from its creation or last renewal unless renewed "
           "for less, Kafka's delegation.token.expiry.time.ms"),
    Option("--delegation-token-expiry-check-interval-ms", _int(1),
           _D.delegation_token_expiry_check_interval_ms,
           "how often expired delegation tokens are removed, Kafka's "
           "delegation.token.expiry.check.interval.ms"),
    Option("--authorizer", _authorizer, _D.authorizer,
           "standard: check every request against ACLs (CreateAcls/DescribeAcls/DeleteAcls), as "
           "Kafka's StandardAuthorizer; none: everyone may do everything"),
    Option("--super-users", _text, _D.super_users,
           "principals the authorizer lets do everything, Kafka's super.users, e.g. "
           "User:admin;User:ops", metavar="User:NAME;..."),
    Option("--allow-everyone-if-no-acl-found", _bool, _D.allow_everyone_if_no_acl_found,
           "let anyone use a resource no ACL names, Kafka's allow.everyone.if.no.acl.found"),
    Option("--advertised-listeners", _text, None,
           "the address each listener gives its clients in Metadata and FindCoordinator "
           "answers, e.g. INTERNAL://minibroker:29092,EXTERNAL://localhost:9092; a listener "
           "left out advertises its own host (localhost for every-interface) and port; port 0 "
           "means the bound port; without --listeners, the one listener is PLAINTEXT on "
           "--host/--port", metavar="NAME://HOST:PORT,..."),
    Option("--data-dir", _path, _D.data_dir,
           "where topics, segments and broker state live (Kafka's log.dirs, one directory)"),
    Option("--ephemeral", _bool, _D.ephemeral,
           "keep data in a new temporary directory, removed when the broker stops, and never "
           "fsync: a throw-away broker for CI; --data-dir is ignored", metavar="BOOL",
           optional_value=True),
    Option("--ready-file", _path, None,
           "once every listener accepts connections, write FILE (atomically) with one line per "
           "listener, its advertised host:port, the first listener first", metavar="FILE"),
    Option("--node-id", _int(0, INT32_MAX), _D.node_id,
           "broker id reported in Metadata, Kafka's node.id"),
    Option("--brokers", _int(1, 64), _D.brokers,
           "virtual brokers in this process: node ids --node-id, --node-id+1, ..., each with its own "
           "listener (--port, --port+1, ...; free ports with --port 0), partition leaders and "
           "coordinators spread over them as Kafka spreads them; the data is one copy"),
    Option("--num-partitions", _int(1, INT32_MAX, " (Kafka's num.partitions)"), _D.num_partitions,
           "partitions of auto-created topics, Kafka's num.partitions"),
    Option("--default-replication-factor", _int(1, 32767, " (Kafka's default.replication.factor)"),
           _D.default_replication_factor,
           "replication factor of auto-created topics and of CreateTopics that ask for the "
           "default (-1), Kafka's default.replication.factor; with --brokers N, a factor above 1 "
           "lets their leaders move when a virtual broker stops"),
    Option("--min-insync-replicas", _int(1, INT32_MAX, " (Kafka's min.insync.replicas)"),
           _D.min_insync_replicas,
           "replicas that must be in sync (virtual brokers up) for an acks=all write, else "
           "NOT_ENOUGH_REPLICAS; capped at the partition's replication factor, Kafka's min.insync.replicas"),
    Option("--broker-rack", _racks, _D.broker_rack,
           "the rack of the broker, or of each virtual broker in node order (comma-separated), "
           "reported by Metadata and used by the rack-aware replica selector, Kafka's broker.rack",
           metavar="RACK[,RACK...]"),
    Option("--replica-selector-class", _selector, _D.replica_selector_class,
           f"{RACK_AWARE_SELECTOR}: a Fetch from a consumer with a rack (client.rack) is pointed at "
           "a replica in its rack (KIP-392 preferred read replica), and followers serve consumers; "
           "Kafka's replica.selector.class", metavar="CLASS"),
    Option("--auto-create-topics", _bool, _D.auto_create_topics,
           "create unknown topics on Metadata requests, Kafka's auto.create.topics.enable",
           metavar="BOOL"),
    Option("--fsync", _fsync, _D.fsync,
           "when appended data is forced to disk: 'always' before every produce answer, "
           "every MS milliseconds in the background (Kafka's log.flush.interval.ms), or "
           "'never' (leave it to the OS)", metavar="always|never|MS"),
    # LogConfig: segment.bytes atLeast(LegacyRecord.RECORD_OVERHEAD_V0 = 14), an INT.
    Option("--segment-bytes", _int(14, INT32_MAX, " (Kafka's log.segment.bytes)"), _D.segment_bytes,
           "roll a new segment at this size, Kafka's log.segment.bytes"),
    Option("--segment-ms", _int(1, why=" (Kafka's log.roll.ms)"), _D.segment_ms,
           "roll a new segment after this age, Kafka's log.roll.ms"),
    Option("--retention-ms", _ms_or_forever, _D.retention_ms,
           "delete segments older than this, -1 keeps forever, Kafka's log.retention.ms"),
    Option("--retention-bytes", _int(-1), _D.retention_bytes,
           "delete old segments while a partition is larger than this, -1 = no limit, Kafka's "
           "log.retention.bytes"),
    Option("--retention-check-interval-ms", _int(1), _D.retention_check_interval_ms,
           "how often retention runs, Kafka's log.retention.check.interval.ms"),
    Option("--offsets-topic-segment-bytes", _int(14, INT32_MAX), _D.offsets_topic_segment_bytes,
           "segment.bytes of __consumer_offsets when it is created, Kafka's offsets.topic.segment.bytes"),
    Option("--transaction-state-log-segment-bytes", _int(14, INT32_MAX),
           _D.transaction_state_log_segment_bytes,
           "segment.bytes of __transaction_state when it is created, Kafka's "
           "transaction.state.log.segment.bytes"),
    Option("--log-cleaner-enable", _bool, _D.log_cleaner_enable,
           "compact the topics whose cleanup.policy includes compact, Kafka's log.cleaner.enable",
           metavar="BOOL"),
    Option("--log-cleaner-backoff-ms", _int(1), _D.log_cleaner_backoff_ms,
           "how long the log cleaner sleeps when no log needs cleaning, Kafka's "
           "log.cleaner.backoff.ms"),
    Option("--producer-id-expiration-ms", _int(1, INT32_MAX), _D.producer_id_expiration_ms,
           "forget an idempotent producer's state after this long without a write, Kafka's "
           "producer.id.expiration.ms"),
    Option("--producer-id-expiration-check-interval-ms", _int(1, INT32_MAX),
           _D.producer_id_expiration_check_interval_ms,
           "how often expired producer state is removed, Kafka's "
           "producer.id.expiration.check.interval.ms"),
    Option("--transaction-max-timeout-ms", _int(1, INT32_MAX), _D.transaction_max_timeout_ms,
           "largest transaction.timeout.ms a producer may ask for, Kafka's "
           "transaction.max.timeout.ms"),
    Option("--transactional-id-expiration-ms", _int(1, INT32_MAX), _D.transactional_id_expiration_ms,
           "forget a transactional id idle this long, Kafka's transactional.id.expiration.ms"),
    Option("--transaction-abort-check-interval-ms", _int(1, INT32_MAX),
           _D.transaction_abort_check_interval_ms,
           "how often transactions past their timeout are aborted, Kafka's "
           "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
    Option("--transactional-id-expiration-check-interval-ms", _int(1, INT32_MAX),
           _D.transactional_id_expiration_check_interval_ms,
           "how often expired transactional ids are removed, Kafka's "
           "transaction.remove.expired.transaction.cleanup.interval.ms"),
    Option("--group-initial-rebalance-delay-ms", _int(0, INT32_MAX),
           _D.group_initial_rebalance_delay_ms,
           "how long a new group waits for more members before its first rebalance, Kafka's "
           "group.initial.rebalance.delay.ms"),
    Option("--group-consumer-session-timeout-ms", _int(1, INT32_MAX),
           _D.group_consumer_session_timeout_ms,
           "a KIP-848 consumer group member without a heartbeat this long is fenced, Kafka's "
           "group.consumer.session.timeout.ms"),
    Option("--group-consumer-heartbeat-interval-ms", _int(1, INT32_MAX),
           _D.group_consumer_heartbeat_interval_ms,
           "how often KIP-848 consumer group members are told to heartbeat, Kafka's "
           "group.consumer.heartbeat.interval.ms"),
    Option("--group-consumer-assignment-interval-ms", _int(0, INT32_MAX),
           _D.group_consumer_assignment_interval_ms,
           "a consumer group's target assignment is recomputed at most this often, Kafka's "
           "group.consumer.assignment.interval.ms"),
    Option("--errors-deadletterqueue-auto-create-topics-enable", _bool,
           _D.errors_deadletterqueue_auto_create_topics_enable,
           "create a share group's missing dead-letter queue topic (with the default partition count "
           "and errors.deadletterqueue.group.enable=true) instead of refusing to write to it, Kafka's "
           "errors.deadletterqueue.auto.create.topics.enable", metavar="BOOL"),
    Option("--errors-deadletterqueue-topic-name-prefix", _text,
           _D.errors_deadletterqueue_topic_name_prefix,
           "the prefix a share group's dead-letter queue topic must have (empty: any name), Kafka's "
           "errors.deadletterqueue.topic.name.prefix", metavar="PREFIX"),
    Option("--message-max-bytes", _int(0, INT32_MAX, " (Kafka's message.max.bytes)"),
           _D.message_max_bytes, "largest record batch accepted, Kafka's message.max.bytes"),
    Option("--log-message-timestamp-type", _timestamp_type,
           _D.log_message_timestamp_type,
           "the default message.timestamp.type of topics: LogAppendTime stamps each batch with the "
           "broker's time as it is appended, Kafka's log.message.timestamp.type"),
    Option("--log-message-timestamp-before-max-ms", _int(0), _D.log_message_timestamp_before_max_ms,
           "refuse records (INVALID_TIMESTAMP) whose CreateTime is more than this before the broker's "
           "time, Kafka's log.message.timestamp.before.max.ms"),
    Option("--log-message-timestamp-after-max-ms", _int(0), _D.log_message_timestamp_after_max_ms,
           "refuse records (INVALID_TIMESTAMP) whose CreateTime is more than this after the broker's "
           "time, Kafka's log.message.timestamp.after.max.ms"),
    Option("--max-request-bytes", _int(1, INT32_MAX), _D.max_request_bytes,
           "largest request frame accepted before the connection is closed, Kafka's "
           "socket.request.max.bytes"),
    Option("--queued-max-request-bytes", _int(1), _D.queued_max_request_bytes,
           "bytes that all connections' partly received and not yet answered requests may hold "
           "together; beyond it the broker stops reading from sockets until memory frees, Kafka's "
           "queued.max.request.bytes"),
    Option("--transaction-version", _int(0, TRANSACTION_VERSION.max_supported), _D.transaction_version,
           f"finalize the transaction.version feature at this level at start-up (0-"
           f"{TRANSACTION_VERSION.max_supported}; default: the level UpdateFeatures last set, else "
           f"{TRANSACTION_VERSION.default_level})"),
    Option("--group-version", _int(0, GROUP_VERSION.max_supported), _D.group_version,
           f"finalize the group.version feature at this level at start-up (0-{GROUP_VERSION.max_supported}; "
           f"default: the level UpdateFeatures last set, else {GROUP_VERSION.default_level})"),
    Option("--as-version", _release, None,
           "advertise and accept only the API versions this Apache Kafka release served (2.1 to "
           "4.4, e.g. 2.8 or 3.9), so clients take their older paths; before 4.0 also no "
           "finalized transaction.version or group.version", metavar="X.Y"),
    Option("--max-api-versions", _max_versions, None,
           "cap single APIs at a version, e.g. EndTxn=3,Produce=9 (after --as-version): a "
           "client's fallback for one API", metavar="API=V,..."),
    Option("--control-listener", _control_address, None,
           "serve the control plane (fault rules, the clock, the request log: HTTP JSON) on "
           "HOST:PORT; a bare PORT listens on 127.0.0.1; off unless set", metavar="HOST:PORT"),
    Option("--schema-registry-listener", _registry_address, None,
           "serve the Schema Registry (Confluent's REST API v1, schemas kept in _schemas) on "
           "[http://|https://]HOST:PORT; https uses --ssl-certfile/--ssl-keyfile; off unless set",
           metavar="URL"),
    Option("--schema-registry-auth", _choice("none", "basic"), _D.schema_registry_auth,
           "'basic': the Schema Registry asks for HTTP basic auth with a --sasl-users user"),
    Option("--clock", _choice("system", "virtual"), _D.clock,
           "'virtual': the broker's time stands still and moves only when advanced over the "
           "control plane (minibroker clock advance 90s); 'system': real time, which the control "
           "plane may still move ahead"),
    Option("--faults", _path, None,
           "load fault rules from this JSON file at start-up ({\"rules\": [...]}, as POST "
           "/v1/faults takes them), for a reproducible run; needs --control-listener to change "
           "them later", metavar="FILE"),
    Option("--client-telemetry", _choice("auto", "on", "off"), _D.client_telemetry,
           "serve KIP-714 client telemetry (GetTelemetrySubscriptions, PushTelemetry): clients "
           "push the metrics that client-metrics subscriptions ask for and the console shows "
           "them; 'auto' serves it with --control-listener (Kafka serves it only when a metrics "
           "receiver is configured)"),
    Option("--telemetry-max-bytes", _int(1, INT32_MAX), _D.telemetry_max_bytes,
           "largest PushTelemetry payload accepted, Kafka's telemetry.max.bytes"),
    Option("--scrub-bytes-per-sec", _int(0), _D.scrub_bytes_per_sec,
           "verify the checksums of closed segments in the background at this many bytes per "
           "second; 0 turns the background scrub off"),
    Option("--log-level", _choice("debug", "info", "warning", "error"), _D.log_level,
           "debug, info, warning or error"),
    Option("--log-format", _choice("console", "json"), _D.log_format,
           "structured log output style: console or json"),
)
BY_FLAG = {o.flag: o for o in OPTIONS}
# Kafka's log.dirs is a list; minibroker has one directory.
_KAFKA_PARSE = {"log.dirs": _log_dirs, "log.dir": _log_dirs}
_RANK = {prop: i for i, prop in enumerate(KAFKA_PROPERTIES)}


def _default_text(o: Option) -> str:
    if o.default is None:
        return ""
    if isinstance(o.default, bool):
        return "; default " + str(o.default).lower()
    return f"; default {o.default}"


def add_serve_options(p: argparse.ArgumentParser) -> None:
    """The broker's options. Values stay text here: they are checked by ``load`` whatever
    their source, so a bad environment variable cannot break ``--help``."""
    for o in OPTIONS:
        kwargs: dict[str, Any] = dict(default=None, metavar=o.metavar, dest=o.dest,
                      help=f"{o.help} (env {o.env}{_default_text(o)})".replace("%", "%%"))
        if o.optional_value:
            kwargs.update(nargs="?", const="true")
        p.add_argument(o.flag, **kwargs)
    p.add_argument("--config", default=None, metavar="FILE", dest="config",
                   help="read Kafka's server.properties format (or KAFKA_*/MINIBROKER_* "
                        "KEY=VALUE lines) from FILE; the properties minibroker has no use for "
                        "are logged and ignored (env MINIBROKER_CONFIG)")
    p.add_argument("--wait-for-config", default=None, metavar="FILE", dest="wait_for_config",
                   help="before binding, wait until FILE exists and read it like --config, above "
                        "every source but the command line: the Testcontainers way to learn "
                        "the mapped port (env MINIBROKER_WAIT_FOR_CONFIG)")


# The options add_serve_options gives argparse besides OPTIONS: each takes one value.
META_FLAGS = ("--config", "--wait-for-config")
_ALL_DESTS = (*(o.dest for o in OPTIONS), *(f[2:].replace("-", "_") for f in META_FLAGS))


def plain_serve_args(argv: list[str]) -> SimpleNamespace | None:
    """The namespace argparse would make of ``argv``, when ``argv`` is only options spelled
    out whole (``--port 9093``, ``--port=9093``) with values that cannot be read as options;
    None for anything else (a positional, ``--help``, an abbreviation, ``--ephemeral``
    without ``=``, a value starting with ``-``), which the caller gives to argparse.

    Building argparse's parser of ~100 options (and importing argparse, gettext) is ~6 ms of
    every start (issue 33); a broker started with its options spelled out, or with none
    (environment, properties), does not need it. Values stay text, as argparse leaves them:
    ``load`` checks them. tests/minibroker/test_cli_fast_path.py holds this to argparse.
    """
    values: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--") or arg == "--":
            return None
        flag, eq, value = arg.partition("=")
        if flag in BY_FLAG:
            dest, optional = BY_FLAG[flag].dest, BY_FLAG[flag].optional_value
        elif flag in META_FLAGS:
            dest, optional = flag[2:].replace("-", "_"), False
        else:
            return None
        if not eq:
            # argparse decides what a following "-..." or a missing value means
            if optional or i + 1 == len(argv) or argv[i + 1].startswith("-"):
                return None
            i += 1
            value = argv[i]
        values[dest] = value
        i += 1
    ns = SimpleNamespace(properties=None, **dict.fromkeys(_ALL_DESTS))
    vars(ns).update(values)
    return ns


@dataclass
class Loaded:
    """What ``load`` read: the Config and what to log or wait for once logging is set up."""
    config: Config
    # (event, fields) to log once logging is configured: the configuration is read first.
    notes: list[tuple[str, dict]] = field(default_factory=list)
    config_file: Path | None = None
    wait_for_config: Path | None = None


@dataclass
class _Value:
    """An option's text as one source gave it, and that source for error lines."""
    text: str
    label: str                          # where it came from, for error lines
    parse: Callable[[str], object] | None = None   # overrides the option's parser
    scale: int = 1
    prop_rank: int = 1 << 30            # Kafka property priority: lower wins within a source
    prop: str | None = None             # the Kafka property it was given as


def _read_file(path: Path, problems: list[str]) -> list[tuple[int, str, str]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        problems.append(f"{path}: no such file")
    except IsADirectoryError:
        problems.append(f"{path}: is a directory, not a properties file")
    except (OSError, UnicodeDecodeError) as e:
        problems.append(f"{path}: cannot read it: {getattr(e, 'strerror', None) or e}")
    else:
        return parse_properties(text, str(path), problems)
    return []


class _Layer:
    """One source's values by option flag, plus the Kafka properties it set."""

    def __init__(self) -> None:
        self.values: dict[str, _Value] = {}
        self.listener_props: dict[str, str] = {}
        self.ignored: list[str] = []

    def add_kafka(self, prop: str, value: str, label: str) -> None:
        if prop in LISTENER_PROPERTIES:
            self.listener_props[prop] = value
            return
        m = KAFKA_PROPERTIES.get(prop)
        if m is None:
            self.ignored.append(prop)
            return
        # The first property listed for an option wins over later ones (ms over hours).
        rank = _RANK[prop]
        current = self.values.get(m.option)
        if current is not None and current.prop_rank < rank:
            return
        self.values[m.option] = _Value(value, label, _KAFKA_PARSE.get(prop), m.scale, rank, prop)


# What a label never shows the value of (Kafka's PASSWORD-type configs among minibroker's), by
# every name it may be given under: labels reach the log (config.values_overridden) and error lines.
SECRET_NAMES = frozenset({"delegation.token.secret.key", "MINIBROKER_DELEGATION_TOKEN_SECRET_KEY",
                          "KAFKA_DELEGATION_TOKEN_SECRET_KEY", "--delegation-token-secret-key"})


def _shown(name: str, value: str) -> str:
    return "'***'" if name in SECRET_NAMES else repr(value)


def _file_layer(path: Path, problems: list[str]) -> _Layer:
    layer = _Layer()
    env_names = {o.env: o for o in OPTIONS}
    for lineno, key, value in _read_file(path, problems):
        label = f"{path}:{lineno}: {key}={_shown(key, value)}"
        if key.startswith("MINIBROKER_"):
            o = env_names.get(key)
            if o is None:
                problems.append(f"{path}:{lineno}: {key} is not a minibroker option")
            else:
                layer.values[o.flag] = _Value(value, label)
        elif key.startswith("KAFKA_"):
            layer.add_kafka(env_to_property(key), value, label)
        else:
            layer.add_kafka(key, value, label)
    return layer


def _env_layers(env) -> tuple[_Layer, _Layer]:
    mini = _Layer()
    for o in OPTIONS:
        if o.env in env:
            mini.values[o.flag] = _Value(env[o.env], f"{o.env}={_shown(o.env, env[o.env])}")
    kafka = _Layer()
    for prop, (value, name) in sorted(kafka_env(env).items()):
        kafka.add_kafka(prop, value, f"{name}={_shown(name, value)}")
    return mini, kafka


def _cli_layer(ns: argparse.Namespace | SimpleNamespace) -> _Layer:
    layer = _Layer()
    for o in OPTIONS:
        text = getattr(ns, o.dest, None)
        if text is not None:
            layer.values[o.flag] = _Value(text, f"{o.flag} {_shown(o.flag, text)}")
    return layer


def _meta(ns: argparse.Namespace | SimpleNamespace, env, name: str, problems: list[str]) -> Path | None:
    text = getattr(ns, name, None)
    label = "--" + name.replace("_", "-")
    if text is None:
        var = "MINIBROKER_" + name.upper()
        text, label = env.get(var), var
    if text is None:
        return None
    if not text.strip():
        problems.append(f"{label}: empty path")
        return None
    return Path(text)


def load(ns: argparse.Namespace | SimpleNamespace, env=None, *, read_wait_file: bool = False) -> Loaded:
    """The configuration from every source, or ``ConfigError`` listing every problem.

    ``read_wait_file``: also read the ``--wait-for-config`` file (which must exist by now).
    """
    env = os.environ if env is None else env
    problems: list[str] = []
    config_file = _meta(ns, env, "config", problems)
    positional = getattr(ns, "properties", None)
    if positional is not None:
        if config_file is not None and getattr(ns, "config", None) is not None:
            problems.append("give the properties file once: as --config or as the argument")
        config_file = Path(positional)
    wait_file = _meta(ns, env, "wait_for_config", problems)

    mini_env, kafka_env_layer = _env_layers(env)
    layers = [_cli_layer(ns)]
    if read_wait_file and wait_file is not None:
        layers.append(_file_layer(wait_file, problems))
    layers += [kafka_env_layer, mini_env]
    if config_file is not None:
        layers.append(_file_layer(config_file, problems))

    values: dict[str, object] = {}
    used: set[str] = set()
    overridden = []
    for o in OPTIONS:
        given = [lay.values[o.flag] for lay in layers if o.flag in lay.values]
        if not given:
            values[o.dest] = o.default
            continue
        source = given[0]
        if source.prop:
            used.add(source.prop)
        # Say so when a lower source was overruled (the image's MINIBROKER_DATA_DIR over a
        # server.properties log.dirs): the first-wins rule should never surprise silently.
        overridden += [f"{source.label} over {lower.label}" for lower in given[1:]
                       if lower.text.strip() != source.text.strip()]
        parse = source.parse or o.parse
        try:
            value = parse(source.text)
            if source.scale != 1:
                # Kafka: a negative hours/minutes retention means forever, as -1 ms does.
                # Only the *.hours/*.minutes/*.ms properties scale, and they parse as ints.
                value = -1 if cast(int, value) < 0 else cast(int, value) * source.scale
                o.parse(str(value))       # the scaled value within the option's bounds
            values[o.dest] = value
        except ValueError as e:
            problems.append(f"{source.label}: {e}")
            values[o.dest] = o.default   # so that the listener checks below still run

    notes: list[tuple[str, dict]] = []
    listener_props: dict[str, str] = {}
    for lay in reversed(layers):
        listener_props.update(lay.listener_props)
    if listener_props:
        for flag, dest in (("--listeners", "listeners"),
                           ("--advertised-listeners", "advertised_listeners")):
            if values.get(dest):
                try:
                    kept, dropped = filter_listeners(
                        cast(str, values[dest]), listener_props.get("listener.security.protocol.map"),
                        listener_props.get("controller.listener.names"), flag)
                except PropertiesError as e:
                    problems.append(str(e))
                    continue
                values[dest] = kept or None
                if dropped and flag == "--listeners":
                    notes.append(("config.controller_listeners_dropped",
                                  {"names": dropped,
                                   "reason": "minibroker has no controller quorum"}))
        if listener_props.get("listener.security.protocol.map") and not values.get(
                "listener_security_protocol_map"):
            values["listener_security_protocol_map"] = listener_props["listener.security.protocol.map"]
    ignored = sorted({p for lay in layers for p in lay.ignored})
    if ignored:
        notes.append(("config.kafka_properties_ignored",
                      {"properties": ignored, "reason": "no minibroker equivalent"}))
    if used:
        notes.append(("config.kafka_properties_applied", {"properties": sorted(used)}))
    if overridden:
        notes.append(("config.values_overridden", {"values": overridden}))
    release = cast("str | None", values.get("as_version"))
    if release is not None and int(release.split(".")[0]) < 4:
        # A pre-4.0 broker finalized neither feature (config/as_version.py).
        for name in ("transaction_version", "group_version"):
            if values.get(name):
                problems.append(f"--{name.replace('_', '-')} {values[name]}: Kafka {release} had no "
                                f"such feature level; with --as-version {release} it is 0")
            values[name] = 0
    racks = cast("tuple[str, ...]", values.get("broker_rack") or ())
    if len(racks) > 1 and len(racks) != values.get("brokers", 1):
        problems.append(f"--broker-rack: {len(racks)} racks for {values.get('brokers', 1)} broker(s); give "
                        "one for all or one each")
    try:
        config = _build(values)
    except ListenerError as e:
        problems.append(_listener_source(str(e), layers))
    if problems:
        raise ConfigError(problems)
    return Loaded(config, notes, config_file, wait_file)


def _listener_source(message: str, layers: list[_Layer]) -> str:
    """A listener error names the option; say where the listener list came from too."""
    for flag in ("--listeners", "--advertised-listeners"):
        if message.startswith(flag):
            source = next((lay.values[flag] for lay in layers if flag in lay.values), None)
            if source is not None and not source.label.startswith(flag):
                return f"{source.label}: {message}"
    return message


def _build(v: dict) -> Config:
    listeners_text, advertised_text = v["listeners"], v["advertised_listeners"]
    if advertised_text and not listeners_text and not (v["advertised_host"] or v["advertised_port"]):
        # Kafka's listeners default is PLAINTEXT://:9092; here it is the --host/--port listener.
        listeners_text = f"PLAINTEXT://{'[' + v['host'] + ']' if ':' in v['host'] else v['host']}:{v['port']}"
    listeners = resolve(listeners_text, advertised_text, host=v["host"], port=v["port"],
                        advertised_host=v["advertised_host"] or None,
                        advertised_port=v["advertised_port"] or None,
                        protocol_map=v["listener_security_protocol_map"])
    if any(listener.tls for listener in listeners) and not (v["ssl_certfile"] and v["ssl_keyfile"]):
        raise ListenerError("--listeners: an SSL listener needs --ssl-certfile and --ssl-keyfile "
                            "(PEM; 'minibroker certs DIR' writes a throw-away pair)")
    mechanisms = [m.strip().upper() for m in v["sasl_mechanisms"].split(",") if m.strip()]
    unknown = [m for m in mechanisms if m not in SASL_MECHANISMS]
    if unknown or not mechanisms:
        raise ListenerError(f"--sasl-mechanisms: {', '.join(unknown) or 'none given'}; minibroker "
                            f"serves {', '.join(SASL_MECHANISMS)}")
    v["sasl_mechanisms"] = ",".join(dict.fromkeys(mechanisms))
    registry = v["schema_registry_listener"]
    if registry is not None and registry[0] == "https" and not (v["ssl_certfile"] and v["ssl_keyfile"]):
        raise ListenerError("--schema-registry-listener https:// needs --ssl-certfile and --ssl-keyfile")
    if v["schema_registry_auth"] == "basic" and not v["sasl_users"]:
        raise ListenerError("--schema-registry-auth basic checks passwords against --sasl-users, "
                            "which is not set")
    if v["ssl_client_auth"] != "none" and not v["ssl_cafile"]:
        raise ListenerError(f"--ssl-client-auth {v['ssl_client_auth']}: client certificates "
                            "are checked against --ssl-cafile, which is not set")
    fields = {k: val for k, val in v.items() if k not in ("listeners", "advertised_listeners")}
    fields["advertised_host"] = v["advertised_host"] or None
    fields["advertised_port"] = v["advertised_port"] or None
    return Config(listeners=listeners if listeners_text else (), **fields)


def config_from_args(ns: argparse.Namespace, env=None) -> Config:
    """Raises ``ConfigError`` (every problem, one line each)."""
    return load(ns, env).config

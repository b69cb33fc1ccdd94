"""Kafka's own configuration names, read where they mean what a minibroker option means.

Two sources speak them: a ``server.properties`` file (as ``kafka-server-start.sh`` takes it)
and ``KAFKA_*`` environment variables, named the way the apache/kafka image turns them into
properties (docker/resources/common-scripts/configure in apache/kafka: ``_`` is ``.``, ``__``
is ``_``, ``___`` is ``-``, lower-cased). Properties minibroker has no use for are reported
once and ignored, so an environment written for apache/kafka starts unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kafka property -> minibroker option, and how the value converts. Where several properties
# set one option, the first one present wins, as in Kafka (log.retention.ms over .minutes
# over .hours; KafkaConfig.logRetentionTimeMillis).
_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000


@dataclass(frozen=True)
class Mapping:
    """How one Kafka property maps onto a minibroker option."""
    option: str            # the minibroker option, "--num-partitions"
    scale: int = 1         # hours/minutes properties turn into milliseconds


KAFKA_PROPERTIES: dict[str, Mapping] = {
    "listeners": Mapping("--listeners"),
    "advertised.listeners": Mapping("--advertised-listeners"),
    "log.dirs": Mapping("--data-dir"),
    "log.dir": Mapping("--data-dir"),
    "node.id": Mapping("--node-id"),
    "broker.id": Mapping("--node-id"),
    "num.partitions": Mapping("--num-partitions"),
    "default.replication.factor": Mapping("--default-replication-factor"),
    "auto.create.topics.enable": Mapping("--auto-create-topics"),
    "min.insync.replicas": Mapping("--min-insync-replicas"),
    "broker.rack": Mapping("--broker-rack"),
    "replica.selector.class": Mapping("--replica-selector-class"),
    "log.flush.interval.ms": Mapping("--fsync"),
    "log.segment.bytes": Mapping("--segment-bytes"),
    "log.roll.ms": Mapping("--segment-ms"),
    "log.roll.hours": Mapping("--segment-ms", _HOUR_MS),
    "log.retention.ms": Mapping("--retention-ms"),
    "log.retention.minutes": Mapping("--retention-ms", _MINUTE_MS),
    "log.retention.hours": Mapping("--retention-ms", _HOUR_MS),
    "log.retention.bytes": Mapping("--retention-bytes"),
    "log.retention.check.interval.ms": Mapping("--retention-check-interval-ms"),
    "log.cleaner.enable": Mapping("--log-cleaner-enable"),
    "ssl.client.auth": Mapping("--ssl-client-auth"),
    "sasl.enabled.mechanisms": Mapping("--sasl-mechanisms"),
    "connections.max.reauth.ms": Mapping("--connections-max-reauth-ms"),
    "super.users": Mapping("--super-users"),
    "authorizer.class.name": Mapping("--authorizer"),
    "allow.everyone.if.no.acl.found": Mapping("--allow-everyone-if-no-acl-found"),
    "offsets.topic.segment.bytes": Mapping("--offsets-topic-segment-bytes"),
    "transaction.state.log.segment.bytes": Mapping("--transaction-state-log-segment-bytes"),
    "log.cleaner.backoff.ms": Mapping("--log-cleaner-backoff-ms"),
    "producer.id.expiration.ms": Mapping("--producer-id-expiration-ms"),
    "producer.id.expiration.check.interval.ms": Mapping("--producer-id-expiration-check-interval-ms"),
    "transaction.max.timeout.ms": Mapping("--transaction-max-timeout-ms"),
    "transactional.id.expiration.ms": Mapping("--transactional-id-expiration-ms"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms":
        Mapping("--transaction-abort-check-interval-ms"),
    "transaction.remove.expired.transaction.cleanup.interval.ms":
        Mapping("--transactional-id-expiration-check-interval-ms"),
    "group.initial.rebalance.delay.ms": Mapping("--group-initial-rebalance-delay-ms"),
    "group.consumer.session.timeout.ms": Mapping("--group-consumer-session-timeout-ms"),
    "group.consumer.heartbeat.interval.ms": Mapping("--group-consumer-heartbeat-interval-ms"),
    "group.consumer.assignment.interval.ms": Mapping("--group-consumer-assignment-interval-ms"),
    "errors.deadletterqueue.auto.create.topics.enable":
        Mapping("--errors-deadletterqueue-auto-create-topics-enable"),
    "errors.deadletterqueue.topic.name.prefix": Mapping("--errors-deadletterqueue-topic-name-prefix"),
    "message.max.bytes": Mapping("--message-max-bytes"),
    "log.message.timestamp.type": Mapping("--log-message-timestamp-type"),
    "log.message.timestamp.before.max.ms": Mapping("--log-message-timestamp-before-max-ms"),
    "log.message.timestamp.after.max.ms": Mapping("--log-message-timestamp-after-max-ms"),
    "socket.request.max.bytes": Mapping("--max-request-bytes"),
    "queued.max.request.bytes": Mapping("--queued-max-request-bytes"),
    "telemetry.max.bytes": Mapping("--telemetry-max-bytes"),
    "delegation.token.secret.key": Mapping("--delegation-token-secret-key"),
    "delegation.token.max.lifetime.ms": Mapping("--delegation-token-max-lifetime-ms"),
    "delegation.token.expiry.time.ms": Mapping("--delegation-token-expiry-time-ms"),
    "delegation.token.expiry.check.interval.ms": Mapping("--delegation-token-expiry-check-interval-ms"),
    # Confluent Schema Registry's own name for its listener (schema-registry.properties)
    "schema.registry.listeners": Mapping("--schema-registry-listener"),
}

# Read to shape the listener list, not options of their own.
LISTENER_PROPERTIES = ("listener.security.protocol.map", "controller.listener.names")

# KAFKA_* variables of the apache/kafka image that are not broker properties (its launch
# scripts read them), so they are neither mapped nor reported.
NOT_PROPERTIES = frozenset({
    "KAFKA_HEAP_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_OPTS",
    "KAFKA_JMX_OPTS", "KAFKA_OPTS", "KAFKA_DEBUG", "KAFKA_VERSION", "KAFKA_HOME",
    "KAFKA_LOG4J_LOGGERS", "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    "KAFKA_CLUSTER_ID", "KAFKA_LOG_DIR", "KAFKA_JMX_PORT", "KAFKA_JMX_HOSTNAME",
})


class PropertiesError(ValueError):
    pass


def env_to_property(name: str) -> str:
    """``KAFKA_LOG_SEGMENT_BYTES`` -> ``log.segment.bytes`` (apache/kafka's image rule)."""
    body = name[len("KAFKA_"):]
    # Placeholders first, so that the single-underscore rule does not eat the longer ones.
    body = body.replace("___", "\0DASH\0").replace("__", "\0UNDER\0").replace("_", ".")
    return body.replace("\0DASH\0", "-").replace("\0UNDER\0", "_").lower()


def kafka_env(env) -> dict[str, tuple[str, str]]:
    """property -> (value, variable name) for every ``KAFKA_*`` variable that is a property."""
    out = {}
    for name, value in env.items():
        if name.startswith("KAFKA_") and name not in NOT_PROPERTIES and len(name) > 6:
            out[env_to_property(name)] = (value, name)
    return out


def parse_properties(text: str, source: str,
                     problems: list[str] | None = None) -> list[tuple[int, str, str]]:
    """(line number, key, value) of a Java ``.properties`` text: ``#``/``!`` comments, ``=``,
    ``:`` or blank as separator, a trailing backslash continues the line. An ``export`` in
    front of a key is dropped, so a shell-style ``export KAFKA_X=...`` file reads too.
    A line that is no KEY=VALUE goes to ``problems`` (raises without it); the rest are read."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        lineno, line = i + 1, lines[i].strip()
        i += 1
        while line.endswith("\\") and not line.endswith("\\\\") and i < len(lines):
            line = line[:-1] + lines[i].strip()
            i += 1
        if not line or line[0] in "#!":
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        cut = min((p for p in (line.find("="), line.find(":"), line.find(" "), line.find("\t"))
                   if p >= 0), default=-1)
        if cut <= 0:
            problem = f"{source}:{lineno}: {line!r} is not KEY=VALUE"
            if problems is None:
                raise PropertiesError(problem)
            problems.append(problem)
            continue
        key, rest = line[:cut].strip(), line[cut:].lstrip()
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip()
        out.append((lineno, key, _unquote(rest)))
    return out


def _unquote(value: str) -> str:
    # A shell-style line quotes its value; Java properties never do, so this is unambiguous
    # enough for the values minibroker reads (numbers, paths, listener lists).
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def filter_listeners(listeners: str, protocol_map: str | None,
                     controller_names: str | None, label: str) -> tuple[str, list[str]]:
    """The listeners a client may use: controller listeners dropped (minibroker has no
    controller quorum). Returns the list and the names dropped; each listener's protocol is
    checked with the map when the listeners are resolved (listeners.resolve)."""
    for pair in (protocol_map or "").split(","):
        if pair.strip() and ":" not in pair:
            raise PropertiesError(f"{label}: listener.security.protocol.map entry {pair!r} "
                                  "is not NAME:PROTOCOL")
    controllers = {n.strip().upper() for n in (controller_names or "").split(",") if n.strip()}
    kept, dropped = [], []
    for item in (p.strip() for p in listeners.split(",")):
        if not item:
            continue
        name = item.partition("://")[0].strip().upper()
        if name in controllers:
            dropped.append(name)
            continue
        kept.append(item)
    return ",".join(kept), dropped

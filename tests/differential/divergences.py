"""Where minibroker answers differently from Apache Kafka ON PURPOSE — the one list.

The normaliser (tests/differential/normalise.py) reads this list and nothing else: every
difference not explained here fails the differential test and is a bug. Each entry names
the API and the field path it affects, and why minibroker differs.

A field path is a tuple of field names from the response's root, with ``*`` for any element
of a list; the normaliser drops that field from both answers before comparing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Divergence:
    api_key: int
    path: tuple[str, ...]
    reason: str
    # When set, only these values are rewritten (on both sides) instead of dropping the field:
    # a divergence in one error code then hides no other error at that field.
    replace: tuple[tuple[object, object], ...] = ()


DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(22, ("error_code",),
               "after a transaction timeout fenced epoch 32766 to 32767, InitProducerId(pid, 32766): "
               "Kafka 4.4.0 answers UNKNOWN_SERVER_ERROR (-1) (an IllegalStateException inside "
               "TransactionMetadata.prepareIncrementProducerEpoch, logged by nothing), minibroker "
               "PRODUCER_FENCED (90): that instance was fenced, and 90 is what a client can act on",
               replace=((-1, 90),)),
    # DescribeQuorum (55): minibroker has no metadata log (see the feature epoch note below); it
    # reports the finalized features' epoch as the one voter's log end and high watermark, and
    # "now" as its fetch times, where Kafka reports its metadata log's offsets and the times its
    # controller last fetched. tests/differential/test_cluster_apis.py checks their shape.
    Divergence(55, ("topics", "*", "partitions", "*", "high_watermark"),
               "no metadata log: the quorum's offsets are the finalized features' epoch"),
    Divergence(55, ("topics", "*", "partitions", "*", "current_voters", "*", "log_end_offset"),
               "no metadata log: the quorum's offsets are the finalized features' epoch"),
    Divergence(55, ("topics", "*", "partitions", "*", "current_voters", "*", "last_fetch_timestamp"),
               "a time: when the voter last fetched (now, for minibroker's one process)"),
    Divergence(55, ("topics", "*", "partitions", "*", "current_voters", "*", "last_caught_up_timestamp"),
               "a time: when the voter last caught up (now, for minibroker's one process)"),
)


# Requests minibroker refuses on purpose where Kafka accepts them. The differential tests do not
# send these to the pair; tests/differential/test_client_metrics.py checks the refusal itself.
REFUSED_ON_PURPOSE: dict[str, str] = {
    "IncrementalAlterConfigs on BROKER and BROKER_LOGGER resources, AlterConfigs on BROKER resources":
        "Kafka changes dynamic broker and logger configs at runtime; minibroker's broker settings "
        "are start-up options, and storing a value it would not honour would lie to the tool that "
        "set it. It answers INVALID_REQUEST naming the reason; topic configs, group configs and "
        "client metrics subscriptions are altered as Kafka alters them. A broker change that sets "
        "nothing (deleting configs, as kafka-reassign-partitions.sh --verify clears its throttles) "
        "is accepted: none is ever set, so it is the no-op it is on Kafka.",
}


# UnregisterBroker (64) of a registered broker: Kafka drops the registration, and a broker still
# running is then refused by the controller (STALE_BROKER_EPOCH) and gone from Metadata until it
# restarts. minibroker answers the same (NONE) for one of its (virtual) brokers, which stays: it is
# part of the one process. An unknown id is BROKER_ID_NOT_REGISTERED on both (the differential test
# never unregisters the reference Kafka's own broker, which would take it out of the session).
UNREGISTER_BROKER = "a registered broker is answered NONE and stays registered"


# Configurations minibroker accepts on purpose where Kafka refuses to start.
ACCEPTED_ON_PURPOSE: dict[str, str] = {
    "Listener names without listener.security.protocol.map":
        "Kafka refuses a listener name that its protocol map lacks (the default map names only "
        "PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL), so INTERNAL://... needs "
        "INTERNAL:PLAINTEXT. minibroker served every listener as PLAINTEXT before it had TLS, and "
        "compose files (docker/compose.yaml) name theirs INTERNAL/EXTERNAL without a map: without "
        "a map, such names stay PLAINTEXT. Given a map, Kafka's rule applies "
        "(tests/minibroker/test_listeners.py).",
}


# ACLs (minibroker/security/acl, tests/differential/test_acls.py compares the rest exactly): where the
# authorizer differs from Kafka's StandardAuthorizer on purpose.
ACL_DIFFERENCES: dict[str, str] = {
    "An ACL whose principal has no ':'":
        "Kafka stores it (CreateAcls succeeds) and then fails every authorization of an action on "
        "a resource the ACL applies to (StandardAcl.kafkaPrincipal throws IllegalStateException, "
        "the request answers an unknown server error). minibroker stores it too but never matches "
        "it: one mistyped ACL does not take a topic down for every client.",
    "When an ACL change applies":
        "Kafka's CreateAcls/DeleteAcls answer once the controller has the change; the broker's "
        "authorizer applies it a moment later (the metadata log), so a request right after may "
        "still be judged by the old ACLs. minibroker's answer comes after acls.json is written "
        "and the change applies at once. The differential test waits for Kafka's DescribeAcls to "
        "show the change before it uses it.",
    "Host of an IPv6 client":
        "Kafka compares an ACL's host with InetAddress.getHostAddress() (\"0:0:0:0:0:0:0:1\"), "
        "minibroker with the socket's address as Python gives it (\"::1\"). IPv4 hosts are "
        "the same text in both.",
}


# Differences found and reported as minibroker BUGS, not yet fixed. Never applied by default:
# ``MINIBROKER_DIFFERENTIAL_LOOK_PAST=name,name`` drops them for one local run, so a developer can
# look for the next divergence while one is being fixed. Remove an entry once it is fixed.
# (Fixed so far: describe-txn-not-found-ids, txn-offset-commit-fenced-code,
# produce-error-log-start-offset, txn-batch-without-pid.)
OPEN_BUGS: dict[str, tuple[Divergence, ...]] = {
}


def _looked_past() -> list[Divergence]:
    names = [n for n in os.environ.get("MINIBROKER_DIFFERENTIAL_LOOK_PAST", "").split(",") if n]
    unknown = [n for n in names if n not in OPEN_BUGS]
    if unknown:
        raise ValueError(f"MINIBROKER_DIFFERENTIAL_LOOK_PAST names no open bug: {unknown}; "
                         f"known: {sorted(OPEN_BUGS)}")
    return [d for n in names for d in OPEN_BUGS[n]]


def looked_past(name: str) -> bool:
    return name in os.environ.get("MINIBROKER_DIFFERENTIAL_LOOK_PAST", "").split(",")


def applicable(api_key: int) -> list[Divergence]:
    return [d for d in (*DIVERGENCES, *_looked_past()) if d.api_key == api_key]


# ApiVersions' features (KIP-584): minibroker lists only the features it implements —
# metadata.version, kraft.version and eligible.leader.replicas.version
# describe KRaft and ELR, which a single-process broker without those APIs does
# not have, and a client that saw them finalized would assume APIs that are not there.
# tests/differential/test_features.py compares the finalized levels of these features and
# checks the others are absent (share.version: test_share_version.py too).
# streams.version (KIP-1071 streams groups) is served: finalized 1, as Kafka 4.4 finalizes it.
FEATURES_MINIBROKER_SERVES = ("transaction.version", "group.version", "share.version",
                              "streams.version")
#
# KIP-1071 streams groups (tests/differential/test_streams_groups.py compares the rest exactly):
# - Membership and topology are not written to __consumer_offsets (Kafka writes the
#   StreamsGroup* records): after a restart a member's heartbeat is answered UNKNOWN_MEMBER_ID and
#   Kafka Streams rejoins at epoch 0 with its topology; a leave into such a group succeeds (on
#   Kafka the member would still be known).
# - The sticky task assignor walks members (by member id) and tasks (by subtopology, partition)
#   in sorted order; Kafka's StickyTaskAssignor walks hash maps and weighs process capacity.
#   Balance (overall and per subtopology) and stickiness are the same, and a second member's
#   join places tasks as Kafka does (test_offsets_delete_groups_and_a_second_member); in larger
#   groups which member gets which task may differ.
# - Group epochs move by the same rules as on Kafka (join, the initial delay's bump, the internal
#   topics' creation); Kafka may bump once per created topic when its metadata image sees them
#   one by one, so a test compares epochs only where both are determined.
# - Topology descriptions (KIP-1331, API 93) need a broker plugin Kafka 4.4 ships none of; both
#   brokers answer as Kafka 4.4 without one.
#
# KIP-848 consumer groups (tests/differential/test_consumer_groups.py compares the rest exactly):
# - Membership is not written to __consumer_offsets (Kafka writes ConsumerGroupMetadata, member,
#   target and current-assignment records): after a restart minibroker knows a consumer group's
#   committed offsets but not its members, so a member's heartbeat is answered UNKNOWN_MEMBER_ID
#   and the client rejoins at epoch 0 (where Kafka would have gone on at the member's epoch).
# - Online migration between protocols (group.consumer.migration.policy, Kafka's default
#   bidirectional) is not done: a classic JoinGroup into a consumer group with members is
#   INCONSISTENT_GROUP_PROTOCOL, a ConsumerGroupHeartbeat into a classic group with members is
#   GROUP_ID_NOT_FOUND ("Group X is not a consumer group."), as Kafka answers with migration
#   disabled. Empty groups of either kind convert, as in Kafka.
# - The uniform assignor places partitions walking members and topics in sorted order; Kafka walks
#   hash maps. Balance and stickiness are the same; which member gets the extra partition may
#   differ, so the differential scripts compare uniform placements only where they are determined.
# - A subscription regex is resolved at the group's next heartbeat; Kafka resolves it in the
#   background and applies it at the first heartbeat after that — the same answers unless a
#   heartbeat comes within the milliseconds the resolution takes.
#
# The finalized features epoch: Kafka reports its metadata image's offset, which any metadata
# record moves (a topic created, a controller's no-op record); minibroker has no metadata log
# and counts feature changes, persisted in the data dir. Both are ≥ 0 and never go back, and both
# move when a change is committed — what a client relies on (the Java client ignores levels
# whose epoch is older than one it saw).


# ApiVersions (tests/differential/test_api_versions_vs_kafka.py compares the reference Kafka's
# answer with minibroker's key by key, version by version): the keys Kafka 4.4 advertises that
# minibroker does not serve, on purpose.
API_KEYS_NOT_SERVED: dict[int, str] = {
    80: "AddRaftVoter: KRaft controller quorum membership (KIP-853); minibroker is a one-voter "
        "quorum with no controller listener, there is no voter to add",
    81: "RemoveRaftVoter: as AddRaftVoter, no voter to remove",
    94: "UnregisterController: controller registrations (KIP-853); no controller to unregister",
    83: "InitializeShareGroupState: Kafka's brokers call their share coordinator with it; "
        "minibroker's share coordinator runs in the one process and is called directly",
    84: "ReadShareGroupState: broker-to-share-coordinator, as InitializeShareGroupState",
    85: "WriteShareGroupState: broker-to-share-coordinator, as InitializeShareGroupState",
    86: "DeleteShareGroupState: broker-to-share-coordinator, as InitializeShareGroupState",
    87: "ReadShareGroupStateSummary: broker-to-share-coordinator, as InitializeShareGroupState",
}

# Keys both serve whose advertised range differs on purpose: key -> (minibroker's (min, max),
# why). The comparison checks minibroker advertises exactly this range.
API_VERSION_RANGES: dict[int, tuple[tuple[int, int], str]] = {
    0: ((3, 13), "Produce: Kafka 4 serves v3-13 but advertises v0 as the minimum "
                 "(ApiKeys.toApiVersion, KAFKA-18659: librdkafka before 2.x sends compressed "
                 "batches only to a broker advertising v0) and answers v0-2 UNSUPPORTED_VERSION; "
                 "minibroker advertises what it serves"),
}

# GetTelemetrySubscriptions (71) and PushTelemetry (72): Kafka advertises them only with a
# client metrics receiver (metric.reporters with a ClientTelemetry implementation); minibroker's
# receiver is its console, so it serves them with --client-telemetry on (auto: with a
# --control-listener). The differential pair configures both alike (settings.telemetry_sink), and
# the comparison then expects them on both or on neither.
TELEMETRY_API_KEYS = (71, 72)


# The AVRO schema format against Apache Avro 1.12 Java (tests/differential/test_avro_java.py):
# where minibroker.registry.formats.avro answers differently on purpose, and why.
AVRO_DIVERGENCES: dict[str, str] = {
    "placeholder numbers":
        "a name used before its definition parses to a placeholder record that Java numbers "
        "JVM-wide (UnresolvedSchema_<n>); the number shows only in the message of an error about "
        "the union holding it (Nested union: ...), and depends on how many schemas the JVM parsed "
        "before. The test compares those messages with the number masked.",
    "JSON syntax errors":
        "a schema that is not JSON at all: Java's message is Jackson's (with its source excerpt and "
        "line/column), ours is Python's json decoder's prefixed \"Invalid JSON: \"; the registry "
        "answers 42201 either way. The generator writes only well-formed JSON.",
    "JDK 17 numbers":
        "a double in a default or a property is written as JDK 19+'s Double.toString writes it "
        "(the shortest decimal, at least two digits: 1.0E23, 9.9E-323); JDK 17's older algorithm "
        "writes a few values longer (9.999999999999999E22) or differently (1.0E-322). Same double "
        "either way; with JDK 17 the test compares such strings as JSON values.",
    "lone surrogates":
        "a string with a lone UTF-16 surrogate (an unpaired \\ud800 escape): Java's toString "
        "writes the char raw, which is not UTF-8; ours keeps it escaped so the canonical string "
        "can be stored and served.",
}

"""ACLs against Kafka 4.4's StandardAuthorizer: the same ACLs on both brokers, the same
requests, the answers compared.

Both brokers of the pair run the authorizer with User:ANONYMOUS (the PLAINTEXT listener) and
User:admin super users (tests/reference/settings.py); alice and bob log in with SASL PLAIN on
each broker's SASL_PLAINTEXT listener, so their requests are authorized against the ACLs the
super user creates here:

* CreateAcls, DescribeAcls and DeleteAcls answers, valid and invalid (a CLUSTER name other
  than kafka-cluster, an empty name, MATCH/ANY in a binding, an UNKNOWN code, which closes the
  connection), and who may call them;
* the transactional checks: a producer without WRITE on its transactional id
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), one without WRITE on a topic inside its transaction
  (AddPartitionsToTxn: TOPIC_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED for the rest), an
  idempotent producer without IDEMPOTENT_WRITE or WRITE on any topic
  (CLUSTER_AUTHORIZATION_FAILED), a transactional Produce without a transactional id;
* what a consumer and Metadata see.

Every resource name starts with the test's own prefix and every ACL made is deleted after it,
as the session's Kafka is shared. Kafka applies an ACL on the broker a moment after CreateAcls
answers (the controller's record reaches the broker's authorizer through the metadata log), so
each change is waited for with DescribeAcls before the ACL is used.
"""

from __future__ import annotations

import datetime
import time

import pytest

from minibroker_protocol.records import build_batch
from tests.reference.client import ConnectionClosed, SaslPlainConnection, part, req
from tests.reference.settings import SASL_USERS

from .normalise import normalise
from .pair import Divergence, Pair

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
FIND_COORDINATOR, JOIN_GROUP = 10, 11
INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 22, 24, 25, 26
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31

# Kafka's codes (org.apache.kafka.common.acl / resource)
ANY_TYPE, TOPIC, GROUP, CLUSTER, TXN_ID = 1, 2, 3, 4, 5
ANY_PATTERN, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ANY_OP, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
IDEMPOTENT_WRITE = 12
ANY_PERM, DENY, ALLOW = 1, 2, 3

P = "acl-diff-"  # every resource of this module starts with it


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


@pytest.fixture
def pair(differential_pair):
    p: Pair = differential_pair
    if p.sasl is None:
        pytest.skip("the pair has no SASL_PLAINTEXT listeners")
    # no other test makes ACLs: each test starts and ends with none on either broker
    for s in p.sides:
        s.call(_delete_req([_filter()]))
    _settle(p)
    yield p
    for s in p.sides:
        s.call(_delete_req([_filter()]))
    _settle(p)


class Users:
    """One SASL connection per (user, broker), opened on first use."""

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.conns: dict[tuple[str, int], SaslPlainConnection] = {}

    def both(self, user: str, make) -> tuple:
        out = []
        for i, (host, port) in enumerate(self.pair.sasl):
            key = (user, i)
            if key not in self.conns:
                self.conns[key] = SaslPlainConnection(host, port, user, SASL_USERS[user])
            out.append(_outcome(self.conns[key], make(self.pair.sides[i])))
        return tuple(out)

    def settled(self, user: str, make, retriable=(14, 15, 51), timeout: float = 30, passing=None) -> tuple:
        """``both``, a side asked again while it answers a passing error (a coordinator still
        loading after its topic was made): what a client's retries hide."""
        out = []
        for i, (host, port) in enumerate(self.pair.sasl):
            key = (user, i)
            if key not in self.conns:
                self.conns[key] = SaslPlainConnection(host, port, user, SASL_USERS[user])
            deadline = time.monotonic() + timeout
            while True:
                a = _outcome(self.conns[key], make(self.pair.sides[i]))
                again = passing(a) if passing else getattr(a, "error_code", 0) in retriable
                if not again or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            out.append(a)
        return tuple(out)

    def close(self) -> None:
        for c in self.conns.values():
            c.close()


@pytest.fixture
def users(pair):
    u = Users(pair)
    yield u
    u.close()


def _outcome(conn, entity):
    try:
        return conn.call(entity)
    except ConnectionClosed:
        return "connection closed"


def check(pair: Pair, what: str, answers) -> object:
    """Pair.check, with lists sorted: Kafka lists ACLs from hash sets."""
    k, m = answers
    if isinstance(k, (str, list)) or isinstance(m, (str, list)):  # an outcome or a projection
        if k != m:
            raise Divergence(f"{what}: Kafka {k!r}, minibroker {m!r}")
        return k
    nk = _sorted(normalise(k, pair.kafka.pids))
    nm = _sorted(normalise(m, pair.mini.pids))
    if nk != nm:
        raise Divergence(f"{what}: Kafka and minibroker answered differently:\n  Kafka      {nk}\n"
                         f"  minibroker {nm}")
    return nk


def _sorted(tree):
    if isinstance(tree, dict):
        return {k: _sorted(v) for k, v in tree.items()}
    if isinstance(tree, list):
        items = [_sorted(v) for v in tree]
        if all(isinstance(v, dict) for v in items) and any(
                "acls" in v or "operation" in v or "matching_acls" in v for v in items):
            return sorted(items, key=repr)
        return items
    return tree


# -- requests ---------------------------------------------------------------------------------

def _acl(resource=TOPIC, name=P + "t", pattern=LITERAL, principal="User:alice", host="*", op=READ,
         perm=ALLOW):
    return part((CREATE_ACLS, 3), "AclCreation", resource_type=resource, resource_name=name,
                resource_pattern_type=pattern, principal=principal, host=host, operation=op,
                permission_type=perm)


def _create_req(acls):
    return req(CREATE_ACLS, 3, creations=tuple(acls))


def _filter(resource=ANY_TYPE, name=None, pattern=ANY_PATTERN, principal=None, host=None, op=ANY_OP,
            perm=ANY_PERM):
    return dict(resource_type_filter=resource, resource_name_filter=name, pattern_type_filter=pattern,
                principal_filter=principal, host_filter=host, operation=op, permission_type=perm)


def _describe_req(f):
    return req(DESCRIBE_ACLS, 3, **f)


def _delete_req(filters):
    return req(DELETE_ACLS, 3, filters=tuple(part((DELETE_ACLS, 3), "DeleteAclsFilter", **f) for f in filters))


def grant(pair: Pair, *acls) -> None:
    """CreateAcls on both (as the PLAINTEXT super user), then until each broker applies them."""
    check(pair, f"create {len(acls)} ACLs", pair.both(lambda s: _create_req(acls)))
    _settle(pair)


def revoke(pair: Pair, *filters) -> None:
    check(pair, "delete ACLs", pair.both(lambda s: _delete_req(filters)))
    _settle(pair)


def _settle(pair: Pair) -> None:
    """Until Kafka's broker lists the ACLs minibroker has (DescribeAcls reads the broker's copy,
    which follows the controller's by a moment; minibroker's is immediate). A difference that
    stays is left for the next comparison to report."""
    want = _listing(pair.mini)
    deadline = time.monotonic() + 10
    while _listing(pair.kafka) != want and time.monotonic() < deadline:
        time.sleep(0.05)


def _listing(side):
    return _sorted(normalise(side.call(_describe_req(_filter())), side.pids))


def _init_pid(tid):
    return req(INIT_PRODUCER_ID, 5, transactional_id=tid, transaction_timeout=ms(60_000),
               producer_id=-1, producer_epoch=-1)


def _add_partitions(tid, pid, epoch, topics):
    base = (ADD_PARTITIONS, 3)
    return req(ADD_PARTITIONS, 3, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
               v3_and_below_producer_epoch=epoch, v3_and_below_topics=tuple(
                   part(base, "AddPartitionsToTxnTopic", name=t, partitions=tuple(ps)) for t, ps in topics))


def _produce(topic, blob, tid=None, version=9):
    base = (PRODUCE, version)
    pd = part(base, "PartitionProduceData", index=0, records=blob)
    td = part(base, "TopicProduceData", name=topic, partition_data=(pd,))
    return req(PRODUCE, version, transactional_id=tid, acks=-1, timeout=ms(5000), topic_data=(td,))


def _metadata(topics, auto=False):
    return req(METADATA, 12, topics=None if topics is None else tuple(
        part((METADATA, 12), "MetadataRequestTopic", name=t, topic_id=None) for t in topics),
        allow_auto_topic_creation=auto, include_topic_authorized_operations=True)


def _find_coordinator(key, key_type):
    return req(FIND_COORDINATOR, 3, key=key, key_type=key_type)


# -- the ACL APIs -------------------------------------------------------------------------------

def test_acl_apis_match_kafka(pair, users):
    for key in (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS):
        assert pair.kafka.versions[key] == pair.mini.versions[key], key
    creations = [
        _acl(),
        _acl(),  # the same twice: both succeed, one ACL
        _acl(name=P + "pre", pattern=PREFIXED, op=WRITE),
        _acl(name="*", principal="User:" + P + "nobody", op=DESCRIBE, perm=DENY),
        _acl(resource=GROUP, name=P + "g", op=ALL),
        _acl(resource=TXN_ID, name=P + "tx", op=WRITE, host="127.0.0.1"),
        _acl(resource=CLUSTER, name="kafka-cluster", principal="User:bob", op=IDEMPOTENT_WRITE),
        _acl(resource=CLUSTER, name=P + "not-the-cluster"),  # INVALID_REQUEST
        _acl(name=""),  # INVALID_REQUEST
    ]
    check(pair, "create ACLs, some invalid", pair.both(lambda s: _create_req(creations)))
    _settle(pair)
    for what, f in [
        ("all", _filter()),
        ("PREFIXED ones named exactly so", _filter(name=P + "pre", pattern=PREFIXED)),
        ("a literal name, ANY pattern", _filter(name=P + "t")),
        ("MATCH a topic name", _filter(resource=TOPIC, name=P + "pre-x", pattern=MATCH)),
        ("MATCH a name nothing names", _filter(resource=TOPIC, name="zzz-" + P, pattern=MATCH)),
        ("by principal and operation", _filter(principal="User:alice", op=WRITE)),
        ("by host (exact: '*' is not a wildcard here)", _filter(host="127.0.0.1")),
        ("deny only, all names", _filter(perm=DENY, principal="User:" + P + "nobody")),
        ("the cluster", _filter(resource=CLUSTER)),
    ]:
        check(pair, f"DescribeAcls {what}", pair.both(lambda s, f=f: _describe_req(f)))
    # a binding with MATCH or ANY: the whole request fails (UNKNOWN_SERVER_ERROR each)
    bad = [_acl(name=P + "ok"), _acl(name=P + "m", pattern=MATCH)]
    check(pair, "create with a MATCH pattern", pair.both(lambda s: _create_req(bad)))
    check(pair, "create with ANY operation", pair.both(lambda s: _create_req([_acl(name=P + "a", op=ANY_OP)])))
    # an unheard-of code reads as UNKNOWN: refused per binding or filter, matching nothing
    check(pair, "create with operation 99", pair.both(lambda s: _create_req([_acl(name=P + "u", op=99)])))
    check(pair, "create with resource type 99", pair.both(lambda s: _create_req([_acl(resource=99, name="u")])))
    check(pair, "describe with resource type 99", pair.both(lambda s: _describe_req(_filter(resource=99))))
    check(pair, "delete with operation 99", pair.both(lambda s: _delete_req([_filter(op=99), _filter(pattern=99)])))
    # UNKNOWN itself (0): Kafka cannot parse the request and closes the connection
    for what, make in [
        ("create with operation 0", lambda s: _create_req([_acl(name=P + "u", op=0)])),
        ("describe with resource type 0", lambda s: _describe_req(_filter(resource=0))),
        ("delete with permission 0", lambda s: _delete_req([_filter(perm=0)])),
    ]:
        check(pair, what, tuple(_outcome(s.conn, make(s)) for s in pair.sides))
    # nothing was created by the failed requests
    check(pair, "after the failures", pair.both(lambda s: _describe_req(_filter())))
    # alice is no super user: she may not list or change ACLs...
    check(pair, "alice describes", users.both("alice", lambda s: _describe_req(_filter())))
    check(pair, "alice creates", users.both("alice", lambda s: _create_req([_acl(name=P + "x")])))
    check(pair, "alice deletes", users.both("alice", lambda s: _delete_req([_filter()])))
    # ...until she has DESCRIBE, then ALTER, on the cluster
    grant(pair, _acl(resource=CLUSTER, name="kafka-cluster", op=DESCRIBE))
    check(pair, "alice describes with DESCRIBE",
          users.both("alice", lambda s: _describe_req(_filter())))
    check(pair, "alice creates with DESCRIBE only",
          users.both("alice", lambda s: _create_req([_acl(name=P + "x")])))
    grant(pair, _acl(resource=CLUSTER, name="kafka-cluster", op=ALTER))
    check(pair, "alice creates with ALTER", users.both("alice", lambda s: _create_req([_acl(name=P + "x")])))
    _settle(pair)
    # two filters matching the same ACL: both list it
    check(pair, "delete with overlapping filters", pair.both(lambda s: _delete_req([
        _filter(name=P + "t"), _filter(resource=TOPIC, name=P + "t", pattern=MATCH), _filter(name=P + "none")])))
    _settle(pair)
    check(pair, "delete the topic ACLs", pair.both(lambda s: _delete_req([_filter(resource=TOPIC)])))
    _settle(pair)
    check(pair, "what is left", pair.both(lambda s: _describe_req(_filter())))


# -- producers ------------------------------------------------------------------------------------

def test_transactional_checks_match_kafka(pair, users):
    t_ok, t_no = P + "txn-writable", P + "txn-not-writable"
    tid = P + "tx-1"
    pair.create_topics([t_ok, t_no], 1)
    pair.find_coordinators(P + "g", [tid])  # the internal topics exist on both before alice asks
    # no ACL at all: the transactional id is refused (FindCoordinator and InitProducerId),
    # and so is an idempotent producer
    check(pair, "alice FindCoordinator(txn) without ACLs", users.both("alice", lambda s: _find_coordinator(tid, 1)))
    check(pair, "alice InitProducerId(txn) without ACLs", users.both("alice", lambda s: _init_pid(tid)))
    check(pair, "alice InitProducerId(idempotent) without ACLs", users.both("alice", lambda s: _init_pid(None)))
    # WRITE on the id (implying DESCRIBE) and on one topic
    grant(pair, _acl(resource=TXN_ID, name=tid, op=WRITE), _acl(name=t_ok, op=WRITE))
    check(pair, "alice FindCoordinator(txn)", users.both("alice", lambda s: _find_coordinator(tid, 1)))
    got = users.settled("alice", lambda s: _init_pid(tid))
    check(pair, "alice InitProducerId(txn)", got)
    pids = {s.name: (r.producer_id, r.producer_epoch) for s, r in zip(pair.sides, got)}
    # the topic without WRITE fails the whole AddPartitionsToTxn
    check(pair, "alice AddPartitionsToTxn, one topic not writable", users.both(
        "alice", lambda s: _add_partitions(tid, *pids[s.name], [(t_ok, [0]), (t_no, [0])])))
    # a transactional Produce without a transactional id in the request
    blob = {s.name: build_batch([(b"k", b"v")], producer_id=pids[s.name][0], producer_epoch=pids[s.name][1],
                                base_sequence=0, transactional=True) for s in pair.sides}
    check(pair, "alice transactional Produce without a transactional id",
          users.both("alice", lambda s: _produce(t_ok, blob[s.name], tid=None)))
    check(pair, "alice transactional Produce to a topic not writable",
          users.both("alice", lambda s: _produce(t_no, blob[s.name], tid=tid)))
    # the writable one alone joins the transaction; produce, abort
    check(pair, "alice AddPartitionsToTxn, writable", users.both(
        "alice", lambda s: _add_partitions(tid, *pids[s.name], [(t_ok, [0])])))
    check(pair, "alice transactional Produce", users.both("alice", lambda s: _produce(t_ok, blob[s.name], tid=tid)))
    check(pair, "alice EndTxn(abort)", users.both("alice", lambda s: req(
        END_TXN, 4, transactional_id=tid, producer_id=pids[s.name][0], producer_epoch=pids[s.name][1],
        committed=False)))
    # bob has nothing on the id: every transactional API refuses him
    check(pair, "bob InitProducerId(txn)", users.both("bob", lambda s: _init_pid(tid)))
    check(pair, "bob AddPartitionsToTxn", users.both(
        "bob", lambda s: _add_partitions(tid, *pids[s.name], [(t_ok, [0])])))
    check(pair, "bob AddOffsetsToTxn", users.both("bob", lambda s: req(
        ADD_OFFSETS, 3, transactional_id=tid, producer_id=pids[s.name][0], producer_epoch=pids[s.name][1],
        group_id=P + "g")))
    check(pair, "bob EndTxn", users.both("bob", lambda s: req(
        END_TXN, 4, transactional_id=tid, producer_id=pids[s.name][0], producer_epoch=pids[s.name][1],
        committed=True)))
    # idempotent: WRITE on a topic is enough for alice (Kafka's authorizeByResourceType); bob
    # needs IDEMPOTENT_WRITE on the cluster, and a DENY on all topics takes the topic route away
    check(pair, "alice InitProducerId(idempotent) with a topic WRITE", users.both("alice", lambda s: _init_pid(None)))
    grant(pair, _acl(resource=CLUSTER, name="kafka-cluster", principal="User:bob", op=IDEMPOTENT_WRITE))
    check(pair, "bob InitProducerId(idempotent) with IDEMPOTENT_WRITE", users.both("bob", lambda s: _init_pid(None)))
    grant(pair, _acl(name=P + "b-", pattern=PREFIXED, principal="User:bob", op=WRITE),
          _acl(name=P + "b-x", principal="User:bob", op=WRITE, perm=DENY))
    revoke(pair, _filter(resource=CLUSTER, principal="User:bob"))
    check(pair, "bob InitProducerId(idempotent), prefix WRITE, one literal DENY",
          users.both("bob", lambda s: _init_pid(None)))
    grant(pair, _acl(name=P + "b", pattern=PREFIXED, principal="User:bob", op=WRITE, perm=DENY))
    check(pair, "bob InitProducerId(idempotent), the prefix denied by a shorter one",
          users.both("bob", lambda s: _init_pid(None)))


# -- consumers and Metadata -------------------------------------------------------------------------

def test_consumer_and_metadata_checks_match_kafka(pair, users):
    readable, hidden = P + "c-readable", P + "c-hidden"
    group = P + "c-group"
    pair.create_topics([readable, hidden], 1)
    grant(pair, _acl(name=readable, op=READ), _acl(name=P + "c-", pattern=PREFIXED, op=DESCRIBE, perm=DENY,
                                                      principal="User:bob"))
    check(pair, "alice Metadata of named topics", users.both(
        "alice", lambda s: _metadata([readable, hidden, P + "c-missing"], auto=True)))
    # auto-creation needs CREATE: on the topic (a prefix here) or the cluster
    grant(pair, _acl(name=P + "c-nocreate", op=DESCRIBE), _acl(name=P + "c-auto", pattern=PREFIXED, op=CREATE),
          _acl(name=P + "c-auto", pattern=PREFIXED, op=DESCRIBE))
    check(pair, "alice Metadata, auto-create without CREATE", users.both(
        "alice", lambda s: _metadata([P + "c-nocreate"], auto=True)))
    # with CREATE the topic is made; Kafka answers UNKNOWN_TOPIC_OR_PARTITION until its metadata
    # has it, minibroker the new topic at once: the ACL side (no TOPIC_AUTHORIZATION_FAILED, the
    # same authorized operations) is compared, then the topic once both list it
    first = users.both("alice", lambda s: _metadata([P + "c-auto-1"], auto=True))
    assert [(t.error_code != 29, t.topic_authorized_operations) for a in first for t in a.topics] == \
        [(True, first[0].topics[0].topic_authorized_operations)] * 2, first
    check(pair, "alice Metadata of the auto-created topic",
          users.settled("alice", lambda s: _metadata([P + "c-auto-1"]),
                        passing=lambda a: any(t.error_code != 0 or not t.partitions for t in a.topics)))
    check(pair, "bob Metadata of named topics (DENY DESCRIBE)", users.both(
        "bob", lambda s: _metadata([readable, hidden])))

    def fetch(s):
        base = (FETCH, 12)
        return req(FETCH, 12, replica_id=-1, max_wait=ms(0), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                   session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="", topics=tuple(
                       part(base, "FetchTopic", topic=t, partitions=(part(
                           base, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=0,
                           last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),))
                       for t in (readable, hidden, P + "c-missing")))
    check(pair, "alice Fetch", users.both("alice", fetch))

    def list_offsets(s):
        base = (LIST_OFFSETS, 7)
        return req(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=tuple(
            part(base, "ListOffsetsTopic", name=t, partitions=(
                part(base, "ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=-1),))
            for t in (hidden, readable)))
    check(pair, "alice ListOffsets", users.both("alice", list_offsets))
    check(pair, "alice FindCoordinator(group) without a group ACL",
          users.both("alice", lambda s: _find_coordinator(group, 0)))

    def offset_commit(s):
        base = (OFFSET_COMMIT, 8)
        return req(OFFSET_COMMIT, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                   group_instance_id=None, topics=tuple(part(base, "OffsetCommitRequestTopic", name=t, partitions=(
                       part(base, "OffsetCommitRequestPartition", partition_index=0, committed_offset=0,
                            committed_leader_epoch=-1, committed_metadata=""),)) for t in (readable, hidden)))

    def offset_fetch(s):
        base = (OFFSET_FETCH, 8)
        return req(OFFSET_FETCH, 8, require_stable=False, groups=(part(
            base, "OffsetFetchRequestGroup", group_id=group, topics=tuple(
                part(base, "OffsetFetchRequestTopics", name=t, partition_indexes=(0,)) for t in (readable, hidden))),))
    check(pair, "alice OffsetCommit without a group ACL", users.both("alice", offset_commit))
    check(pair, "alice OffsetFetch without a group ACL", users.both("alice", offset_fetch))
    grant(pair, _acl(resource=GROUP, name=group, op=READ))
    pair.find_coordinators(group, [])
    check(pair, "alice FindCoordinator(group)", users.both("alice", lambda s: _find_coordinator(group, 0)))
    check(pair, "alice OffsetCommit (one topic not readable)", users.both("alice", offset_commit))
    check(pair, "alice OffsetFetch (one topic not describable)", users.both("alice", offset_fetch))


# -- admin APIs ---------------------------------------------------------------------------------------

CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, DESCRIBE_CONFIGS, DESCRIBE_GROUPS, LIST_GROUPS = 19, 20, 21, 32, 15, 16
CREATE_PARTITIONS, DESCRIBE_LOG_DIRS, INCREMENTAL_ALTER_CONFIGS, OFFSET_FOR_LEADER_EPOCH = 37, 35, 44, 23
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
LIST_CONFIG_RESOURCES, ELECT_LEADERS, DESCRIBE_SCRAM, ALTER_SCRAM = 74, 43, 50, 51


def test_admin_checks_match_kafka(pair, users):
    mine, other = P + "adm-mine", P + "adm-other"
    group, tid = P + "adm-group", P + "adm-tx"
    pair.create_topics([mine, other], 1)
    pair.find_coordinators(group, [tid])
    pair.join_group(group, [mine])
    grant(pair, _acl(name=P + "adm-mine", pattern=PREFIXED, op=ALL),
          _acl(name=P + "adm-new-", pattern=PREFIXED, op=CREATE),
          _acl(resource=GROUP, name=group, op=DESCRIBE))

    def create_topics(s):
        base = (CREATE_TOPICS, 7)
        return req(CREATE_TOPICS, 7, timeout=ms(10_000), validate_only=False, topics=tuple(
            part(base, "CreatableTopic", name=n, num_partitions=1, replication_factor=1, assignments=(), configs=())
            for n in (P + "adm-new-1", P + "adm-nope", P + "adm-mine-2")))
    # adm-new-1: CREATE without DESCRIBE_CONFIGS (no configs shown); adm-mine-2: ALL. The config
    # list of a created topic is not the ACL's business (Kafka lists more of them): only
    # whether it is there is compared.
    got = users.both("alice", create_topics)
    check(pair, "alice CreateTopics", tuple(
        [(t.name, t.error_code, t.topic_config_error_code, t.num_partitions, t.replication_factor, bool(t.configs))
         for t in sorted(a.topics, key=lambda t: t.name)] for a in got))

    def delete_topics(s):
        base = (DELETE_TOPICS, 6)
        return req(DELETE_TOPICS, 6, timeout=ms(10_000), topics=tuple(
            part(base, "DeleteTopicState", name=n, topic_id=None) for n in (other, P + "adm-mine-2", P + "adm-none")))
    check(pair, "alice DeleteTopics", users.both("alice", delete_topics))

    def describe_configs(s):
        base = (DESCRIBE_CONFIGS, 4)
        return req(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False, resources=tuple(
            part(base, "DescribeConfigsResource", resource_type=rt, resource_name=n, configuration_keys=("cleanup.policy",))
            for rt, n in ((2, mine), (2, other), (4, "1"))))
    check(pair, "alice DescribeConfigs", users.both("alice", describe_configs))

    def alter_configs(s):
        base = (INCREMENTAL_ALTER_CONFIGS, 1)
        return req(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=True, resources=tuple(
            part(base, "AlterConfigsResource", resource_type=2, resource_name=n, configs=(
                part(base, "AlterableConfig", name="retention.ms", config_operation=0, value="60000"),))
            for n in (mine, other)))
    check(pair, "alice IncrementalAlterConfigs", users.both("alice", alter_configs))

    def delete_records(s):
        base = (DELETE_RECORDS, 2)
        return req(DELETE_RECORDS, 2, timeout=ms(5000), topics=tuple(
            part(base, "DeleteRecordsTopic", name=n, partitions=(
                part(base, "DeleteRecordsPartition", partition_index=0, offset=0),)) for n in (mine, other)))
    check(pair, "alice DeleteRecords", users.both("alice", delete_records))

    def create_partitions(s):
        base = (CREATE_PARTITIONS, 3)
        return req(CREATE_PARTITIONS, 3, timeout=ms(10_000), validate_only=True, topics=tuple(
            part(base, "CreatePartitionsTopic", name=n, count=2, assignments=None) for n in (mine, other)))
    check(pair, "alice CreatePartitions", users.both("alice", create_partitions))

    def leader_epoch(s):
        base = (OFFSET_FOR_LEADER_EPOCH, 4)
        return req(OFFSET_FOR_LEADER_EPOCH, 4, replica_id=-2, topics=tuple(
            part(base, "OffsetForLeaderTopic", topic=n, partitions=(
                part(base, "OffsetForLeaderPartition", partition=0, current_leader_epoch=-1, leader_epoch=0),))
            for n in (mine, other)))
    check(pair, "alice OffsetForLeaderEpoch", users.both("alice", leader_epoch))
    check(pair, "alice DescribeLogDirs", users.both("alice", lambda s: req(DESCRIBE_LOG_DIRS, 4, topics=())))
    check(pair, "alice DescribeGroups", users.both("alice", lambda s: req(
        DESCRIBE_GROUPS, 5, groups=(group, P + "adm-other-group"), include_authorized_operations=True)))
    listed = users.both("alice", lambda s: req(LIST_GROUPS, 5, states_filter=(), types_filter=()))
    check(pair, "alice ListGroups (only what she may describe)", listed)
    check(pair, "alice DescribeProducers", users.both("alice", lambda s: req(DESCRIBE_PRODUCERS, 0, topics=tuple(
        part((DESCRIBE_PRODUCERS, 0), "TopicRequest", name=n, partition_indexes=(0,)) for n in (mine, other)))))
    check(pair, "alice DescribeTransactions", users.both("alice", lambda s: req(
        DESCRIBE_TRANSACTIONS, 0, transactional_ids=(tid,))))
    check(pair, "alice ListTransactions", users.both("alice", lambda s: req(
        LIST_TRANSACTIONS, 1, state_filters=(), producer_id_filters=(), duration_filter=-1)))
    check(pair, "alice ListConfigResources", users.both("alice", lambda s: req(
        LIST_CONFIG_RESOURCES, 1, resource_types=())))
    check(pair, "alice DescribeUserScramCredentials", users.both("alice", lambda s: req(
        DESCRIBE_SCRAM, 0, users=(part((DESCRIBE_SCRAM, 0), "UserName", name="alice"),
                                  part((DESCRIBE_SCRAM, 0), "UserName", name="bob")))))
    check(pair, "alice AlterUserScramCredentials", users.both("alice", lambda s: req(
        ALTER_SCRAM, 0, deletions=(part((ALTER_SCRAM, 0), "ScramCredentialDeletion", name="zed", mechanism=1),),
        upsertions=(part((ALTER_SCRAM, 0), "ScramCredentialUpsertion", name="bob", mechanism=1, iterations=8192,
                         salt=b"s" * 16, salted_password=b"p" * 32),))))
    check(pair, "alice ElectLeaders", users.both("alice", lambda s: req(
        ELECT_LEADERS, 2, election_type=0, timeout=ms(5000), topic_partitions=(
            part((ELECT_LEADERS, 2), "TopicPartitions", topic=mine, partitions=(0,)),))))


# -- group membership and transactional offsets ------------------------------------------------------

HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, TXN_OFFSET_COMMIT, DELETE_GROUPS, OFFSET_DELETE = 12, 13, 14, 28, 42, 47


def test_group_and_txn_offset_checks_match_kafka(pair, users):
    topic, hidden, group, tid = P + "g-topic", P + "g-hidden", P + "g-group", P + "g-tx"
    pair.create_topics([topic, hidden], 1)
    pair.find_coordinators(group, [tid])

    def join(s):
        proto = part((JOIN_GROUP, 5), "JoinGroupRequestProtocol", name="range", metadata=b"\0\1\0\0\0\0\0\0\0\0")
        return req(JOIN_GROUP, 5, group_id=group, session_timeout=ms(45_000), rebalance_timeout=ms(10_000),
                   member_id="", group_instance_id=None, protocol_type="consumer", protocols=(proto,))
    check(pair, "bob JoinGroup", users.both("bob", join))
    check(pair, "bob SyncGroup", users.both("bob", lambda s: req(
        SYNC_GROUP, 5, group_id=group, generation_id=1, member_id="m", group_instance_id=None,
        protocol_type="consumer", protocol_name="range", assignments=())))
    check(pair, "bob Heartbeat", users.both("bob", lambda s: req(
        HEARTBEAT, 4, group_id=group, generation_id=1, member_id="m", group_instance_id=None)))
    check(pair, "bob LeaveGroup", users.both("bob", lambda s: req(LEAVE_GROUP, 5, group_id=group, members=(
        part((LEAVE_GROUP, 5), "MemberIdentity", member_id="m", group_instance_id=None, reason=None),))))
    check(pair, "bob DeleteGroups", users.both("bob", lambda s: req(
        DELETE_GROUPS, 2, groups_names=(group, group, P + "g-none"))))
    check(pair, "bob OffsetDelete", users.both("bob", lambda s: req(OFFSET_DELETE, 0, group_id=group, topics=(
        part((OFFSET_DELETE, 0), "OffsetDeleteRequestTopic", name=topic, partitions=(
            part((OFFSET_DELETE, 0), "OffsetDeleteRequestPartition", partition_index=0),)),))))

    def txn_commit(s, pids):
        base = (TXN_OFFSET_COMMIT, 3)
        return req(TXN_OFFSET_COMMIT, 3, transactional_id=tid, group_id=group, producer_id=pids[s.name][0],
                   producer_epoch=pids[s.name][1], generation_id=-1, member_id="", group_instance_id=None,
                   topics=tuple(part(base, "TxnOffsetCommitRequestTopic", name=t, partitions=(
                       part(base, "TxnOffsetCommitRequestPartition", partition_index=0, committed_offset=0,
                            committed_leader_epoch=-1, committed_metadata=""),)) for t in (topic, hidden)))
    no_pids = {s.name: (0, 0) for s in pair.sides}
    check(pair, "bob TxnOffsetCommit without the id", users.both("bob", lambda s: txn_commit(s, no_pids)))
    grant(pair, _acl(resource=TXN_ID, name=tid, op=WRITE, principal="User:bob"))
    got = users.settled("bob", lambda s: _init_pid(tid))
    check(pair, "bob InitProducerId", got)
    pids = {s.name: (r.producer_id, r.producer_epoch) for s, r in zip(pair.sides, got)}
    check(pair, "bob AddOffsetsToTxn without the group", users.both("bob", lambda s: req(
        ADD_OFFSETS, 3, transactional_id=tid, producer_id=pids[s.name][0], producer_epoch=pids[s.name][1],
        group_id=group)))
    check(pair, "bob TxnOffsetCommit without the group", users.both("bob", lambda s: txn_commit(s, pids)))
    grant(pair, _acl(resource=GROUP, name=group, op=READ, principal="User:bob"),
          _acl(name=topic, op=READ, principal="User:bob"))
    check(pair, "bob AddOffsetsToTxn", users.both("bob", lambda s: req(
        ADD_OFFSETS, 3, transactional_id=tid, producer_id=pids[s.name][0], producer_epoch=pids[s.name][1],
        group_id=group)))
    check(pair, "bob TxnOffsetCommit, one topic not readable", users.both("bob", lambda s: txn_commit(s, pids)))
    check(pair, "bob EndTxn(abort)", users.both("bob", lambda s: req(
        END_TXN, 4, transactional_id=tid, producer_id=pids[s.name][0], producer_epoch=pids[s.name][1],
        committed=False)))


# -- DescribeTopicPartitions and AlterConfigs (issue 32) ----------------------------------------------

DESCRIBE_TOPIC_PARTITIONS, ALTER_CONFIGS = 75, 33
ALTER_CONFIGS_OP = 11


def _dtp(names, cursor=None, limit=2000):
    api = (DESCRIBE_TOPIC_PARTITIONS, 0)
    return req(DESCRIBE_TOPIC_PARTITIONS, 0, topics=tuple(part(api, "TopicRequest", name=n) for n in names),
               response_partition_limit=limit,
               cursor=None if cursor is None else part(api, "Cursor", topic_name=cursor, partition_index=0))


def _legacy_alter(names, configs):
    api = (ALTER_CONFIGS, 2)
    return req(ALTER_CONFIGS, 2, validate_only=False, resources=tuple(
        part(api, "AlterConfigsResource", resource_type=TOPIC, resource_name=n, configs=tuple(
            part(api, "AlterableConfig", name=k, value=v) for k, v in configs)) for n in names))


def test_describe_topic_partitions_and_alter_configs_checks_match_kafka(pair, users):
    seen, hidden, denied = P + "d-seen", P + "d-hidden", P + "d-denied"
    pair.create_topics([seen, hidden, denied], 2)
    grant(pair, _acl(name=seen, op=DESCRIBE), _acl(name=seen, op=ALTER_CONFIGS_OP),
          _acl(name=P + "d-", pattern=PREFIXED, op=DESCRIBE, principal="User:bob"),
          _acl(name=denied, op=DESCRIBE, principal="User:bob", perm=DENY))
    # by name: the topics alice may not describe are refused, whether they exist or not
    check(pair, "alice DescribeTopicPartitions by name", users.both(
        "alice", lambda s: _dtp([seen, hidden, P + "d-missing"])))
    # every topic from the cursor on: the ones she may not describe are left out
    check(pair, "alice DescribeTopicPartitions of every topic", users.both(
        "alice", lambda s: _dtp([], cursor=P + "d-")))
    check(pair, "bob DescribeTopicPartitions, one page (a DENY among them)", users.both(
        "bob", lambda s: _dtp([], cursor=P + "d-", limit=3)))
    check(pair, "bob DescribeTopicPartitions by name", users.both(
        "bob", lambda s: _dtp([denied, hidden, P + "d-missing"])))
    check(pair, "alice AlterConfigs", users.both(
        "alice", lambda s: _legacy_alter([seen, hidden], [("retention.ms", "100000")])))
    check(pair, "bob AlterConfigs without ALTER_CONFIGS", users.both(
        "bob", lambda s: _legacy_alter([hidden], [("retention.ms", "100000")])))

"""ListGroups on ``--brokers 3`` answers per coordinator, as Kafka's GroupCoordinator.listGroups
does: each node lists only the groups whose __consumer_offsets partition it leads, so the lists
are disjoint, their union is every group, each group is listed by the node FindCoordinator
names, and confluent-kafka's list_consumer_groups (which asks every broker) sees each group once.
When the coordinator moves, the groups are listed by the new one."""

from __future__ import annotations

import pytest

from tests.reference.client import Connection, req

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

LIST_GROUPS, FIND_COORDINATOR = 16, 10
GROUPS = 12


def _boot(b) -> str:
    return ",".join(b.addresses)


def _listed(b, node: int) -> set[str]:
    host, port = b.addresses[node - 1].rsplit(":", 1)
    with Connection(host, int(port)) as conn:
        r = conn.call(req(LIST_GROUPS, 4, states_filter=()))
    assert r.error_code == 0, r
    return {g.group_id for g in r.groups}


def _coordinator(b, group: str) -> int:
    host, port = b.addresses[0].rsplit(":", 1)
    with Connection(host, int(port)) as conn:
        r = conn.call(req(FIND_COORDINATOR, 3, key=group, key_type=0))
    assert r.error_code == 0, r
    return r.node_id


def _check(b, admin, groups: list[str]) -> int:
    """Each group listed by its coordinator only, and once by list_consumer_groups; the coordinator."""
    coordinators = {g: _coordinator(b, g) for g in groups}
    for n in (1, 2, 3):
        listed = _listed(b, n) & set(groups)
        assert listed == {g for g, c in coordinators.items() if c == n}, (n, listed, coordinators)
    result = admin.list_consumer_groups().result(timeout=30)
    mine = [g.group_id for g in result.valid if g.group_id in groups]
    assert sorted(mine) == sorted(groups), mine  # each once, though every broker was asked
    (node,) = set(coordinators.values())  # one __consumer_offsets partition: one coordinator
    return node


def test_each_node_lists_the_groups_it_coordinates(broker_factory, topic):
    b = broker_factory(["--brokers", "3"], control=True)
    admin = AdminClient({"bootstrap.servers": _boot(b)})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    groups = [f"{topic}-g{i}" for i in range(GROUPS)]
    for g in groups:  # an offset commit makes the group (Empty, no protocol type)
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, [TopicPartition(topic, 0, 1)])])[
            g].result(timeout=30)
    first = _check(b, admin, groups)
    # the coordinator moves (a leader move of __consumer_offsets-0): the new one lists them
    other = next(n for n in (1, 2, 3) if n != first)
    b.control.move_leader("__consumer_offsets", 0, other)
    assert _check(b, admin, groups) == other

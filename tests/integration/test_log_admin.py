"""The admin calls of the log APIs from a real client (confluent-kafka's AdminClient, what
kafka-topics.sh --alter, kafka-delete-records.sh and kafka-leader-election.sh do), on three
virtual brokers: grow a topic, delete records below an offset (kept across a restart), move
leadership back to the preferred replica after a broker came back."""

from __future__ import annotations

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from .test_txn_support import READ_UNCOMMITTED, produce_sync
from .test_virtual_brokers import ARGS, _boot, _metadata, read_all


def test_create_partitions_delete_records_and_preferred_election(broker_factory, topic):
    from confluent_kafka import ElectionType

    b = broker_factory(ARGS, control=True)
    admin = AdminClient({"bootstrap.servers": _boot(b)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(15)

    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(15)
    assert sorted(_metadata(_boot(b), topic)[1]) == [0, 1, 2]
    producer = Producer({"bootstrap.servers": _boot(b), "enable.idempotence": True})
    produce_sync(producer, topic, [(p, b"v|%d-%d" % (p, i)) for p in range(3) for i in range(10)])

    done = admin.delete_records([TopicPartition(topic, 1, 4)])
    low = list(done.values())[0].result(15)
    assert low.low_watermark == 4
    assert [o for o, _k, _v in read_all(b, topic, [1], READ_UNCOMMITTED)[1]] == list(range(4, 10))

    b.restart()
    assert [o for o, _k, _v in read_all(b, topic, [1], READ_UNCOMMITTED)[1]] == list(range(4, 10))

    admin = AdminClient({"bootstrap.servers": _boot(b)})
    leader = _metadata(_boot(b), topic)[1][0][0]
    b.control.stop_broker(leader)
    moved = _metadata(_boot(b), topic)[1][0][0]
    assert moved != leader
    b.control.start_broker(leader)
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(15)
    assert list(result.values()) == [None], result  # {partition: error or None}
    assert _metadata(_boot(b), topic)[1][0][0] == leader
    # a second election has nothing to do
    again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(15)
    errors = list(again.values())
    assert len(errors) == 1 and errors[0] is not None and errors[0].name() == "ELECTION_NOT_NEEDED", again

"""``_schemas`` read back at start with the coordinators' replay: a batch that does not decode
and a control batch are left out, the records around them come back in order."""

from __future__ import annotations

from structlog.testing import capture_logs

from minibroker.broker import Broker
from minibroker.registry.topic import CONFIGS, TOPIC, BrokerSchemasTopic
from minibroker_protocol.records import build_control_batch
from tests.minibroker.test_coordinator_replay import cfg, undecodable_batch


def schemas_topic(b: Broker) -> BrokerSchemasTopic:
    return BrokerSchemasTopic(
        existing=lambda: b.existing_log(TOPIC, 0),
        create=lambda: (b.create_topic(TOPIC, 1, dict(CONFIGS), reason="test"), b.get_log(TOPIC, 0))[1],
        wall_ms=lambda: 1_700_000_000_000)


def test_read_skips_an_undecodable_batch_and_control_batches(tmp_path):
    b = Broker(cfg(tmp_path))
    topic = schemas_topic(b)
    assert list(topic.read(0)) == []  # before the topic exists
    topic.append([(b'{"k":1}', b'{"v":1}')])
    plog = b.existing_log(TOPIC, 0)
    plog.append(undecodable_batch(b'{"k":2}'), origin="coordinator")
    plog.append(build_control_batch(producer_id=5, producer_epoch=0, commit=True, coordinator_epoch=0),
                origin="coordinator")
    end, _ = topic.append([(b'{"k":3}', b'{"v":3}'), (b'{"k":4}', None)])
    assert end == topic.end_offset() == 6

    with capture_logs() as logs:
        read = list(topic.read(0))
    assert read == [(0, b'{"k":1}', b'{"v":1}', 1_700_000_000_000),
                    (4, b'{"k":3}', b'{"v":3}', 1_700_000_000_000),
                    (5, b'{"k":4}', None, 1_700_000_000_000)]
    skipped = [e for e in logs if e["event"] == "registry.record_skipped"]
    assert [(e["topic"], e["offset"]) for e in skipped] == [(TOPIC, 1)], skipped
    assert list(topic.read(5)) == read[2:]
    b.logs.close_all()

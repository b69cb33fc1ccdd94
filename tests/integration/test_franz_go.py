"""franz-go, the Go client (tests/go/mbgo), runs transactions against minibroker (issue 16 item 4).

Committed and aborted transactions read back with read_committed and read_uncommitted, and the
broker's request counts show the protocol path franz-go took at transaction.version 1: partitions
registered with AddPartitionsToTxn, EndTxn below v5 (v5 is transactions v2's).
"""

from __future__ import annotations

from minibroker.testing import MiniBroker, requests_seen, topic_name

from . import franz_go

TXNS, RECORDS = 4, 5


def test_franz_go_transactions_commit_and_abort():
    franz_go.mbgo()  # skip early without Go
    with MiniBroker(name="franz-go") as b:
        topic = b.create_topic(topic_name("franz-go"))  # franz-go does not auto-create topics
        rc, lines, err = franz_go.run(["txn-produce", "-brokers", b.bootstrap_servers, "-topic", topic,
                                       "-txn-id", f"tid-{topic}", "-txns", str(TXNS), "-records", str(RECORDS),
                                       "-abort-every", "2"])
        assert rc == 0, f"{lines}\n{err[-3000:]}"
        assert [(x["txn"], x["committed"]) for x in lines] == [(1, True), (2, False), (3, True), (4, False)]

        rc, committed, err = franz_go.run(["consume", "-brokers", b.bootstrap_servers, "-topic", topic,
                                           "-max", "100", "-idle", "3s"])
        assert rc == 0, err[-3000:]
        want = [f"t{t}-r{i}-commit" for t in (1, 3) for i in range(RECORDS)]
        assert [r["value"] for r in committed] == want
        # Each transaction's records, then its marker: offsets skip one per transaction.
        assert [r["offset"] for r in committed] == [0, 1, 2, 3, 4, 12, 13, 14, 15, 16]

        rc, everything, err = franz_go.run(["consume", "-brokers", b.bootstrap_servers, "-topic", topic,
                                            "-read-uncommitted", "-max", "100", "-idle", "3s"])
        assert rc == 0, err[-3000:]
        assert len(everything) == TXNS * RECORDS

        seen = {(api, v) for api, v, software in requests_seen(b.log_text()) if software == "kgo"}  # franz-go names itself kgo
        apis = {api for api, _ in seen}
        assert {"InitProducerId", "AddPartitionsToTxn", "EndTxn", "Produce", "Fetch"} <= apis, seen
        assert all(v <= 4 for api, v in seen if api == "EndTxn"), seen

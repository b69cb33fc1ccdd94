#!/usr/bin/env python3
"""A transactional producer for the compose environment (docker/compose.yaml).

It writes ``--transactions`` transactions of ``--records`` records each to ``--topic``. Every
``--abort-every``-th transaction is aborted on purpose: its records reach the broker's log (a
read_uncommitted consumer sees them) but a read_committed consumer never does. Each value
carries the key's sequence number, so a reader can check exactly-once and per-key order:

    key ``user-3``, value ``user-3 #12 txn 5``          (committed)
    key ``user-1``, value ``user-1 #9 txn 4 aborted``    (aborted on purpose)

It prints one line per transaction and a summary with the number of committed records, then
exits 0 (1 on a Kafka error). SIGTERM/Ctrl-C stops it after the transaction in hand.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from client_opts import client_opts
from confluent_kafka import KafkaException, Producer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", default="localhost:9092", help="bootstrap servers (%(default)s)")
    ap.add_argument("--topic", default="words", help="topic to write (%(default)s)")
    ap.add_argument("--transactional-id", default="compose-producer", help="(%(default)s)")
    ap.add_argument("--transactions", type=int, default=10, help="how many transactions (%(default)s)")
    ap.add_argument("--records", type=int, default=10, help="records per transaction (%(default)s)")
    ap.add_argument("--keys", type=int, default=5, help="distinct keys (%(default)s)")
    ap.add_argument("--abort-every", type=int, default=5,
                    help="abort every Nth transaction on purpose, 0 never (%(default)s)")
    ap.add_argument("--interval", type=float, default=0.2,
                    help="seconds between transactions (%(default)s)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds for each transactional call")
    ap.add_argument("--client-opt", action="append", default=[], metavar="KEY=VALUE",
                    help="a librdkafka setting, e.g. security.protocol=SASL_SSL (repeatable)")
    args = ap.parse_args(argv)

    running = True

    def stop(signum, _frame):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    producer = Producer({"bootstrap.servers": args.bootstrap,
                         "transactional.id": args.transactional_id,
                         "linger.ms": 5, **client_opts(args.client_opt)})
    seq = [0] * args.keys
    committed = aborted = 0
    try:
        # Fences an earlier instance with the same transactional id and aborts what it left open.
        producer.init_transactions(args.timeout)
        for txn in range(1, args.transactions + 1):
            if not running:
                break
            abort = args.abort_every > 0 and txn % args.abort_every == 0
            producer.begin_transaction()
            for i in range(args.records):
                k = (txn * args.records + i) % args.keys
                seq[k] += 1
                value = f"user-{k} #{seq[k]} txn {txn}" + (" aborted" if abort else "")
                producer.produce(args.topic, key=f"user-{k}", value=value)
            if abort:
                # Flush first so the records really reach the broker's log before the ABORT
                # marker (abort_transaction alone would drop the ones still queued locally).
                producer.flush(args.timeout)
                producer.abort_transaction(args.timeout)
                aborted += args.records
                print(f"transaction {txn}: {args.records} records ABORTED on purpose "
                      "(read_committed readers never see them)", flush=True)
            else:
                producer.commit_transaction(args.timeout)
                committed += args.records
                print(f"transaction {txn}: {args.records} records committed", flush=True)
            time.sleep(args.interval)
    except KafkaException as e:
        print(f"kafka error: {e}", file=sys.stderr, flush=True)
        return 1
    finally:
        producer.flush(args.timeout)
    print(f"done: {committed} records committed, {aborted} aborted, to topic {args.topic!r}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

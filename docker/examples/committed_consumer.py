#!/usr/bin/env python3
"""A read_committed consumer for the compose environment (docker/compose.yaml).

It reads ``--topic`` as a member of ``--group`` and prints every record. Values written by
docker/examples/txn_producer.py (possibly upper-cased by examples/eos_pipeline.py) look like
``user-3 #12 txn 5``; the consumer checks, as it goes, what exactly-once promises:

* no record of an aborted transaction (a value ending in "aborted") is ever delivered;
* no record is delivered twice;
* per key, the sequence numbers only go up.

With ``--expect N`` it exits once N records arrived: 0 when every check held, 1 otherwise, or
1 when ``--timeout`` seconds pass first. Without it, it runs until SIGTERM/Ctrl-C.
``--isolation-level read_uncommitted`` shows the aborted records too (the checks then only
report them).
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import time

from client_opts import client_opts
from confluent_kafka import Consumer, KafkaError, KafkaException

VALUE = re.compile(r"^(?P<key>\S+) #(?P<seq>\d+) txn (?P<txn>\d+)(?P<aborted> aborted)?$", re.I)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", default="localhost:9092", help="bootstrap servers (%(default)s)")
    ap.add_argument("--topic", default="WORDS", help="topic to read (%(default)s)")
    ap.add_argument("--group", default="compose-consumer", help="consumer group (%(default)s)")
    ap.add_argument("--isolation-level", default="read_committed",
                    choices=["read_committed", "read_uncommitted"])
    ap.add_argument("--expect", type=int, default=0, help="exit after this many records (0: never)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="with --expect: give up after this many seconds (%(default)s)")
    ap.add_argument("--client-opt", action="append", default=[], metavar="KEY=VALUE",
                    help="a librdkafka setting, e.g. security.protocol=SASL_SSL (repeatable)")
    args = ap.parse_args(argv)

    running = True

    def stop(signum, _frame):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    consumer = Consumer({"bootstrap.servers": args.bootstrap,
                         "group.id": args.group,
                         "isolation.level": args.isolation_level,
                         "auto.offset.reset": "earliest",
                         # the topic may not exist yet when we subscribe: let Metadata create it
                         "allow.auto.create.topics": True, **client_opts(args.client_opt)})
    consumer.subscribe([args.topic])
    committed_only = args.isolation_level == "read_committed"
    seen: set[tuple[str, int]] = set()
    last: dict[str, int] = {}
    problems: list[str] = []
    count = 0
    deadline = time.monotonic() + args.timeout
    try:
        while running and (not args.expect or count < args.expect):
            if args.expect and time.monotonic() > deadline:
                problems.append(f"timed out after {args.timeout:.0f} s with {count} of "
                                f"{args.expect} records")
                break
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().fatal():
                    raise KafkaException(msg.error())
                if msg.error().code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    # Started before anything wrote the topic: librdkafka keeps looking for it.
                    print(f"waiting for topic {args.topic!r} to exist", flush=True)
                else:
                    print(f"consumer error: {msg.error()}", file=sys.stderr, flush=True)
                continue
            count += 1
            key = (msg.key() or b"").decode(errors="replace")
            value = (msg.value() or b"").decode(errors="replace")
            print(f"{msg.topic()}[{msg.partition()}]@{msg.offset()} {key}: {value}", flush=True)
            m = VALUE.match(value)
            if not m:
                continue  # not written by txn_producer.py: print only
            k, s = m["key"].lower(), int(m["seq"])
            if m["aborted"] and committed_only:
                problems.append(f"record of an aborted transaction delivered: {value!r}")
            if (k, s) in seen:
                problems.append(f"duplicate: {value!r}")
            elif s < last.get(k, 0):
                problems.append(f"out of order for {k}: #{s} after #{last[k]}")
            seen.add((k, s))
            last[k] = max(s, last.get(k, 0))
    except KafkaException as e:
        problems.append(f"kafka error: {e}")
    finally:
        consumer.close()
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr, flush=True)
    if problems:
        print(f"FAILED: {count} records from {args.topic!r}, {len(problems)} problems", flush=True)
    else:
        print(f"OK: {count} records from {args.topic!r} ({args.isolation_level}), {len(last)} keys, "
              "no duplicates, per-key order kept"
              + (", no record of an aborted transaction" if committed_only else ""), flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""An exactly-once consume-transform-produce service with confluent-kafka.

It reads records from an input topic as a member of a consumer group, transforms each one (the key
is kept, the value is upper-cased) and writes the result to an output topic. Each poll batch is one
Kafka transaction that holds both the output records and the consumer group's new input offsets
(``send_offsets_to_transaction``). Either both become visible (COMMIT) or neither does (ABORT), so
a reader of the output topic with ``isolation.level=read_committed`` sees every input record
transformed exactly once, in input order per key, even when this process crashes (``kill -9``)
and is restarted with the same ``--transactional-id`` and ``--group``:

* the restarted producer's ``init_transactions()`` fences the old instance (a higher producer
  epoch) and aborts whatever transaction it left open, so its half-written output is never read;
* the restarted consumer resumes from the offsets committed by the last *committed* transaction
  (a read_committed consumer asks the broker for stable offsets only), so it re-processes exactly
  the records whose output was aborted.

Run it against minibroker (see examples/README.md)::

    python -m minibroker.cli.main &                     # a broker on localhost:9092
    python examples/eos_pipeline.py --input words --output WORDS \\
        --group upper --transactional-id upper-1

Stop it with Ctrl-C or SIGTERM: it finishes (commits) the batch in hand, leaves the group and
exits with status 0. Status 1 means a fatal error (for example: another instance with the same
transactional id fenced this one); the service is meant to be restarted by its supervisor then.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

log = logging.getLogger("eos_pipeline")


def transform(key: bytes | None, value: bytes | None) -> tuple[bytes | None, bytes | None]:
    """The business logic: keep the key, upper-case the value."""
    return key, (value.upper() if value is not None else None)


class Pipeline:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.running = True
        self.in_txn = False          # a transaction is open (begun, not yet committed/aborted)
        self.committed_txns = 0
        self.committed_records = 0

        # The transactional producer. transactional.id identifies this service instance across
        # restarts: a new process with the same id fences the old one and aborts its open
        # transaction. (enable.idempotence is implied by transactional.id.)
        producer_conf = {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": args.transaction_timeout_ms,
            "linger.ms": 5,
        }
        producer_conf.update(parse_opts(args.producer_opt))
        self.producer = Producer(producer_conf)

        # The consumer: a group member (subscribe), no auto commit (offsets are committed by the
        # transaction), and read_committed so that it never reads aborted input either — the
        # input may itself be written transactionally by another pipeline.
        consumer_conf = {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": max(100, args.session_timeout_ms // 6),
        }
        consumer_conf.update(parse_opts(args.consumer_opt))
        self.consumer = Consumer(consumer_conf)

    # -- rebalances ---------------------------------------------------------------------------
    def on_assign(self, consumer, partitions) -> None:
        # Nothing to do: the consumer starts each partition at the group's committed offset
        # (stable offsets only, as read_committed asks), or at the beginning if there is none.
        log.info("assigned: %s", fmt_partitions(partitions))

    def on_revoke(self, consumer, partitions) -> None:
        # Our records' offsets are only valid for the partitions we own: a transaction that is
        # still open when they are taken away must not commit. (In this single-threaded loop
        # rebalances are served inside consume(), between transactions, so this is a safety net.)
        log.info("revoked: %s", fmt_partitions(partitions))
        if self.in_txn:
            log.warning("partitions revoked with a transaction open: aborting it")
            self.abort()

    # -- transactions -------------------------------------------------------------------------
    def abort(self) -> None:
        try:
            self.producer.abort_transaction(self.args.timeout)
        finally:
            self.in_txn = False

    def rewind(self, batch_start: dict[tuple[str, int], int]) -> None:
        """After an abort: seek each partition of the batch back to its first record, so the batch
        is processed again (its offsets were not committed). Partitions no longer assigned are
        skipped: their new owner resumes from the committed offsets anyway."""
        assigned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        for (topic, partition), offset in sorted(batch_start.items()):
            if (topic, partition) in assigned:
                self.consumer.seek(TopicPartition(topic, partition, offset))
                log.info("rewound %s[%d] to %d", topic, partition, offset)

    def process_batch(self, msgs) -> None:
        batch_start: dict[tuple[str, int], int] = {}
        records = []
        for m in msgs:
            if m.error() is not None:
                err = m.error()
                if err.fatal():
                    raise KafkaException(err)
                log.warning("consumer error: %s", err)
                continue
            batch_start.setdefault((m.topic(), m.partition()), m.offset())
            records.append(m)
        if not records:
            return

        self.producer.begin_transaction()
        self.in_txn = True
        try:
            for m in records:
                key, value = transform(m.key(), m.value())
                self.produce(key, value)
            # The consumer's next positions (the offset after the last record it returned,
            # or past the transaction markers it skipped) become the group's committed offsets
            # when — and only if — this transaction commits. Partitions without a position yet
            # (OFFSET_INVALID) are left out: librdkafka would ignore them anyway.
            positions = [tp for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0]
            self.producer.send_offsets_to_transaction(positions, self.consumer.consumer_group_metadata(),
                                                      self.args.timeout)
            self.commit()
        except KafkaException as e:
            err = e.args[0]
            if not err.txn_requires_abort():
                raise  # fatal (e.g. fenced by a newer instance): let main() exit non-zero
            log.warning("transaction failed (%s): aborting and rewinding", err)
            self.abort()
            self.rewind(batch_start)
            return
        self.committed_txns += 1
        self.committed_records += len(records)
        log.info("committed transaction %d: %d records (total %d), offsets %s", self.committed_txns,
                 len(records), self.committed_records, fmt_partitions(positions))

    def produce(self, key, value) -> None:
        for _ in range(1000):  # bounded: the local queue drains as the broker acknowledges
            try:
                self.producer.produce(self.args.output, key=key, value=value)
                return
            except BufferError:
                self.producer.poll(0.05)
        raise RuntimeError("the producer's queue stayed full")

    def commit(self) -> None:
        # commit_transaction flushes the outstanding records first. A retriable error (e.g. a
        # timeout) may be retried with the same call; an abortable one propagates to the caller.
        for attempt in range(1, 4):
            try:
                self.producer.commit_transaction(self.args.timeout)
                self.in_txn = False
                return
            except KafkaException as e:
                err = e.args[0]
                if not err.retriable() or attempt == 3:
                    raise
                log.warning("commit_transaction failed (%s), retrying", err)

    # -- main loop ----------------------------------------------------------------------------
    def run(self) -> None:
        # Fence any previous instance and abort its open transaction *before* joining the group:
        # the group's offsets stay "unstable" for a read_committed consumer until that is done.
        self.producer.init_transactions(self.args.timeout)
        log.info("transactional producer %r ready", self.args.transactional_id)
        self.consumer.subscribe([self.args.input], on_assign=self.on_assign, on_revoke=self.on_revoke)
        idle_since = time.monotonic()
        while self.running:
            msgs = self.consumer.consume(num_messages=self.args.batch_size, timeout=self.args.poll_timeout)
            if msgs:
                idle_since = time.monotonic()
                self.process_batch(msgs)
            elif self.args.idle_exit_seconds and time.monotonic() - idle_since > self.args.idle_exit_seconds:
                log.info("no input for %.1f s: exiting", self.args.idle_exit_seconds)
                break

    def close(self) -> None:
        if self.in_txn:
            try:
                self.abort()
            except KafkaException as e:
                log.warning("abort on close failed: %s", e)
        self.consumer.close()  # leaves the group, so the partitions are reassigned at once
        self.producer.flush(self.args.timeout)
        log.info("closed after %d transactions, %d records", self.committed_txns, self.committed_records)


def parse_opts(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep:
            raise SystemExit(f"expected key=value, got {item!r}")
        out[k] = v
    return out


def fmt_partitions(tps) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" + (f"@{tp.offset}" if tp.offset >= 0 else "")
                     for tp in tps) or "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="localhost:9092", help="bootstrap servers (default %(default)s)")
    ap.add_argument("--input", required=True, help="topic to read")
    ap.add_argument("--output", required=True, help="topic to write")
    ap.add_argument("--group", required=True, help="consumer group id")
    ap.add_argument("--transactional-id", required=True,
                    help="the producer's transactional.id: keep it across restarts of one instance")
    ap.add_argument("--batch-size", type=int, default=500, help="max records per transaction (%(default)s)")
    ap.add_argument("--poll-timeout", type=float, default=0.5, help="seconds one poll waits (%(default)s)")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds for init/send_offsets/commit/abort calls (%(default)s)")
    ap.add_argument("--session-timeout-ms", type=int, default=10000, help="consumer session timeout")
    ap.add_argument("--transaction-timeout-ms", type=int, default=10000,
                    help="the broker aborts a transaction left open this long (%(default)s)")
    ap.add_argument("--idle-exit-seconds", type=float, default=0,
                    help="exit cleanly after this long without input (0: run until signalled)")
    ap.add_argument("--consumer-opt", action="append", default=[], metavar="KEY=VALUE",
                    help="extra librdkafka consumer property (repeatable)")
    ap.add_argument("--producer-opt", action="append", default=[], metavar="KEY=VALUE",
                    help="extra librdkafka producer property (repeatable)")
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = ap.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    pipeline = Pipeline(args)

    def stop(signum, _frame):
        # Only a flag: the loop finishes the batch in hand (commit) and then leaves.
        log.info("%s: stopping after the current batch", signal.Signals(signum).name)
        pipeline.running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    status = 0
    try:
        pipeline.run()
    except KafkaException as e:
        err = e.args[0]
        log.error("fatal error: %s (%s)", err.str() if isinstance(err, KafkaError) else err,
                  err.name() if isinstance(err, KafkaError) else type(err).__name__)
        status = 1
    finally:
        try:
            pipeline.close()
        except KafkaException as e:
            log.warning("close: %s", e)
    return status


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env node
// An exactly-once consume-transform-produce loop with KafkaJS (tests/integration/test_eos_kafkajs.py).
//
//   node eos_pipeline.js --broker 127.0.0.1:9092 --input in --output out --group g
//                        --transactional-id tid [--idle-exit-seconds 60] [--timeout-ms 120000]
//                        [--max-bytes-per-partition 4096] [--session-timeout-ms 6000]
//
// Every option can also come from the environment: --transactional-id is EOS_TRANSACTIONAL_ID.
//
// The consumer reads --input in group --group with readUncommitted: false (read_committed) and
// autoCommit: false. Each batch (the records of one partition from one fetch) is one transaction
// of the transactional producer (--transactional-id, idempotent, maxInFlightRequests 1). The
// transaction holds the transformed records (key kept, value upper-cased) on --output and the
// group's new offset for that partition (txn.sendOffsets = AddOffsetsToTxn + TxnOffsetCommit).
// A failed transaction is aborted and the error rethrown, so KafkaJS restarts the consumer.
// The restarted consumer resumes from the committed offsets.
//
// Start-up order: KafkaJS's producer.connect() only gets a non-transactional producer id. The
// transactional InitProducerId, which fences an earlier instance and ends the transaction it left
// open, runs at the first producer.transaction(). This script therefore opens and aborts an empty
// transaction before the consumer joins the group, like Java's initTransactions() before poll().
// Otherwise the consumer's OffsetFetch could run while the old instance's transaction is still
// open: KafkaJS's OffsetFetch (v<=4) has no require_stable flag.
//
// stdout: "READY ..." once the producer is initialized, "JOINED ..." after each group join, one
// "COMMIT ..." line per committed transaction (ms: since start), and "EXIT <code> <reason> ..." at the end. Exit status: 0 after SIGTERM/SIGINT or
// --idle-exit-seconds without records, 1 on a fatal error, 3 on --timeout-ms.
'use strict';

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const { Kafka, logLevel } = require('kafkajs');

const DEFAULTS = {
  'idle-exit-seconds': 60,
  'timeout-ms': 120000,
  'max-bytes-per-partition': 4096,
  'session-timeout-ms': 6000,
  'transaction-timeout-ms': 10000,
};
const REQUIRED = ['broker', 'input', 'output', 'group', 'transactional-id'];
const NUMERIC = Object.keys(DEFAULTS);

function args(argv) {
  const out = {};
  for (const k of [...REQUIRED, ...NUMERIC]) {
    const env = process.env[`EOS_${k.toUpperCase().replace(/-/g, '_')}`];
    if (env !== undefined && env !== '') out[k] = env;
  }
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of NUMERIC) {
    out[k] = Number(out[k] === undefined ? DEFAULTS[k] : out[k]);
    if (!Number.isFinite(out[k]) || out[k] <= 0) throw new Error(`--${k} must be a positive number`);
  }
  const missing = REQUIRED.filter((k) => !out[k]);
  if (missing.length) throw new Error(`missing ${missing.map((k) => `--${k}`).join(', ')}`);
  return out;
}

// The business logic: keep the key, upper-case the value (ASCII a-z, like Python's bytes.upper()).
function transform(message) {
  let value = null;
  if (message.value !== null) {
    value = Buffer.from(message.value);
    for (let i = 0; i < value.length; i++) {
      if (value[i] >= 0x61 && value[i] <= 0x7a) value[i] -= 0x20;
    }
  }
  return { key: message.key, value };
}

function say(line) {
  process.stdout.write(`${line}\n`);
}

async function main() {
  const a = args(process.argv.slice(2));
  const t0 = Date.now();
  const stats = { txns: 0, records: 0, aborted: 0 };
  let stopping = null;
  let lastActivity = Date.now();

  const hardTimer = setTimeout(() => {
    say(`EXIT 3 timeout after ${a['timeout-ms']} ms txns=${stats.txns} records=${stats.records}`);
    process.exit(3);
  }, a['timeout-ms']);
  hardTimer.unref();

  const kafka = new Kafka({
    clientId: `minibroker-it-kafkajs-eos-${process.pid}`,
    brokers: [a.broker],
    logLevel: logLevel.WARN,
    connectionTimeout: 5000,
    requestTimeout: 30000,
    // InitProducerId answers CONCURRENT_TRANSACTIONS while the old instance's transaction ends.
    // Bounded retries make KafkaJS warn "Limiting retries for the idempotent producer may
    // invalidate EoS guarantees". That does not apply here: every send is inside a transaction,
    // so a send that ran out of retries is aborted (its records are never read_committed).
    retry: { initialRetryTime: 100, maxRetryTime: 2000, retries: 10 },
  });
  const producer = kafka.producer({
    transactionalId: a['transactional-id'],
    transactionTimeout: a['transaction-timeout-ms'],
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
  });
  const consumer = kafka.consumer({
    groupId: a.group,
    readUncommitted: false,
    sessionTimeout: a['session-timeout-ms'],
    heartbeatInterval: Math.max(100, Math.floor(a['session-timeout-ms'] / 6)),
    rebalanceTimeout: 10000,
    maxWaitTimeInMs: 100,
    maxBytesPerPartition: a['max-bytes-per-partition'],
    allowAutoTopicCreation: false,
  });

  async function stop(code, reason) {
    if (stopping) return stopping;
    stopping = (async () => {
      const guard = setTimeout(() => {
        say(`EXIT 4 shutdown (${reason}) did not finish within 15 s`);
        process.exit(4);
      }, 15000);
      try {
        await consumer.disconnect(); // waits for the batch in hand (its transaction) to finish
        await producer.disconnect();
      } catch (e) {
        console.error(`eos_pipeline.js: error while stopping: ${e && e.stack ? e.stack : e}`);
        code = code || 1;
      }
      clearTimeout(guard);
      say(`EXIT ${code} ${reason} txns=${stats.txns} records=${stats.records} aborted=${stats.aborted} `
          + `seconds=${((Date.now() - t0) / 1000).toFixed(1)}`);
      process.exit(code);
    })();
    return stopping;
  }

  for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => { stop(0, 'stopped'); });
  consumer.on(consumer.events.CRASH, (e) => {
    const err = e.payload.error;
    console.error(`eos_pipeline.js: consumer crash (restart: ${e.payload.restart}): `
                  + `${err && err.stack ? err.stack : err}`);
    if (!e.payload.restart) stop(1, 'consumer crashed');
  });

  await producer.connect();
  // The transactional InitProducerId: fence the previous instance, end its open transaction.
  const init = await producer.transaction();
  await init.abort(); // nothing was added to it: no EndTxn is sent
  say(`READY pid=${process.pid} ms=${Date.now() - t0}`);
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    say(`JOINED member=${e.payload.memberId} assigned=${JSON.stringify(e.payload.memberAssignment)} `
        + `join_ms=${e.payload.duration} ms=${Date.now() - t0}`);
  });

  await consumer.connect();
  await consumer.subscribe({ topic: a.input, fromBeginning: true });

  const idleTimer = setInterval(() => {
    if (Date.now() - lastActivity > a['idle-exit-seconds'] * 1000) stop(0, 'idle');
  }, 200);
  idleTimer.unref();

  await consumer.run({
    autoCommit: false,
    // Resolve (advance the in-memory position) only after the transaction committed.
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
      if (batch.messages.length === 0 || !isRunning() || isStale()) return;
      lastActivity = Date.now();
      const lastOffset = batch.lastOffset();
      const next = String(BigInt(lastOffset) + 1n);
      const txn = await producer.transaction();
      try {
        await txn.send({ topic: a.output, acks: -1, messages: batch.messages.map(transform) });
        await txn.sendOffsets({
          consumerGroupId: a.group,
          topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }],
        });
        await txn.commit();
      } catch (e) {
        stats.aborted += 1;
        console.error(`eos_pipeline.js: transaction for ${batch.topic}[${batch.partition}] `
                      + `${batch.firstOffset()}..${lastOffset} failed, aborting: ${e && e.stack ? e.stack : e}`);
        try {
          await txn.abort();
        } catch (e2) {
          // The producer cannot go on (for example: fenced). A supervisor restarts the service.
          console.error(`eos_pipeline.js: abort failed: ${e2 && e2.stack ? e2.stack : e2}`);
          stop(1, 'abort failed');
        }
        throw e;
      }
      resolveOffset(lastOffset);
      stats.txns += 1;
      stats.records += batch.messages.length;
      lastActivity = Date.now();
      say(`COMMIT p=${batch.partition} first=${batch.firstOffset()} next=${next} n=${batch.messages.length} `
          + `txns=${stats.txns} records=${stats.records} ms=${Date.now() - t0}`);
      await heartbeat();
    },
  });
}

main().catch((e) => {
  console.error(`eos_pipeline.js failed: ${e && e.stack ? e.stack : e}`);
  say('EXIT 1 failed');
  process.exit(1);
});

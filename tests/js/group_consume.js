#!/usr/bin/env node
// Consume with KafkaJS as a member of a consumer group (subscribe, fromBeginning) until
// --count records arrived, committing after every batch, and print what was consumed as JSON.
//
//   node group_consume.js --broker 127.0.0.1:9092 --topic t --group g --count 120
//                         [--timeout-ms 60000]
//
// stdout: {"consumed": [[partition, offset, value], ...], "assigned": [partitions]}
// (tests/integration/test_groups_clients.py). Exit 3 on timeout.
'use strict';

const { Kafka, logLevel } = require('kafkajs');

function args(argv) {
  const out = { 'timeout-ms': 60000 };
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ['count', 'timeout-ms']) out[k] = Number(out[k]);
  return out;
}

async function main() {
  const a = args(process.argv.slice(2));
  if (!a.broker || !a.topic || !a.group || !Number.isInteger(a.count)) {
    throw new Error('need --broker, --topic, --group, --count');
  }
  const timer = setTimeout(() => {
    console.error(`group_consume.js: timed out after ${a['timeout-ms']} ms`);
    process.exit(3);
  }, a['timeout-ms']);
  timer.unref();

  const kafka = new Kafka({
    clientId: 'minibroker-it-kafkajs-group',
    brokers: [a.broker],
    logLevel: logLevel.WARN,
    connectionTimeout: 5000,
    requestTimeout: 30000,
    retry: { retries: 5 },
  });
  const consumer = kafka.consumer({
    groupId: a.group,
    sessionTimeout: 10000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 100,
    allowAutoTopicCreation: false,
  });
  const consumed = [];
  const assigned = new Set();
  let resolveDone;
  const done = new Promise((resolve) => { resolveDone = resolve; });
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    for (const p of (e.payload.memberAssignment[a.topic] || [])) assigned.add(p);
  });

  await consumer.connect();
  await consumer.subscribe({ topic: a.topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      if (batch.messages.length === 0) return;
      for (const m of batch.messages) {
        consumed.push([batch.partition, Number(m.offset), m.value.toString()]);
        resolveOffset(m.offset);
      }
      const next = (BigInt(batch.lastOffset()) + 1n).toString();
      await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next }]);
      await heartbeat();
      if (consumed.length >= a.count) resolveDone();
    },
  });
  await done;
  await consumer.disconnect();
  process.stdout.write(JSON.stringify({ consumed, assigned: [...assigned].sort((x, y) => x - y) }) + '\n');
}

main().catch((e) => {
  console.error(`group_consume.js failed: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});

#!/usr/bin/env node
// Produce N messages with KafkaJS (acks -1) and print where each one landed, as JSON.
//
//   node produce.js --broker 127.0.0.1:9092 --topic t --count 5000 --partitions 4
//                   [--batch 250] [--compression none|gzip] [--timeout-ms 120000]
//
// Message i goes to partition i % partitions with key "k<i>" and value
// "js-<i>-" followed by (i * 53) % 3000 'y's (tests/integration/test_kafkajs.py
// rebuilds the same values). stdout: {"acked": [[i, partition, offset], ...]}.
'use strict';

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const { Kafka, CompressionTypes, logLevel } = require('kafkajs');

function args(argv) {
  const out = { batch: 250, compression: 'none', 'timeout-ms': 120000, partitions: 1 };
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ['batch', 'timeout-ms', 'partitions', 'count']) out[k] = Number(out[k]);
  return out;
}

function value(i) {
  return `js-${i}-` + 'y'.repeat((i * 53) % 3000);
}

async function main() {
  const a = args(process.argv.slice(2));
  if (!a.broker || !a.topic || !Number.isInteger(a.count)) throw new Error('need --broker, --topic, --count');
  const timer = setTimeout(() => {
    console.error(`produce.js: timed out after ${a['timeout-ms']} ms`);
    process.exit(3);
  }, a['timeout-ms']);
  timer.unref();

  const kafka = new Kafka({
    clientId: 'minibroker-it-kafkajs',
    brokers: [a.broker],
    logLevel: logLevel.WARN,
    connectionTimeout: 5000,
    requestTimeout: 30000,
    retry: { retries: 3 },
  });
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  const compression = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }[a.compression];
  if (compression === undefined) throw new Error(`unsupported --compression ${a.compression}`);
  await producer.connect();
  const acked = [];
  try {
    for (let start = 0; start < a.count; start += a.batch) {
      const ids = [];
      for (let i = start; i < Math.min(a.count, start + a.batch); i++) ids.push(i);
      const messages = ids.map((i) => ({ key: `k${i}`, value: value(i), partition: i % a.partitions }));
      const meta = await producer.send({ topic: a.topic, acks: -1, compression, messages });
      const base = new Map();
      for (const m of meta) {
        if (m.errorCode !== 0) throw new Error(`partition ${m.partition}: error ${m.errorCode}`);
        base.set(m.partition, BigInt(m.baseOffset));
      }
      // Messages of one partition in one send form one batch, in order.
      const next = new Map();
      for (const i of ids) {
        const p = i % a.partitions;
        const k = next.get(p) || 0n;
        next.set(p, k + 1n);
        if (!base.has(p)) throw new Error(`no metadata for partition ${p}`);
        acked.push([i, p, Number(base.get(p) + k)]);
      }
    }
  } finally {
    await producer.disconnect();
  }
  process.stdout.write(JSON.stringify({ acked }) + '\n');
}

main().catch((e) => {
  console.error(`produce.js failed: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});

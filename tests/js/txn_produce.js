#!/usr/bin/env node
// Transactional produce with KafkaJS: one transaction per entry of --plan, each ended by
// commit or abort, and print where every record landed, as JSON.
//
//   node txn_produce.js --broker 127.0.0.1:9092 --topic t --partitions 3 --per-partition 10
//                       --transactional-id tid [--plan commit,abort,commit] [--timeout-ms 60000]
//                       [--ssl-ca ca.crt] [--sasl-mechanism scram-sha-512 --sasl-username u
//                        --sasl-password p]
//
// Transaction k sends, in one txn.send(), --per-partition records to every partition p:
// key "t<k>-p<p>-<i>", value "t<k>-p<p>-<i>|" + 'z' x ((i * 29 + k * 7) % 500)
// (tests/integration/test_txn_kafkajs.py rebuilds the same values), then commits or aborts.
// stdout: {"acked": [[k, p, i, offset], ...], "ended": ["commit", "abort", ...]}.
'use strict';

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const { Kafka, logLevel } = require('kafkajs');

function args(argv) {
  const out = { plan: 'commit,abort,commit', 'timeout-ms': 60000 };
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ['partitions', 'per-partition', 'timeout-ms']) out[k] = Number(out[k]);
  return out;
}

function value(k, p, i) {
  return `t${k}-p${p}-${i}|` + 'z'.repeat((i * 29 + k * 7) % 500);
}

async function main() {
  const a = args(process.argv.slice(2));
  if (!a.broker || !a.topic || !a['transactional-id'] || !Number.isInteger(a.partitions)
      || !Number.isInteger(a['per-partition'])) {
    throw new Error('need --broker, --topic, --partitions, --per-partition, --transactional-id');
  }
  const timer = setTimeout(() => {
    console.error(`txn_produce.js: timed out after ${a['timeout-ms']} ms`);
    process.exit(3);
  }, a['timeout-ms']);
  timer.unref();

  const security = {};
  if (a['ssl-ca']) security.ssl = { ca: [require('fs').readFileSync(a['ssl-ca'], 'utf8')] };
  if (a['sasl-mechanism']) {
    security.sasl = { mechanism: a['sasl-mechanism'], username: a['sasl-username'],
                      password: a['sasl-password'] };
  }
  const kafka = new Kafka({
    ...security,
    clientId: 'minibroker-it-kafkajs-txn',
    brokers: [a.broker],
    logLevel: logLevel.WARN,
    connectionTimeout: 5000,
    requestTimeout: 30000,
    retry: { retries: 3 },
  });
  const producer = kafka.producer({
    transactionalId: a['transactional-id'],
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
  });
  await producer.connect();
  const acked = [];
  const ended = [];
  try {
    const plan = a.plan.split(',');
    for (let k = 0; k < plan.length; k++) {
      const txn = await producer.transaction();
      const messages = [];
      const ids = [];
      for (let p = 0; p < a.partitions; p++) {
        for (let i = 0; i < a['per-partition']; i++) {
          messages.push({ key: `t${k}-p${p}-${i}`, value: value(k, p, i), partition: p });
          ids.push([p, i]);
        }
      }
      let meta;
      try {
        meta = await txn.send({ topic: a.topic, acks: -1, messages });
      } catch (e) {
        await txn.abort();
        throw e;
      }
      const base = new Map();
      for (const m of meta) {
        if (m.errorCode !== 0) throw new Error(`partition ${m.partition}: error ${m.errorCode}`);
        base.set(m.partition, BigInt(m.baseOffset));
      }
      // One send: the records of one partition form one batch, in order.
      for (const [p, i] of ids) {
        if (!base.has(p)) throw new Error(`no metadata for partition ${p}`);
        acked.push([k, p, i, Number(base.get(p) + BigInt(i))]);
      }
      if (plan[k] === 'commit') {
        await txn.commit();
      } else if (plan[k] === 'abort') {
        await txn.abort();
      } else {
        throw new Error(`bad plan entry ${plan[k]}`);
      }
      ended.push(plan[k]);
    }
  } finally {
    await producer.disconnect();
  }
  process.stdout.write(JSON.stringify({ acked, ended }) + '\n');
}

main().catch((e) => {
  console.error(`txn_produce.js failed: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});

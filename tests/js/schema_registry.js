#!/usr/bin/env node
// KafkaJS with @kafkajs/confluent-schema-registry against minibroker's built-in Schema Registry
// (tests/integration/test_schema_registry_kafkajs.py, issue 34): for one format, register v1 under
// TOPIC-value, encode and produce a record with it; register v2 (a compatible change), produce with
// it; try a third, incompatible schema (the registry's 409); consume COUNT records from the topic's
// start and decode each with the registry's schema by id.
//
//   node schema_registry.js --broker 127.0.0.1:9092 --registry http://127.0.0.1:8081 --topic t
//        --type AVRO|JSON|PROTOBUF --v1 SCHEMA --v2 SCHEMA --bad SCHEMA
//        --r1 JSON --r2 JSON --count N [--timeout-ms 120000]
//
// stdout: {"ids": [id1, id2], "versions": [...], "compat": "...", "bad": {"status": ..., "name": ...},
//          "decoded": [record, ...], "hex": [value as hex, ...]}
'use strict';

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const { Kafka, logLevel } = require('kafkajs');
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');

function args(argv) {
  const out = { 'timeout-ms': 120000 };
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  out.count = Number(out.count);
  out['timeout-ms'] = Number(out['timeout-ms']);
  return out;
}

function plain(v) {
  // protobufjs messages and Long values into JSON the test compares
  return JSON.parse(JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? Number(x) : x)));
}

async function main() {
  const a = args(process.argv.slice(2));
  for (const k of ['broker', 'registry', 'topic', 'type', 'v1', 'v2', 'bad', 'r1', 'r2']) {
    if (a[k] === undefined) throw new Error(`need --${k}`);
  }
  const timer = setTimeout(() => {
    console.error(`schema_registry.js: timed out after ${a['timeout-ms']} ms`);
    process.exit(3);
  }, a['timeout-ms']);
  timer.unref();

  const type = SchemaType[a.type];
  const subject = `${a.topic}-value`;
  const registry = new SchemaRegistry({ host: a.registry, clientId: 'minibroker-it' });
  const kafka = new Kafka({ clientId: 'minibroker-it-sr', brokers: [a.broker], logLevel: logLevel.NOTHING });

  const out = {};
  // register() first asks GET /config/{subject}: a 404 there means a first registration, after
  // which the package sets the subject's level (BACKWARD, its default) with PUT /config/{subject}
  const r1 = await registry.register({ type, schema: a.v1 }, { subject });
  const r2 = await registry.register({ type, schema: a.v2 }, { subject });
  out.ids = [r1.id, r2.id];
  out.latest = await registry.getLatestSchemaId(subject);
  out.lookup = await registry.getRegistryIdBySchema(subject, { type, schema: a.v1 });

  const producer = kafka.producer({ allowAutoTopicCreation: true });
  await producer.connect();
  await producer.send({
    topic: a.topic,
    acks: -1,
    messages: [
      { value: await registry.encode(r1.id, JSON.parse(a.r1)) },
      { value: await registry.encode(r2.id, JSON.parse(a.r2)) },
    ],
  });
  await producer.disconnect();

  try {
    await registry.register({ type, schema: a.bad }, { subject });
    out.bad = { status: 200 };
  } catch (e) {
    out.bad = { status: e.status, name: e.name, message: String(e.message) };
  }

  const consumer = kafka.consumer({ groupId: `g-${a.topic}-js`, sessionTimeout: 30000 });
  await consumer.connect();
  await consumer.subscribe({ topic: a.topic, fromBeginning: true });
  const values = [];
  await new Promise((resolve, reject) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value);
        if (values.length >= a.count) resolve();
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  out.decoded = [];
  for (const v of values.slice(0, a.count)) out.decoded.push(plain(await registry.decode(v)));
  out.hex = values.slice(0, a.count).map((v) => v.toString('hex'));
  console.log(JSON.stringify(out));
}

main().then(() => process.exit(0), (e) => {
  console.error(`schema_registry.js: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});

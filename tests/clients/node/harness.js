#!/usr/bin/env node
// kafkajs driven by kafkalite's client-matrix tests (tests/clients/test_node.py).
//
//   node harness.js produce --bootstrap H:P --topic T --count N --partitions P [--prefix S]
//   node harness.js consume --bootstrap H:P --topic T --group G --max-records N [--commit]
//                           [--client-id C] [--timeout SECONDS]
//
// Every stdout line is one JSON object with an "event" field: produced, done,
// assigned, record, committed, error, closed. produce sends record i (key "k<i>",
// value "<prefix>-<i>") to partition i % P. consume joins the group (autoCommit
// off), stops after N records, commits the offset after the last record of each
// partition with commitOffsets if --commit, and disconnects (leaving the group).
// kafkajs's own log goes to stderr.
'use strict';

const { Kafka, logLevel } = require('kafkajs');

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith('--')) continue;
    const key = argv[i].slice(2);
    if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) opts[key] = argv[++i];
    else opts[key] = true;
  }
  return opts;
}

const stderrLog = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log;
  process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`);
};

async function produce(kafka, o) {
  const count = Number(o.count);
  const partitions = Number(o.partitions || 1);
  const prefix = o.prefix || 'v';
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const messages = [];
  for (let i = 0; i < count; i++) {
    messages.push({ key: `k${i}`, value: `${prefix}-${i}`, partition: i % partitions });
  }
  const acks = await producer.send({ topic: o.topic, messages, acks: -1 });
  // one ack per partition, with the base offset of that partition's batch
  const base = new Map(acks.map((a) => [a.partition, Number(a.baseOffset)]));
  const seen = new Map();
  for (const m of messages) {
    const n = seen.get(m.partition) || 0;
    seen.set(m.partition, n + 1);
    emit('produced', { topic: o.topic, partition: m.partition, offset: base.get(m.partition) + n, key: m.key });
  }
  await producer.disconnect();
  emit('done', { count });
}

async function consume(kafka, o) {
  const maxRecords = Number(o['max-records']);
  const consumer = kafka.consumer({
    groupId: o.group,
    sessionTimeout: 10000,
    heartbeatInterval: 1000,
    maxWaitTimeInMs: 500,
    retry: { retries: 5 },
  });
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const partitions = [];
    for (const [topic, ps] of Object.entries(payload.memberAssignment)) {
      for (const p of [...ps].sort((a, b) => a - b)) partitions.push([topic, p]);
    }
    emit('assigned', { partitions, member_id: payload.memberId, leader: payload.isLeader, protocol: payload.groupProtocol });
  });
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    emit('error', { where: 'crash', error: payload.error && payload.error.name, message: String(payload.error && payload.error.message) });
  });

  const next = new Map();
  let consumed = 0;
  let finish;
  const finished = new Promise((resolve) => { finish = resolve; });

  await consumer.connect();
  await consumer.subscribe({ topics: [o.topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      if (consumed >= maxRecords) return; // already done: the rest of the batch is not ours
      consumed++;
      const offset = Number(message.offset);
      next.set(partition, offset + 1);
      emit('record', {
        topic, partition, offset,
        key: message.key && message.key.toString(), value: message.value && message.value.toString(),
      });
      if (consumed >= maxRecords) finish();
    },
  });
  await finished;
  consumer.pause([{ topic: o.topic }]);
  if (o.commit) {
    const offsets = [...next].map(([partition, offset]) => ({ topic: o.topic, partition, offset: String(offset) }));
    await consumer.commitOffsets(offsets);
    emit('committed', { offsets: offsets.map((x) => [x.topic, x.partition, Number(x.offset)]) });
  }
  await consumer.disconnect(); // stops, leaves the group
  emit('closed');
}

async function main() {
  const mode = process.argv[2];
  const o = parseArgs(process.argv.slice(3));
  const kafka = new Kafka({
    clientId: o['client-id'] || 'kafkalite-kafkajs',
    brokers: [o.bootstrap],
    logLevel: logLevel.WARN,
    logCreator: stderrLog,
    connectionTimeout: 10000,
  });
  const timeout = setTimeout(() => {
    emit('error', { where: 'timeout', error: 'Timeout', message: `no result within ${o.timeout || 60}s` });
    process.exit(1);
  }, 1000 * Number(o.timeout || 60));
  if (mode === 'produce') await produce(kafka, o);
  else if (mode === 'consume') await consume(kafka, o);
  else throw new Error(`unknown mode ${mode}`);
  clearTimeout(timeout);
}

main().catch((e) => {
  emit('error', { where: 'main', error: e.name, message: String(e.message) });
  process.exit(1);
});

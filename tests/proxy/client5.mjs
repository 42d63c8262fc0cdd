// Child process: the official RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs) against
// a proxy; its gRPC is @grpc/grpc-js, over Node's own HTTP/2. Run with NODE_PATH naming the
// node_modules that holds it (scripts/bootstrap.sh installs it in .cache/node5). Prints one JSON
// object per line; the last one is {"done": true}. CLIENT5_AK / CLIENT5_SK in the environment:
// the client's ACL credentials (it signs every call with them).
//
//   node client5.mjs ENDPOINT send TOPIC N              normal messages, one send at a time
//   node client5.mjs ENDPOINT fifo TOPIC N GROUPS       FIFO messages over GROUPS message groups
//   node client5.mjs ENDPOINT receive TOPIC N GROUP [MS] a SimpleConsumer receives and acks N,
//                                                       each invisible for MS (15,000) meanwhile
//   node client5.mjs ENDPOINT push TOPIC N GROUP        a PushConsumer until it consumed N distinct
//                                                       bodies (60 s at most); a line per 1,000
//   node client5.mjs ENDPOINT send_refused TOPIC        one send, expected to fail: its error
//   node client5.mjs ENDPOINT commit|rollback TOPIC     a half message, then that resolution
//   node client5.mjs ENDPOINT check TOPIC               a half message left open: the broker's
//                                                       check reaches the checker, which commits
//   node client5.mjs ENDPOINT redeliver TOPIC 1 GROUP   receive one invisible for 1 s, no ack: it
//                                                       comes again, and is acked then
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { ConsumeResult, Producer, PushConsumer, SimpleConsumer } = require('rocketmq-client-nodejs');
// the checker's answer: the generated protobuf enum, which the package's index does not export
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const [endpoint, scenario, topic, countText, extra, invisibleText] = process.argv.slice(2);
const count = Number(countText || '1');
const out = (values) => process.stdout.write(`${JSON.stringify(values)}\n`);
// what every client of this run is made with: the endpoint, and the keys if any
const base = { endpoints: endpoint };
if (process.env.CLIENT5_AK) {
  base.sessionCredentials = { accessKey: process.env.CLIENT5_AK, accessSecret: process.env.CLIENT5_SK ?? '' };
}

async function send(fifoGroups) {
  const producer = new Producer({ ...base, topics: [topic] });
  await producer.startup();
  try {
    for (let i = 0; i < count; i++) {
      const message = { topic, tag: 'TagN', keys: [`key-${i}`], body: Buffer.from(`node-${i}`) };
      if (fifoGroups) message.messageGroup = `g${i % fifoGroups}`;
      const receipt = await producer.send(message);
      out({ sent: i, id: receipt.messageId, queue: receipt.messageQueue?.queueId ?? null,
        offset: Number(receipt.offset ?? -1) });
    }
  } finally {
    await producer.shutdown();
  }
}

async function receive(group, redeliver) {
  const consumer = new SimpleConsumer({
    ...base, consumerGroup: group, subscriptions: new Map().set(topic, '*'),
    awaitDuration: 5000, // long polling: the proxy's least by default (grpcClientConsumerMinLongPollingTimeoutMillis)
  });
  await consumer.startup();
  const deadline = Date.now() + 30000;
  const seen = new Set();
  let acked = 0;
  try {
    while (acked < count && Date.now() < deadline) {
      const messages = await consumer.receive(Math.min(16, count - acked), redeliver ? 1000 : Number(invisibleText || '15000'));
      for (const m of messages) {
        out({ id: m.messageId, body: m.body.toString(), tag: m.tag ?? null, keys: m.keys,
          attempt: m.deliveryAttempt, group: m.messageGroup ?? null });
        if (redeliver && !seen.has(m.messageId)) {
          seen.add(m.messageId); // left invisible: the proxy hands it out again after 1 s
          continue;
        }
        await consumer.ack(m);
        acked++;
      }
    }
  } finally {
    await consumer.shutdown();
  }
}

async function sendRefused() {
  const producer = new Producer({ ...base, topics: [topic] });
  try {
    await producer.startup();
    await producer.send({ topic, body: Buffer.from('refused') });
    out({ error: null });
  } catch (err) {
    out({ error: err?.name ?? 'Error', text: String(err?.message ?? err) });
  } finally {
    await producer.shutdown().catch(() => {});
  }
}

async function push(group) {
  const bodies = new Set();
  let deliveries = 0;
  let enough = null;
  const done = new Promise((resolve) => { enough = resolve; });
  const consumer = new PushConsumer({
    ...base, consumerGroup: group, subscriptions: new Map([[topic, '*']]),
    messageListener: {
      async consume(view) {
        deliveries++;
        bodies.add(view.body.toString());
        if (bodies.size % 1000 === 0) out({ consumed: bodies.size });
        if (bodies.size >= count) enough();
        return ConsumeResult.SUCCESS;
      },
    },
  });
  await consumer.startup();
  try {
    const timeout = new Promise((resolve) => setTimeout(resolve, 60000));
    await Promise.race([done, timeout]);
  } finally {
    out({ distinct: bodies.size, deliveries });
    await consumer.shutdown();
  }
}

async function transaction(how) {
  let checked = null;
  const checker = {
    async check(view) {
      out({ checked: view.messageId, body: view.body.toString() });
      checked?.();
      return TransactionResolution.COMMIT;
    },
  };
  const wasChecked = new Promise((resolve) => { checked = resolve; });
  const producer = new Producer({ ...base, topics: [topic], checker });
  await producer.startup();
  try {
    const tx = producer.beginTransaction();
    const receipt = await producer.send({ topic, tag: 'TagT', body: Buffer.from(`tx-${how}`) }, tx);
    out({ sent: receipt.messageId });
    if (how === 'commit') await tx.commit();
    else if (how === 'rollback') await tx.rollback();
    else {
      const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('no check in 20 s')), 20000));
      await Promise.race([wasChecked, timeout]);
      out({ was_checked: true });
      await new Promise((resolve) => setTimeout(resolve, 500)); // its EndTransaction goes out
    }
    if (how !== 'check') out({ ended: how });
  } finally {
    await producer.shutdown();
  }
}

async function main() {
  if (scenario === 'send') await send(0);
  else if (scenario === 'fifo') await send(Number(extra));
  else if (scenario === 'receive') await receive(extra, false);
  else if (scenario === 'redeliver') await receive(extra, true);
  else if (scenario === 'push') await push(extra);
  else if (scenario === 'send_refused') await sendRefused();
  else if (['commit', 'rollback', 'check'].includes(scenario)) await transaction(scenario);
  else throw new Error(`unknown scenario ${scenario}`);
  out({ done: true });
}

main().then(() => process.exit(0), (err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});

#!/usr/bin/env node
// `npm run bench:framing-memory`: what a body costs the service when it comes in tiny chunks.
import { Option, createCommand, wholeNumber } from '@sluice/db/command-line';

const opts = createCommand(
  'npm run bench:framing-memory --',
  "What a POST /users body costs the service when it is framed in tiny chunks (Transfer-Encoding: chunked, one byte a chunk): a body of --users users, and one of MAX_BODY_BYTES, each sent by --clients clients at once, on a fresh PostgreSQL. Reports each answer, the service's RSS before and at its peak, and its growth per body byte.",
)
  .addOption(
    new Option('--users <n>', 'users in the first body')
      .env('USERS')
      .argParser(wholeNumber(1))
      .default(10_000),
  )
  .addOption(
    new Option('--chunk <bytes>', 'bytes in each chunk')
      .env('CHUNK')
      .argParser(wholeNumber(1))
      .default(1),
  )
  .addOption(
    new Option('--clients <n>', 'clients sending such a body at once')
      .env('CLIENTS')
      .argParser(wholeNumber(1))
      .default(1),
  )
  .addOption(
    new Option(
      '--server <server.js>',
      "another checkout's service/src/server.js, to measure that one instead (before/after)",
    ).env('SERVER'),
  )
  .parse()
  .opts();
const USERS = /** @type {number} */ (opts.users);
const CHUNK = /** @type {number} */ (opts.chunk);
const CLIENTS = /** @type {number} */ (opts.clients);
const SERVER = /** @type {string | undefined} */ (opts.server);

const net = await import('node:net');
const { readFileSync } = await import('node:fs');
const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { migrate } = await import('@sluice/db/migrate');
const { startServerProcess } = await import('../test/support/server-process.js');
const { makeUsers } = await import('../test/support/users.js');
const { sampleRss } = await import('./lib/process-stats.js');

/** @param {string} m */
const say = (m) => console.error(`[bench:framing-memory] ${m}`);
const MAX_BODY_BYTES = 10 * 1024 * 1024;

/**
 * The body framed as chunks of `size` bytes, as one buffer: the server's parser sees each chunk
 * alone whatever TCP does with the bytes.
 * @param {Buffer} body @param {number} size
 */
function chunked(body, size) {
  const parts = [];
  const head = `${size.toString(16)}\r\n`;
  for (let at = 0; at < body.length; at += size) {
    const piece = body.subarray(at, at + size);
    parts.push(piece.length === size ? head : `${piece.length.toString(16)}\r\n`, piece, '\r\n');
  }
  parts.push('0\r\n\r\n');
  return Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
}

/**
 * Sends one framed body over a raw socket and resolves with the status line (or the error).
 * @param {string} baseUrl @param {Buffer} framed
 */
function send(baseUrl, framed) {
  const { port } = new URL(baseUrl);
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = net.connect(Number(port), '127.0.0.1');
    let answer = '';
    socket.on('data', (d) => {
      answer += d.toString('latin1');
    });
    const done = (/** @type {string} */ outcome) =>
      resolve({ outcome, seconds: Number(((performance.now() - started) / 1000).toFixed(1)) });
    socket.on('error', (err) =>
      done(`${answer.split('\r\n')[0] || 'no answer'} (${/** @type {any} */ (err).code})`),
    );
    socket.on('close', () => done(answer.split('\r\n')[0] || 'closed without an answer'));
    socket.write(
      'POST /users HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n',
    );
    socket.write(framed);
  });
}

/** @param {number} pid */
function rssMiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

const pgServer = await startLocalPostgres({
  dataDir: await tempDataDir('sluice-bench-framing-'),
  persistent: false,
  durable: true,
});
await migrate(pgServer.url);
const service = await startServerProcess(
  { DATABASE_URL: pgServer.url, LOG_LEVEL: 'warn' },
  SERVER ? { script: SERVER } : {},
);
const pid = /** @type {number} */ (service.child.pid);
try {
  const users = Buffer.from(JSON.stringify(makeUsers(USERS, 'framing')));
  // A body at the limit: valid JSON padded with spaces, so what is measured is the reading.
  const atLimit = Buffer.alloc(MAX_BODY_BYTES, 0x20);
  Buffer.from('[{"email":"limit@example.com","name":"at the limit"}]').copy(atLimit);
  const rows = [];
  for (const [name, body] of /** @type {const} */ ([
    [`${USERS} users`, users],
    ['MAX_BODY_BYTES of JSON', atLimit],
  ])) {
    const framed = chunked(body, CHUNK);
    const before = rssMiB(pid);
    say(
      `${name}: ${body.length.toLocaleString('en')} bytes as ${Math.ceil(body.length / CHUNK).toLocaleString('en')} chunks (${framed.length.toLocaleString('en')} bytes framed), ${CLIENTS} at once`,
    );
    const stopSampling = sampleRss(pid, 20);
    const answers = await Promise.all(
      Array.from({ length: CLIENTS }, () => send(service.baseUrl, framed)),
    );
    const peak = await stopSampling();
    const alive = service.child.exitCode === null && service.child.signalCode === null;
    rows.push({
      body: name,
      bodyBytes: body.length,
      chunks: Math.ceil(body.length / CHUNK),
      clients: CLIENTS,
      answers,
      rssBeforeMiB: Math.round(before),
      rssPeakMiB: Math.round(peak),
      growthMiB: Math.round(peak - before),
      growthPerBodyByte: Number((((peak - before) * 2 ** 20) / (body.length * CLIENTS)).toFixed(2)),
      serviceAlive: alive,
    });
    if (!alive) break;
  }
  console.log(JSON.stringify(rows, null, 2));
  if (process.env.SHOW_LOG) console.log(service.logs);
} finally {
  await service.stop();
  await pgServer.stop();
}

#!/usr/bin/env node
// `npm run bench:tracing-spans`: what the service's spans cost a request in this process, the SDK
// alone: no HTTP server, no database. The tracing SDK as the service loads it (tracing/sdk.js: the
// batch processor, OTLP/protobuf), exporting to a receiver in another process that reads and drops
// what it gets, so that only the sending side's CPU is counted.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Option, createCommand, wholeNumber } from '@sluice/db/command-line';

const SAMPLERS = ['parentbased_always_on', 'parentbased_always_off'];
const opts = createCommand(
  'npm run bench:tracing-spans --',
  "The CPU a single-user request's spans cost in this process: its request span with the service's attributes, then with the write's span, then with the three steps' too (each shape's run interleaved with the others', round after round; the median quoted), the spans exported over OTLP/protobuf by the batch processor to a receiver in another process. Prints JSON.",
)
  .addOption(
    new Option('--requests <n>', 'requests a run').argParser(wholeNumber(1000)).default(20_000),
  )
  .addOption(new Option('--rounds <n>', 'runs of each shape').argParser(wholeNumber(1)).default(5))
  .addOption(
    new Option('--sampler <name>', 'OTEL_TRACES_SAMPLER').choices(SAMPLERS).default(SAMPLERS[0]),
  )
  .parse()
  .opts();

// A receiver that reads and drops: OTLP/HTTP wants a 200 and nothing more.
const receiver = spawn(
  process.execPath,
  [
    '-e',
    `
  const server = require('node:http').createServer((req, res) => { req.resume(); req.on('end', () => res.end()); });
  server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`,
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const [port] = /** @type {[Buffer]} */ (
  await once(/** @type {import('node:stream').Readable} */ (receiver.stdout), 'data')
);
Object.assign(process.env, {
  OTEL_TRACES_EXPORTER: 'otlp',
  OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${String(port).trim()}`,
  OTEL_TRACES_SAMPLER: opts.sampler,
  // Room for every span of a run: a span dropped would be a span not paid for.
  OTEL_BSP_MAX_QUEUE_SIZE: '100000',
});
const { loadTracingConfig } = await import('@sluice/env');
const { startTracing } = await import('../service/src/tracing/tracing.js');
const tracing = await startTracing(loadTracingConfig());
const otel = await import('@opentelemetry/api');
const { median, range } = await import('./lib/stats.js');
const tracer = otel.trace.getTracer('sluice-service');

/** The request span's attributes, as tracedRequests sets them for a k6 client. */
const requestAttributes = {
  'http.request.method': 'POST',
  'url.path': '/users',
  'url.scheme': 'http',
  'server.address': '127.0.0.1',
  'server.port': 3000,
  'client.address': '127.0.0.1',
  'network.protocol.version': '1.1',
  'user_agent.original': 'Grafana k6/1.4.2',
};

/** @typedef {'request' | 'request + write' | 'request + write + steps'} Shape */
/** @type {Shape[]} */
const SHAPES = ['request', 'request + write', 'request + write + steps'];

/** One request's spans, shaped as the service makes them. @param {Shape} shape */
function request(shape) {
  const span = tracer.startSpan('POST', {
    kind: otel.SpanKind.SERVER,
    attributes: requestAttributes,
  });
  const context = otel.trace.setSpan(otel.ROOT_CONTEXT, span);
  if (shape !== 'request') {
    const write = tracer.startSpan(
      'sluice.write',
      { attributes: { 'sluice.rows': 1, 'sluice.resolution': 'ignore' } },
      context,
    );
    write.setAttributes({
      'sluice.group.requests': 12,
      'sluice.group.rows': 12,
      'sluice.group.wait_ms': 1.25,
    });
    write.end();
  }
  if (shape === 'request + write + steps') {
    for (const name of ['sluice.admission', 'sluice.read_body', 'sluice.validate'])
      tracer.startSpan(name, {}, context).end();
  }
  span.setAttribute('http.route', '/users');
  span.updateName('POST /users');
  span.setAttribute('http.response.status_code', 201);
  span.end();
}

const yieldToExports = () => new Promise((resolve) => setImmediate(resolve));

/** CPU µs a request over a run, the exports it caused included. @param {Shape | 'none'} shape */
async function run(shape) {
  const before = process.cpuUsage();
  for (let i = 0; i < opts.requests; i++) {
    if (shape !== 'none') request(shape);
    // A request a turn of the event loop or so, as under load: the exports get their turn.
    if (i % 20 === 19) await yieldToExports();
  }
  const cpu = process.cpuUsage(before);
  return (cpu.user + cpu.system) / opts.requests;
}

for (const shape of SHAPES) await run(shape); // warm-up
/** @type {Record<string, number[]>} */
const figures = Object.fromEntries(['none', ...SHAPES].map((s) => [s, []]));
for (let round = 0; round < opts.rounds; round++) {
  for (const shape of /** @type {(Shape | 'none')[]} */ (['none', ...SHAPES]))
    figures[shape].push(await run(shape));
}
await tracing.flush(10_000);
receiver.kill();

const loop = median(figures.none);
console.log(
  JSON.stringify(
    {
      node: process.version,
      sampler: opts.sampler,
      requests: opts.requests,
      rounds: opts.rounds,
      // The loop alone, then each shape's CPU a request above it, with the range over rounds.
      loopMicros: Math.round(loop * 10) / 10,
      spansMicrosPerRequest: Object.fromEntries(
        SHAPES.map((s) => {
          const { min, max } = range(figures[s]);
          const above = (/** @type {number} */ v) => Math.round((v - loop) * 10) / 10;
          return [s, { median: above(median(figures[s])), min: above(min), max: above(max) }];
        }),
      ),
    },
    null,
    2,
  ),
);

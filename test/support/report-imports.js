// `node --import ./test/support/report-imports.js …`: each module specifier the process resolves
// that names OpenTelemetry (or its import hook) is printed on stdout as a JSON log line
// ({ msg: 'imported', specifier }), so a test can show tracing off loads none of it.
import { register } from 'node:module';
import { MessageChannel } from 'node:worker_threads';

const { port1, port2 } = new MessageChannel();
port1.on('message', (specifier) =>
  process.stdout.write(`${JSON.stringify({ msg: 'imported', specifier })}\n`),
);
port1.unref();
register('./report-imports-hooks.js', {
  parentURL: import.meta.url,
  data: { port: port2 },
  transferList: [port2],
});

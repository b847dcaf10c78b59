#!/usr/bin/env node
// `npm run bench:feeder-cold-start`: what loading the feeder's handler module costs a Lambda cold start.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Option, createCommand, wholeNumber } from '@sluice/db/command-line';

const opts = createCommand('npm run bench:feeder-cold-start --', "What loading the feeder's handler module costs a Lambda cold start: each run is a fresh Node process that times import('lambda/src/handler.js') alone (the runtime's own start is the same with or without it); the median and the range.")
  .addOption(new Option('--runs <n>', 'fresh processes').env('RUNS').argParser(wholeNumber(1)).default(15))
  .parse()
  .opts();
const RUNS = /** @type {number} */ (opts.runs);
const handlerUrl = new URL('../lambda/src/handler.js', import.meta.url).href;
const probe = `const t = performance.now(); await import(${JSON.stringify(handlerUrl)}); console.log(performance.now() - t);`;

const times = [];
for (let i = 0; i < RUNS; i++) {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', probe], { env: { ...process.env, SERVICE_URL: 'http://127.0.0.1:1' }, encoding: 'utf8' });
  times.push(Number(out.trim()));
}
times.sort((a, b) => a - b);
const median = times.length % 2 ? times[(times.length - 1) / 2] : (times[times.length / 2 - 1] + times[times.length / 2]) / 2;
console.log(`import ${fileURLToPath(handlerUrl)}: median ${median.toFixed(1)} ms over ${RUNS} fresh processes (min ${times[0].toFixed(1)}, max ${times.at(-1)?.toFixed(1)}); Node ${process.version}`);

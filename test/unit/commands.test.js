// Every command answers a person: `--help` prints its usage at once, starting nothing; an unknown
// option is one line naming it, then the same usage, exit 2. The commands are package.json's own
// scripts, read from it, so a new one cannot escape; each runs as its node entry point (not through
// npm, which costs a second process each), all at once.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, test } from 'node:test';
import { variablesReadBy } from '@sluice/db/command-line';
import { loadFeederConfig } from '../../lambda/src/config.js';
import { loadRunnerConfig } from '../../lambda/local/sqs-config.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const REFUSE_TO_START = fileURLToPath(new URL('../support/refuse-to-start.js', import.meta.url));
const TIMEOUT_MS = 20_000;
const execFileAsync = promisify(execFile);
/** @type {Record<string, string>} */
const scripts = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).scripts;

/**
 * A script as node's own arguments: `node [node options] file [arguments]`.
 * @param {string} script
 */
function entryPoint(script) {
  const [command, ...words] = script.trim().split(/\s+/);
  const at = words.findIndex((w) => !w.startsWith('-'));
  if (command !== 'node' || at < 0 || !words[at].endsWith('.js')) return undefined;
  return { nodeOptions: words.slice(0, at), file: words[at], args: words.slice(at + 1) };
}

/**
 * Runs an entry point with one more argument, as a user would add it after `--`, with every
 * attempt to start something refused (test/support/refuse-to-start.js).
 * @param {NonNullable<ReturnType<typeof entryPoint>>} entry
 * @param {string} extra
 * @returns {Promise<{ code: number | null, stdout: string, stderr: string }>}
 */
function run({ nodeOptions, file, args }, extra) {
  return execFileAsync(process.execPath, [...nodeOptions, '--import', REFUSE_TO_START, file, ...args, extra], { cwd: root, timeout: TIMEOUT_MS }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (/** @type {{ code: number | null, stdout: string, stderr: string }} */ err) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}

/**
 * How a person runs a script: `npm run bench:db --`. A script that runs another's entry point with
 * arguments (test:unit is `npm test -- --tier unit`) shows that one's usage.
 * @param {string} name
 */
function invocation(name) {
  const entry = entryPoint(scripts[name]);
  const owner = Object.keys(scripts).find((other) => {
    const e = entryPoint(scripts[other]);
    return e && entry && e.file === entry.file && e.args.length === 0;
  }) ?? name;
  return ['start', 'test'].includes(owner) ? `npm ${owner} --` : `npm run ${owner} --`;
}

// The service's own entry point is no npm script (npm start runs it, the Docker image's CMD too).
const SERVICE = '(the service)';
const commands = { ...scripts, [SERVICE]: 'node service/src/server.js' };
// Started here, all at once; each test below waits for its own.
const answers = Object.fromEntries(Object.entries(commands).map(([name, script]) => {
  const entry = entryPoint(script);
  return [name, entry && { help: run(entry, '--help'), bogus: run(entry, '--bogus-option') }];
}));

describe('every command answers --help and refuses an unknown option', () => {
  for (const [name, script] of Object.entries(commands)) {
    test(`${name}: ${script}`, async () => {
      const answer = answers[name];
      assert.ok(answer, `"${script}" is not \`node [options] <file>.js [arguments]\`: every command is a node entry point with a command line (db/src/command-line.js)`);
      const help = await answer.help;
      assert.doesNotMatch(help.stderr, /refuse-to-start/, '--help started something before answering');
      assert.equal(help.code, 0, `--help: exit code ${help.code}\n${help.stderr}`);
      assert.equal(help.stderr, '');
      const usage = `Usage: ${name === SERVICE ? script : invocation(name)} [options]`;
      assert.equal(help.stdout.split('\n')[0].slice(0, usage.length), usage, 'the usage comes first, and says how to run the command');
      assert.match(help.stdout, /\n {2}-h, --help +print this usage and exit\n/);

      const bogus = await answer.bogus;
      assert.doesNotMatch(bogus.stderr, /refuse-to-start/, '--bogus-option started something before refusing it');
      assert.equal(bogus.code, 2, `--bogus-option: exit code ${bogus.code}\n${bogus.stderr}`);
      assert.equal(bogus.stdout, '');
      assert.equal(bogus.stderr, `error: unknown option '--bogus-option'\n\n${help.stdout}`, 'one line naming the option, then the usage');
    });
  }

  test("npm start's and the service's usage list exactly the variables of docs/configuration.md's table", async () => {
    const table = readFileSync(path.join(root, 'docs/configuration.md'), 'utf8');
    const documented = [...table.matchAll(/^\| (.+?) \|/gm)].flatMap((m) => [...m[1].matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((v) => v[1]));
    assert.ok(documented.length > 10, 'docs/configuration.md has a table of the variables');
    for (const name of ['start', SERVICE]) {
      const { stdout } = await /** @type {NonNullable<typeof answers[string]>} */ (answers[name]).help;
      const listed = [...stdout.slice(stdout.indexOf('\nEnvironment:\n')).matchAll(/^ {2}([A-Z][A-Z0-9_]+)/gm)].map((m) => m[1]).filter((v) => v !== 'EMBEDDED_PG_PORT');
      assert.deepEqual([...listed].sort(), [...new Set(documented)].sort(), name);
    }
  });

  test("the feeder's usage names every variable the runner's and the handler's configurations read", async () => {
    // The loaders demand QUEUE_URL and SERVICE_URL; everything else they read is recorded.
    const required = { QUEUE_URL: 'http://127.0.0.1/queue', SERVICE_URL: 'http://127.0.0.1' };
    const read = Object.keys(variablesReadBy((env) => {
      const withRequired = new Proxy(env, { get: (target, name) => target[/** @type {string} */ (name)] ?? required[/** @type {keyof required} */ (name)] });
      return { ...loadRunnerConfig(withRequired), ...loadFeederConfig(withRequired) };
    }));
    assert.ok(read.includes('BATCH_SIZE') && read.includes('POST_CHUNK_ITEMS'));
    const { stdout } = await /** @type {NonNullable<typeof answers[string]>} */ (answers.feeder).help;
    for (const name of read) assert.match(stdout, new RegExp(`^ {2}${name} `, 'm'), name);
  });
});

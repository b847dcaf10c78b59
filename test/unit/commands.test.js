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
import { DATABASE_VARIABLES, MIGRATION_VARIABLES } from '@sluice/db/database-url';
import { TRACING_VARIABLES, describeEnv } from '@sluice/env';
import { FEEDER_VARIABLES } from '../../lambda/src/config.js';
import {
  ELASTICMQ_VARIABLES,
  RUNNER_VARIABLES,
  SQS_VARIABLES,
} from '../../lambda/local/sqs-config.js';
import { ERASURE_KEY_VARIABLES } from '../../scripts/command-erasure-key.js';
import { EMBEDDED_DIR_VARIABLES } from '../../scripts/embedded-database.js';
import { START_AND_SERVICE_VARIABLES } from '../../scripts/start-config.js';
import { SERVICE_VARIABLES } from '../../service/src/config.js';

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
  return execFileAsync(
    process.execPath,
    [...nodeOptions, '--import', REFUSE_TO_START, file, ...args, extra],
    { cwd: root, timeout: TIMEOUT_MS },
  ).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (/** @type {{ code: number | null, stdout: string, stderr: string }} */ err) => ({
      code: err.code,
      stdout: err.stdout,
      stderr: err.stderr,
    }),
  );
}

/**
 * How a person runs a script: `npm run bench:db --`. A script that runs another's entry point with
 * arguments (test:unit is `npm test -- --tier unit`) shows that one's usage.
 * @param {string} name
 */
function invocation(name) {
  const entry = entryPoint(scripts[name]);
  const owner =
    Object.keys(scripts).find((other) => {
      const e = entryPoint(scripts[other]);
      return e && entry && e.file === entry.file && e.args.length === 0;
    }) ?? name;
  return ['start', 'test'].includes(owner) ? `npm ${owner} --` : `npm run ${owner} --`;
}

// The service's own entry point is no npm script (npm start runs it, the Docker image's CMD too).
const SERVICE = '(the service)';
const commands = { ...scripts, [SERVICE]: 'node service/src/server.js' };
// Started here, all at once; each test below waits for its own.
const answers = Object.fromEntries(
  Object.entries(commands).map(([name, script]) => {
    const entry = entryPoint(script);
    return [name, entry && { help: run(entry, '--help'), bogus: run(entry, '--bogus-option') }];
  }),
);

describe('every command answers --help and refuses an unknown option', () => {
  for (const [name, script] of Object.entries(commands)) {
    test(`${name}: ${script}`, async () => {
      const answer = answers[name];
      assert.ok(
        answer,
        `"${script}" is not \`node [options] <file>.js [arguments]\`: every command is a node entry point with a command line (db/src/command-line.js)`,
      );
      const help = await answer.help;
      assert.doesNotMatch(
        help.stderr,
        /refuse-to-start/,
        '--help started something before answering',
      );
      assert.equal(help.code, 0, `--help: exit code ${help.code}\n${help.stderr}`);
      assert.equal(help.stderr, '');
      const usage = `Usage: ${name === SERVICE ? script : invocation(name)} [options]`;
      assert.equal(
        help.stdout.split('\n')[0].slice(0, usage.length),
        usage,
        'the usage comes first, and says how to run the command',
      );
      assert.match(help.stdout, /\n {2}-h, --help +print this usage and exit\n/);

      const bogus = await answer.bogus;
      assert.doesNotMatch(
        bogus.stderr,
        /refuse-to-start/,
        '--bogus-option started something before refusing it',
      );
      assert.equal(bogus.code, 2, `--bogus-option: exit code ${bogus.code}\n${bogus.stderr}`);
      assert.equal(bogus.stdout, '');
      assert.equal(
        bogus.stderr,
        `error: unknown option '--bogus-option'\n\n${help.stdout}`,
        'one line naming the option, then the usage',
      );
    });
  }

  // The usage is made from the declarations (environmentHelp): each command lists exactly what its loaders read.
  for (const [
    name,
    declarations,
  ] of /** @type {[string, import('@sluice/env/load-env').Declarations][]} */ ([
    ['start', START_AND_SERVICE_VARIABLES],
    [SERVICE, { ...DATABASE_VARIABLES, ...SERVICE_VARIABLES, ...TRACING_VARIABLES }],
    ['migrate', { ...MIGRATION_VARIABLES, ...DATABASE_VARIABLES }],
    ['quarantine', { ...DATABASE_VARIABLES, ...EMBEDDED_DIR_VARIABLES }],
    ['erase', { ...DATABASE_VARIABLES, ...EMBEDDED_DIR_VARIABLES, ...ERASURE_KEY_VARIABLES }],
    [
      'feeder',
      { ...SQS_VARIABLES, ...RUNNER_VARIABLES, ...FEEDER_VARIABLES, ...TRACING_VARIABLES },
    ],
    ['produce', { ...SQS_VARIABLES, ...TRACING_VARIABLES }],
    ['elasticmq', ELASTICMQ_VARIABLES],
  ])) {
    test(`${name}: its usage lists exactly the variables it declares, with their defaults`, async () => {
      const { stdout } = await /** @type {NonNullable<typeof answers[string]>} */ (answers[name])
        .help;
      const environment = stdout.slice(stdout.indexOf('\nEnvironment'));
      const listed = [...environment.matchAll(/^ {2}([A-Z][A-Z0-9_]+) /gm)].map((m) => m[1]);
      assert.deepEqual(listed, Object.keys(declarations));
      for (const d of describeEnv(declarations))
        assert.ok(
          stdout
            .replace(/\s+/g, ' ')
            .includes(d.defaultText === 'required' ? '(required)' : `(default: ${d.defaultText})`),
          `${d.name}: default ${d.defaultText}`,
        );
    });
  }
});

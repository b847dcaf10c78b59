// docs/feeder.md's "Running it locally", run as written: its shell blocks are read from the doc,
// each block a terminal, each command through sh in a process group of its own (a Ctrl-C is
// SIGINT to the group, as a terminal sends it), against real ElasticMQ and the real service.
// Three things differ from a person's run, each through the environment, never the commands:
// the ports (9324 and 3000 in the text become free ones, ELASTICMQ_PORT and PORT say so), and
// DATABASE_URL names this test's own database, so that `npm start` leaves .data/postgres alone.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { freePort } from '@sluice/db/local-postgres';
import { createTestDatabase } from '../../../test/support/database.js';
import { waitUntil } from '../../../test/support/wait.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const DOC = path.join(root, 'docs', 'feeder.md');
const SECTION = '## Running it locally';

/**
 * The section's shell blocks, each a list of commands: continuation lines joined, comments and
 * blank lines dropped.
 * @param {string} markdown
 */
function walkthroughBlocks(markdown) {
  const start = markdown.indexOf(SECTION);
  assert.ok(start >= 0, `docs/feeder.md has no "${SECTION}"`);
  const end = markdown.indexOf('\n## ', start + SECTION.length);
  const section = markdown.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map(([, body]) =>
    body
      .replace(/\\\n\s*/g, '')
      .split('\n')
      .map((line) => line.replace(/(^|\s)#.*$/, '').trim())
      .filter(Boolean),
  );
}

/**
 * How the test runs each command the walkthrough names, by its npm script: a long-running one,
 * what says it is ready and what says it stopped cleanly on Ctrl-C (npm itself then dies of the
 * SIGINT, as it does in a terminal, so the exit code alone says nothing); or one that runs to its
 * end. A command the doc gains must be taught here, so the test fails rather than skip it.
 * @type {Record<string, { runs: 'until-stopped', ready: RegExp, stopped: RegExp } | { runs: 'to-the-end' }>}
 */
const COMMANDS = {
  elasticmq: { runs: 'until-stopped', ready: /Ctrl-C stops it/, stopped: /elasticmq: stopped\n/ },
  start: { runs: 'until-stopped', ready: /"msg":"listening"/, stopped: /"msg":"stopped"/ },
  produce: { runs: 'to-the-end' },
  feeder: {
    runs: 'until-stopped',
    ready: /"message":"feeder polling"/,
    stopped: /"message":"feeder stopped"/,
  },
};

/**
 * The promise's value, or `late` once `ms` have passed; no timer left behind either way.
 * @template T @param {Promise<T>} promise @param {number} ms @param {string} late
 */
async function orAfter(promise, ms, late) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  try {
    return await Promise.race([
      promise,
      new Promise((resolve) => {
        timer = setTimeout(resolve, ms, late);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** @param {string} command */
const scriptOf = (command) =>
  /(?:^|\s)npm (?:run (\S+)|(start))(?:\s|$)/.exec(command)?.slice(1).find(Boolean);

/**
 * A command in a shell of its own process group, its output kept.
 * @param {string} command @param {NodeJS.ProcessEnv} env
 */
function shell(command, env) {
  const child = spawn('sh', ['-c', command], {
    cwd: root,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let stdout = '';
  child.stdout.on('data', (d) => {
    output += d;
    stdout += d;
  });
  child.stderr.on('data', (d) => (output += d));
  // Closed, not only exited: the shell may die of the Ctrl-C before the command it runs has said
  // it stopped, and whatever still holds its output holds this process's pipes.
  /** @type {Promise<number | NodeJS.Signals | null>} the exit code, or the signal that ended it */
  const exited = new Promise((resolve) =>
    child.on('close', (code, signal) => resolve(code ?? signal)),
  );
  return {
    command,
    pid: /** @type {number} */ (child.pid),
    exited,
    output: () => output,
    stdout: () => stdout,
    /** Ctrl-C: SIGINT to the whole group, as a terminal does. */
    interrupt: () => {
      try {
        process.kill(-(/** @type {number} */ (child.pid)), 'SIGINT');
      } catch {
        // Gone already.
      }
    },
  };
}

describe("docs/feeder.md's walkthrough, as written", () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */
  let db;
  before(async () => {
    db = await createTestDatabase();
  });
  after(() => db?.drop());

  test("the doc's commands are the ones this test knows how to run", () => {
    const commands = walkthroughBlocks(readFileSync(DOC, 'utf8'))
      .flat()
      .filter((c) => !c.startsWith('export '));
    assert.ok(commands.length >= 4, commands.join('\n'));
    for (const command of commands)
      assert.ok(
        COMMANDS[scriptOf(command) ?? ''],
        `the walkthrough runs \`${command}\`, which this test does not know`,
      );
  });

  test('ElasticMQ, the service, the producer and the feeder: every user produced is stored, then each stops on Ctrl-C', async () => {
    const blocks = walkthroughBlocks(readFileSync(DOC, 'utf8'));
    const [sqsPort, servicePort] = [await freePort(), await freePort()];
    const base = { ...process.env };
    for (const name of [
      'INGEST_TOKEN',
      'SQS_ENDPOINT',
      'QUEUE_URL',
      'SERVICE_URL',
      'HOST',
      'EMBEDDED_PG_DIR',
      'EMBEDDED_PG_PORT',
    ])
      delete base[name];
    const env = {
      ...base,
      // The node running this test first, so `npm` runs its scripts with it.
      PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}`,
      ELASTICMQ_PORT: String(sqsPort),
      PORT: String(servicePort),
      DATABASE_URL: db.url,
      LOG_LEVEL: 'info',
    };
    /** @param {string} text */
    const localPorts = (text) =>
      text
        .replaceAll('127.0.0.1:9324', `127.0.0.1:${sqsPort}`)
        .replaceAll('127.0.0.1:3000', `127.0.0.1:${servicePort}`);

    /** @type {(ReturnType<typeof shell> & { stopped: RegExp })[]} */
    const running = [];
    let produced = 0;
    try {
      for (const block of blocks) {
        // A terminal: what it exports applies to the commands after, in the same shell's terms.
        const exports = [];
        for (const written of block) {
          const command = localPorts(written);
          if (command.startsWith('export ')) {
            exports.push(command);
            continue;
          }
          const how = COMMANDS[scriptOf(command) ?? ''];
          assert.ok(how, `unknown command \`${written}\``);
          const run = shell([...exports, command].join('\n'), env);
          if (how.runs === 'to-the-end') {
            const code = await orAfter(run.exited, 120_000, 'still running after 120 s');
            assert.equal(code, 0, `\`${written}\`:\n${run.output()}`);
            produced += JSON.parse(run.stdout().trim().split('\n').at(-1) ?? '{}').users ?? 0;
            continue;
          }
          running.push({ ...run, stopped: how.stopped });
          await waitUntil(
            () => how.ready.test(run.output()) || run.output().includes('exit code'),
            `\`${written}\` to be ready`,
            90_000,
          ).catch((err) => assert.fail(`${err.message}:\n${run.output()}`));
          assert.match(run.output(), how.ready, `\`${written}\`:\n${run.output()}`);
        }
      }
      assert.ok(produced > 0, 'the walkthrough produces users');
      await waitUntil(
        async () => (await db.countUsers()) === produced,
        `the feeder to store the ${produced} users produced`,
        120_000,
      ).catch(async (err) =>
        assert.fail(
          `${err.message} (${await db.countUsers()} stored):\n${running.map((r) => r.output()).join('\n---\n')}`,
        ),
      );

      const sqs = new SQSClient({
        endpoint: `http://127.0.0.1:${sqsPort}`,
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      });
      const depth = async (/** @type {string} */ name) => {
        const a =
          (
            await sqs.send(
              new GetQueueAttributesCommand({
                QueueUrl: `http://127.0.0.1:${sqsPort}/000000000000/${name}`,
                AttributeNames: ['All'],
              }),
            )
          ).Attributes ?? {};
        return (
          Number(a.ApproximateNumberOfMessages) + Number(a.ApproximateNumberOfMessagesNotVisible)
        );
      };
      await waitUntil(
        async () => (await depth('sluice-users')) === 0,
        'the queue to be empty',
        30_000,
      );
      assert.equal(await depth('sluice-users-dlq'), 0, 'nothing in the dead-letter queue');
      sqs.destroy();
      assert.doesNotMatch(
        running.map((r) => r.output()).join('\n'),
        /refused the feeder/,
        'the token is the same on both sides',
      );
    } finally {
      // Ctrl-C in each terminal, the last started first: each says it stopped, and is gone.
      const ends = [];
      for (const run of running.reverse()) {
        run.interrupt();
        const end = await orAfter(run.exited, 30_000, 'still running 30 s after Ctrl-C');
        if (end === 'still running 30 s after Ctrl-C') {
          process.kill(-run.pid, 'SIGKILL');
          await run.exited;
        }
        const clean =
          [0, 'SIGINT'].includes(/** @type {any} */ (end)) && run.stopped.test(run.output());
        ends.push({
          command: run.command.split('\n').at(-1),
          end,
          output: clean ? '' : run.output(),
        });
      }
      assert.deepEqual(
        ends.filter((e) => e.output),
        [],
        'each stops cleanly on Ctrl-C',
      );
    }
    assert.ok(
      running.some((r) =>
        /ElasticMQ \(SQS emulator\) on http:\/\/127\.0\.0\.1:\d+\n {2}queue +http:\/\/127\.0\.0\.1:\d+\/000000000000\/sluice-users/.test(
          r.output(),
        ),
      ),
      'ElasticMQ prints its endpoint and queue URL',
    );
  });
});

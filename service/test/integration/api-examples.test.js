import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { useAppAndDatabase } from '../../../test/support/fixture.js';

// docs/api.md's examples run as written after the README's Quick start, on a fresh database: "Every
// status, by example" through sh in order, each answer held against the comment after it; the CSV
// example before that block and after it. Only the address differs, and the Quick start's and the
// CSV example's curl get the token and -i.

const API_MD = fileURLToPath(new URL('../../../docs/api.md', import.meta.url));
const README = fileURLToPath(new URL('../../../README.md', import.meta.url));
const TOKEN = 'api-examples-token-0123456789abcdef';

/**
 * The block's commands, each with the comment that says what it answers.
 * @param {string} markdown
 * @returns {{ setup: string, examples: { command: string, expected: string }[] }}
 */
export function examplesOf(markdown) {
  const section = markdown.slice(markdown.indexOf('## Every status, by example'));
  // Its first block of curls: the blocks before it start the service with a token and read it.
  const block = [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .map((m) => m[1])
    .find((b) => b.includes('curl '));
  if (!block) throw new Error('api.md has no sh block under "Every status, by example"');
  const lines = block.split('\n');
  const setup = /** @type {string} */ (lines.shift());
  /** @type {{ command: string, expected: string }[]} */
  const examples = [];
  /** @type {string[]} */
  let before = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] === '' || lines[i].startsWith('#')) continue;
    if (!lines[i].startsWith('curl ')) {
      before.push(lines[i]);
      continue;
    }
    let command = lines[i];
    while (command.endsWith('\\')) command = `${command.slice(0, -1)} ${lines[++i].trim()}`;
    const inline = / # (\d{3}.*)$/.exec(command);
    if (inline) command = command.slice(0, inline.index);
    const expected = inline?.[1] ?? /^# (\d{3}.*)$/.exec(lines[i + 1] ?? '')?.[1];
    if (!expected)
      throw new Error(`api.md: no "# <status>" comment says what this answers: ${command}`);
    examples.push({ command: [...before, command.trim()].join('\n'), expected });
    before = [];
  }
  return { setup, examples };
}

/** The curl of the first sh block after `heading` that has one, and the status and counts its comment says. @param {string} markdown @param {string} heading */
export function commandUnder(markdown, heading) {
  const section = markdown.slice(markdown.indexOf(heading));
  const block =
    [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
      .map((m) => m[1])
      .find((b) => b.includes('curl ')) ?? '';
  const start = block.indexOf('curl ');
  // `# 201 {counts}`, or the README's `# {counts}   (201; ...)`
  const comment = /^# (?:(\d{3}) )?(\{[^}]*\})(?:\s+\((\d{3})\b)?/m.exec(block.slice(start));
  const status = Number(comment?.[1] ?? comment?.[3]);
  if (start < 0 || !comment || !status)
    throw new Error(`no curl with a "# <status> {counts}" comment under ${heading}`);
  const command = block
    .slice(start, comment.index + start)
    .replace(/\\\n\s*/g, '')
    .trim();
  return { command, status, counts: JSON.parse(comment[2]) };
}

/** @param {string} output  curl -i's: the status line, headers, a blank line, the body */
function answerOf(output) {
  // An interim 100 Continue (curl sends Expect for a large body) comes before the answer.
  const [head, ...rest] = output
    .replace(/^(HTTP\/1\.1 1\d\d [^\n]*\r?\n\r?\n)+/, '')
    .split(/\r?\n\r?\n/);
  const [statusLine, ...headerLines] = head.split(/\r?\n/);
  const headers = new Map(
    headerLines.map((l) => [
      l.slice(0, l.indexOf(':')).toLowerCase(),
      l.slice(l.indexOf(':') + 1).trim(),
    ]),
  );
  return { status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\n\n') };
}

/** @param {string} command  run by sh in `dir`, with the token in T @param {string} dir */
async function shell(command, dir) {
  // Not spawnSync: the service answers from this process's event loop.
  const run = await promisify(execFile)('sh', ['-c', command], {
    cwd: dir,
    env: { ...process.env, T: TOKEN },
    encoding: 'utf8',
    timeout: 20_000,
    maxBuffer: 64 * 2 ** 20,
  });
  return run.stdout;
}

/** @param {{ app: { baseUrl: string } }} ctx @param {string} dir @param {ReturnType<typeof commandUnder>} example */
async function runAsWritten(ctx, dir, { command, status, counts }) {
  const output = await shell(
    command
      .replace(/^curl /, 'curl -i -H "authorization: Bearer $T" ')
      .replaceAll('http://127.0.0.1:3000', ctx.app.baseUrl),
    dir,
  );
  const answer = answerOf(output);
  assert.equal(answer.status, status, `${command}\n${output}`);
  assert.deepEqual(JSON.parse(answer.body), counts, command);
}

/** @param {{ app: { baseUrl: string } }} ctx @param {string} dir */
async function runStatusExamples(ctx, dir) {
  const { setup, examples } = examplesOf(await readFile(API_MD, 'utf8'));
  assert.ok(examples.length >= 10, `${examples.length} examples`);
  for (const { command, expected } of examples) {
    const output = await shell(`${setup}; U=${ctx.app.baseUrl}/users; ${command}`, dir);
    const answer = answerOf(output);
    const [status, said] = [Number(expected.slice(0, 3)), expected.slice(4)];
    assert.equal(answer.status, status, `${command}\n${output}`);
    // An error code, the counts, or a header the comment names.
    const code = /^([a-z_]+)\b/.exec(said)?.[1];
    if (code) assert.equal(JSON.parse(answer.body).error, code, command);
    const counts = /^(\{[^}]*\})/.exec(said)?.[1];
    if (counts) assert.deepEqual(JSON.parse(answer.body), JSON.parse(counts), command);
    // The rows it names, each timestamp only as null or a time (its value is the clock's).
    const rows = /^(\[.*\])/.exec(said)?.[1];
    const timeOrNull = (/** @type {any[]} */ list) =>
      list.map((row) => ({
        ...row,
        ...('updatedAt' in row ? { updatedAt: row.updatedAt === null ? null : 'a time' } : {}),
      }));
    if (rows)
      assert.deepEqual(timeOrNull(JSON.parse(answer.body)), timeOrNull(JSON.parse(rows)), command);
    const challenge = /WWW-Authenticate: (.*?)(?: \(|$)/.exec(said)?.[1];
    if (challenge) assert.equal(answer.headers.get('www-authenticate'), challenge, command);
    const applied = /Preference-Applied: (.*)$/.exec(said)?.[1];
    if (applied) assert.equal(answer.headers.get('preference-applied'), applied, command);
    const replayed = /Idempotent-Replayed: (\w+)/.exec(said)?.[1];
    assert.equal(answer.headers.get('idempotent-replayed') ?? undefined, replayed, command);
  }
}

const EMAILS = [
  'ada@example.com',
  'alan@example.com',
  'grace@example.com',
  'edsger@example.com',
  'new@example.com',
  'katherine@example.com',
  'y@example.com',
];

for (const csvFirst of [true, false]) {
  describe(`docs/api.md's examples, run as written after the Quick start, the CSV example ${csvFirst ? 'before' : 'after'} the statuses`, () => {
    const ctx = useAppAndDatabase({ INGEST_TOKEN: TOKEN });
    /** @type {string} */ let dir;
    before(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-api-examples-'));
    });
    after(() => rm(dir, { recursive: true, force: true }));

    test('every command answers what its comment says, and each wrote its own users', async () => {
      if (spawnSync('curl', ['--version']).status !== 0)
        assert.fail('curl is not installed: the api.md examples need it (apt-get install curl)');
      const [readme, api] = await Promise.all([readFile(README, 'utf8'), readFile(API_MD, 'utf8')]);
      await runAsWritten(ctx, dir, commandUnder(readme, '## Quick start'));
      const csv = commandUnder(api, '### A stream of users');
      if (csvFirst) await runAsWritten(ctx, dir, csv);
      await runStatusExamples(ctx, dir);
      if (!csvFirst) await runAsWritten(ctx, dir, csv);
      // The new user renamed twice, and no refused user; the Quick start's and the CSV's as sent.
      const stored = await ctx.db.usersByEmail(EMAILS);
      assert.deepEqual(
        [...stored.keys()].sort(),
        EMAILS.filter((e) => e !== 'y@example.com').sort(),
      );
      assert.equal(stored.get('new@example.com')?.name, 'Again');
      assert.equal(stored.get('ada@example.com')?.name, 'Ada Lovelace');
      assert.equal(stored.get('grace@example.com')?.name, 'Hopper, Grace');
    });
  });
}

import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { makeUsers } from '../../../test/support/users.js';

// docs/api.md's "Every status, by example" run as written: each curl command through sh, in order,
// on a fresh database, its answer held against what the comment after it says (the status, the
// error code, the counts, the header it names). Only the address differs: the service listens on a
// free port, so `U` is set again after the block's first line.

const API_MD = fileURLToPath(new URL('../../../docs/api.md', import.meta.url));
const TOKEN = 'api-examples-token-0123456789abcdef';

/**
 * The block's commands, each with the comment that says what it answers.
 * @param {string} markdown
 * @returns {{ setup: string, examples: { command: string, expected: string }[] }}
 */
export function examplesOf(markdown) {
  const section = markdown.slice(markdown.indexOf('## Every status, by example'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error('api.md has no sh block under "Every status, by example"');
  const lines = block.split('\n');
  const setup = /** @type {string} */ (lines.shift());
  /** @type {{ command: string, expected: string }[]} */
  const examples = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i].startsWith('curl ')) continue;
    let command = lines[i];
    while (command.endsWith('\\')) command = `${command.slice(0, -1)} ${lines[++i].trim()}`;
    const inline = / # (\d{3}.*)$/.exec(command);
    if (inline) command = command.slice(0, inline.index);
    const expected = inline?.[1] ?? /^# (\d{3}.*)$/.exec(lines[i + 1] ?? '')?.[1];
    if (!expected) throw new Error(`api.md: no "# <status>" comment says what this answers: ${command}`);
    examples.push({ command: command.trim(), expected });
  }
  return { setup, examples };
}

/** @param {string} output  curl -i's: the status line, headers, a blank line, the body */
function answerOf(output) {
  // An interim 100 Continue (curl sends Expect for a large body) comes before the answer.
  const [head, ...rest] = output.replace(/^(HTTP\/1\.1 1\d\d [^\n]*\r?\n\r?\n)+/, '').split(/\r?\n\r?\n/);
  const [statusLine, ...headerLines] = head.split(/\r?\n/);
  const headers = new Map(headerLines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\n\n') };
}

describe("docs/api.md's examples, run as written", () => {
  const ctx = useAppAndDatabase({ INGEST_TOKEN: TOKEN });
  /** @type {string} */ let dir;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-api-examples-'));
    await writeFile(path.join(dir, '10001-users.json'), JSON.stringify(makeUsers(10_001)));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test('every command answers what its comment says', async () => {
    if (spawnSync('curl', ['--version']).status !== 0) assert.fail('curl is not installed: the api.md examples need it (apt-get install curl)');
    const { setup, examples } = examplesOf(await readFile(API_MD, 'utf8'));
    assert.ok(examples.length >= 10, `${examples.length} examples`);
    for (const { command, expected } of examples) {
      // Not spawnSync: the service answers from this process's event loop.
      const run = await promisify(execFile)('sh', ['-c', `${setup}; U=${ctx.app.baseUrl}/users; ${command}`], { cwd: dir, env: { ...process.env, T: TOKEN }, encoding: 'utf8', timeout: 20_000, maxBuffer: 64 * 2 ** 20 });
      const answer = answerOf(run.stdout);
      const [status, said] = [Number(expected.slice(0, 3)), expected.slice(4)];
      assert.equal(answer.status, status, `${command}\n${run.stdout}`);
      // An error code, the counts, or a header the comment names.
      const code = /^([a-z_]+)\b/.exec(said)?.[1];
      if (code) assert.equal(JSON.parse(answer.body).error, code, command);
      const counts = /^(\{[^}]*\})/.exec(said)?.[1];
      if (counts) assert.deepEqual(JSON.parse(answer.body), JSON.parse(counts), command);
      const challenge = /WWW-Authenticate: (.*?)(?: \(|$)/.exec(said)?.[1];
      if (challenge) assert.equal(answer.headers.get('www-authenticate'), challenge, command);
      const applied = /Preference-Applied: (.*)$/.exec(said)?.[1];
      if (applied) assert.equal(answer.headers.get('preference-applied'), applied, command);
    }
    // What the examples wrote: the new user, renamed twice, and Ada; nothing of the refused ones.
    const stored = await ctx.db.usersByEmail(['new@example.com', 'ada@example.com', 'y@example.com']);
    assert.deepEqual([...stored.keys()].sort(), ['ada@example.com', 'new@example.com']);
    assert.equal(stored.get('new@example.com')?.name, 'Again');
  });
});

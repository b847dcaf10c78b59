import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../support/fixture.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const START = path.join(root, 'scripts', 'start.js');
const NO_HANG_MS = 20_000;
// Colours and the terminal's carriage returns, so the text can be matched.
const plain = (/** @type {string} */ s) => stripVTControlCharacters(s).replace(/\r/g, '');

/**
 * Runs `npm start`'s script until the service says it listens, then stops it with SIGTERM.
 * @param {string[]} argv  the command: the script itself, or wrapped to run in a terminal
 * @param {string} databaseUrl
 * @returns {Promise<string>} what it printed on stdout up to then
 */
async function startUntilListening(argv, databaseUrl) {
  const child = spawn(argv[0], argv.slice(1), {
    env: { ...process.env, DATABASE_URL: databaseUrl, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  child.stderr.resume();
  const exited = new Promise((resolve) => child.on('exit', resolve));
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no "listening" in ${NO_HANG_MS} ms; got:\n${out}`)), NO_HANG_MS);
      child.stdout.on('data', () => {
        if (plain(out).includes('listening')) {
          clearTimeout(timer);
          resolve(undefined);
        }
      });
    });
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
  return plain(out);
}

describe('npm start: logs for people in a terminal, JSON everywhere else', () => {
  const ctx = useAppAndDatabase();

  test('piped: every line on stdout is pino JSON', async () => {
    const out = await startUntilListening([process.execPath, START], ctx.db.url);
    const lines = out.split('\n').filter(Boolean);
    assert.ok(lines.length > 0);
    const parsed = lines.map((l) => JSON.parse(l));
    assert.ok(parsed.some((l) => l.msg === 'listening' && l.level === 30));
  });

  test('in a terminal: readable lines from pino-pretty, not JSON', async () => {
    // util-linux `script` gives the command a pseudo-terminal, as a person's shell would.
    const out = await startUntilListening(['script', '-qfec', `${process.execPath} ${START}`, '/dev/null'], ctx.db.url);
    const line = out.split('\n').find((l) => l.includes('listening')) ?? '';
    assert.match(line, /^\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO \(\d+\): listening$/);
    assert.match(out, /\n\s+port: \d+\n/, 'the fields follow on their own lines');
    assert.throws(() => JSON.parse(line));
  });
});

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createTestDatabase } from '../support/database.js';
import { startServerProcess } from '../support/server-process.js';

// docs/api.md's shell examples run as a newcomer runs them: every ```sh block in order, top to
// bottom, in one bash (the client's terminal: its variables and files carry from block to block)
// against the service started as `npm start` starts it, with no credentials. A block that opens
// with `# npm start's terminal` is typed there: the service is stopped (Ctrl-C), the block runs in
// a second bash, and the service starts again with the environment its `npm start` line gave.
// Each curl says the status it expects in a `# NNN` comment, at the end of its line or on the line
// after it (after its here-document); every curl's status is read with -w and held to it, and any
// command that fails (set -eu: a variable never set, a file nothing made) fails the test. What the
// test changes: the address (a port of its own, kept across restarts), the database (the runner's,
// in DATABASE_URL), and `npm run X` runs package.json's script X here, import with that address.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const API_MD = path.join(ROOT, 'docs/api.md');
const DOC_ADDRESS = 'http://127.0.0.1:3000';

/**
 * The ```sh blocks of a Markdown text, in order, de-indented (a block may sit in a list item).
 * @param {string} markdown
 * @returns {{ line: number, text: string }[]}
 */
export function shellBlocksOf(markdown) {
  const lines = markdown.split('\n');
  /** @type {{ line: number, text: string }[]} */
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```sh\s*$/.exec(lines[i]);
    if (!open) continue;
    const indent = open[1].length;
    const body = [];
    let j = i + 1;
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j]); j++)
      body.push(lines[j].slice(indent));
    blocks.push({ line: i + 1, text: `${body.join('\n')}\n` });
    i = j;
  }
  return blocks;
}

/** A line without its comment: from a ` #` or a leading `#` (quotes holding neither). @param {string} line */
const codeOf = (line) => (line.trimStart().startsWith('#') ? '' : line.replace(/\s+#.*$/, ''));

/** Whether a block is typed in npm start's terminal. @param {string} text */
export const isServiceBlock = (text) => text.startsWith("# npm start's terminal");

/**
 * The status each curl of a block says it expects, in order: `# NNN` at the end of the command
 * (its last line, continuations joined) or opening the line after it and its here-document.
 * @param {string} text
 * @returns {number[]}
 */
export function expectedStatusesOf(text) {
  const lines = text.split('\n');
  /** @type {number[]} */
  const statuses = [];
  for (let i = 0; i < lines.length; i++) {
    if (!codeOf(lines[i]).trim()) continue;
    let command = lines[i];
    while (command.endsWith('\\') && i + 1 < lines.length) command += `\n${lines[++i]}`;
    const heredoc = /<<-?\s*'?(\w+)'?/.exec(codeOf(command))?.[1];
    if (heredoc) while (i + 1 < lines.length && lines[++i].trim() !== heredoc);
    if (!/(^|[\s(|;&])curl\s/.test(codeOf(command.replaceAll('\\\n', ' ')))) continue;
    const said = / # (\d{3})\b/.exec(command) ?? /^# (\d{3})\b/.exec(lines[i + 1] ?? '');
    if (!said)
      throw new Error(`api.md: no "# <status>" comment says what this answers:\n${command}`);
    statuses.push(Number(said[1]));
  }
  return statuses;
}

/**
 * Shell functions every block runs under. curl: the real one, its status appended to a file by
 * -w (to its stderr, taken out there). npm: `npm run X` as package.json's `node scripts/...`
 * script, import sent to the test's address; `npm start` in npm start's terminal writes its
 * environment for the test to start the service with.
 * @param {Record<string, string>} scripts  package.json's
 * @param {boolean} [serviceTerminal]  npm start's (elsewhere `npm start` is a mistake of the doc)
 */
function preludeOf(scripts, serviceTerminal = false) {
  const arms = Object.entries(scripts).flatMap(([name, script]) => {
    const file = /^node (scripts\/[\w-]+\.js)$/.exec(script)?.[1];
    if (!file) return [];
    const url = name === 'import' ? ' --url "$DOC_TEST_URL"' : '';
    return [`    ${name}) node "$DOC_TEST_ROOT/${file}"${url} "$@" ;;`];
  });
  return `
curl() {
  local rc=0 err; err=$(mktemp)
  command curl "$@" -w '%{stderr}@@status %{http_code}\\n' 2>"$err" || rc=$?
  grep '^@@status ' "$err" | cut -d' ' -f2 >> "$DOC_TEST_STATUSES" || true
  grep -v '^@@status ' "$err" >&2 || true
  rm -f "$err"; return $rc
}
npm() {
  if [ "\${1-}" = start ] && ${serviceTerminal}; then env -0 > "$DOC_TEST_SERVICE_ENV"; return; fi
  if [ "\${1-}" != run ]; then echo "docs test: npm $* is not run here" >&2; return 2; fi
  shift; case "\${1-}" in -s|--silent) shift ;; esac
  local name=$1; shift; if [ "\${1-}" = -- ]; then shift; fi
  case $name in
${arms.join('\n')}
    *) echo "docs test: npm run $name is not run here" >&2; return 2 ;;
  esac
}
`;
}

/**
 * A bash that lives as long as the test, as a terminal does.
 * @param {{ cwd: string, env: Record<string, string | undefined>, prelude: string }} options
 */
function startShell({ cwd, env, prelude }) {
  const child = spawn('bash', ['--noprofile', '--norc'], { cwd, env });
  let [stdout, stderr] = ['', ''];
  child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
  /** @type {Promise<number | null>} */
  const exited = new Promise((resolve) => child.on('exit', resolve));
  child.stdin.write(prelude);
  let count = 0;
  return {
    /**
     * Runs a block as sourced into the shell (set -eu, pipefail): its output, or an error saying
     * the block, what it printed and how the shell ended.
     * @param {string} text @param {string} where
     */
    async run(text, where) {
      const marker = `@@block ${++count} done`;
      const file = path.join(cwd, `.doc-test-block-${count}.sh`);
      await writeFile(file, `set -eu -o pipefail\n${text}set +eu +o pipefail\n`);
      const [from, errFrom] = [stdout.length, stderr.length];
      child.stdin.write(`source ${file}; rm ${file}; echo '${marker}'\n`);
      const ended = await Promise.race([
        new Promise((resolve) => {
          const check = () => {
            if (!stdout.includes(marker, from)) return;
            child.stdout.off('data', check);
            resolve('done');
          };
          child.stdout.on('data', check);
          check();
        }),
        exited.then((code) => `the shell exited ${code}`),
        new Promise((resolve) => setTimeout(resolve, 60_000, 'not done in 60 s').unref()),
      ]);
      const output = stdout.slice(from).replace(`${marker}\n`, '');
      if (ended !== 'done')
        throw new Error(
          `${where}: ${ended}\n${text}\n--- stdout\n${output}\n--- stderr\n${stderr.slice(errFrom)}`,
        );
      return { output, errors: stderr.slice(errFrom) };
    },
    close() {
      child.kill('SIGKILL');
      return exited;
    },
  };
}

/**
 * Runs a block of npm start's terminal: the environment its `npm start` was given.
 * @param {ReturnType<typeof startShell>} shell @param {string} script @param {string} where
 * @param {string} file  where the shell's npm start writes it
 * @returns {Promise<Record<string, string>>}
 */
async function environmentGiven(shell, script, where, file) {
  await rm(file, { force: true });
  await shell.run(script, where);
  const written = await readFile(file, 'utf8').catch(() => {
    throw new Error(`${where}: a block of npm start's terminal that never runs npm start`);
  });
  return Object.fromEntries(
    written
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

describe("docs/api.md's shell examples, top to bottom, as a newcomer runs them", () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {string} */ let dir;
  before(async () => {
    db = await createTestDatabase();
    dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-api-doc-'));
  });
  after(async () => {
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test(
    'every block runs, and every curl answers the status its comment says',
    { timeout: 240_000 },
    async () => {
      const blocks = shellBlocksOf(await readFile(API_MD, 'utf8'));
      assert.ok(blocks.length >= 5, `${blocks.length} sh blocks`);
      const scripts = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')).scripts;
      const statuses = path.join(dir, '.doc-test-statuses');
      const serviceEnv = path.join(dir, '.doc-test-service-env');
      /** @type {Record<string, string | undefined>} */
      const env = {
        ...process.env,
        DATABASE_URL: db.url,
        DOC_TEST_ROOT: ROOT,
        DOC_TEST_STATUSES: statuses,
        DOC_TEST_SERVICE_ENV: serviceEnv,
      };
      // What npm start makes before anything else: its data directory.
      await mkdir(path.join(dir, '.data'));
      let service = await startServerProcess({ DATABASE_URL: db.url }, { cwd: dir });
      const port = new URL(service.baseUrl).port;
      const base = service.baseUrl;
      env.DOC_TEST_URL = base;
      const client = startShell({ cwd: dir, env, prelude: preludeOf(scripts) });
      const serviceShell = startShell({ cwd: dir, env, prelude: preludeOf(scripts, true) });
      try {
        for (const { line, text } of blocks) {
          const where = `docs/api.md:${line}`;
          const script = text.replaceAll(DOC_ADDRESS, base);
          if (isServiceBlock(text)) {
            await service.stop();
            const given = await environmentGiven(serviceShell, script, where, serviceEnv);
            service = await startServerProcess(
              { ...given, DATABASE_URL: db.url, HOST: '127.0.0.1', PORT: port },
              { cwd: dir },
            );
            continue;
          }
          await writeFile(statuses, '');
          const { output, errors } = await client.run(script, where);
          const answered = (await readFile(statuses, 'utf8'))
            .split('\n')
            .filter(Boolean)
            .map(Number);
          assert.deepEqual(
            answered,
            expectedStatusesOf(text),
            `${where}: the statuses answered, and those the block says\n${text}\n--- stdout\n${output}\n--- stderr\n${errors}`,
          );
        }
      } finally {
        await Promise.all([client.close(), serviceShell.close(), service.stop()]);
      }
    },
  );
});

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const ELASTICMQ_VERSION = '1.7.1';
// Outside the repository, once per machine: about 40 jars from Maven Central.
const LIB = path.join(
  process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'),
  'sluice',
  `elasticmq-${ELASTICMQ_VERSION}`,
  'lib',
);

/** The ElasticMQ jars, fetched with Maven the first time (lambda/local/elasticmq/pom.xml). */
export function ensureElasticMQ({ log = (/** @type {string} */ m) => console.error(m) } = {}) {
  if (existsSync(LIB) && readdirSync(LIB).some((f) => f.startsWith('elasticmq-server'))) return LIB;
  log(`fetching ElasticMQ ${ELASTICMQ_VERSION} from Maven Central into ${LIB} (once)...`);
  // Maven writes colour codes even in batch mode (and nothing else when quiet and well): what it
  // says is kept, and shown plain only when it fails.
  const mvn = spawnSync(
    'mvn',
    [
      '-q',
      '-B',
      '-Dstyle.color=never',
      '-f',
      path.join(HERE, 'pom.xml'),
      'dependency:copy-dependencies',
      `-DoutputDirectory=${LIB}`,
    ],
    { encoding: 'utf8' },
  );
  const said = stripVTControlCharacters(`${mvn.stdout ?? ''}${mvn.stderr ?? ''}`).trim();
  if (mvn.error || mvn.status !== 0) {
    if (said) log(said);
    throw new Error(
      `could not fetch ElasticMQ with Maven (${mvn.error?.message ?? `exit ${mvn.status}`}); install Maven and Java 17, or point SQS_ENDPOINT at another SQS`,
    );
  }
  return LIB;
}

/**
 * A queue; `fifo` for a FIFO queue (its name ends in `.fifo`), without content-based deduplication.
 * @typedef {{ name: string, visibilityTimeoutSeconds?: number, deadLetter?: { name: string, maxReceiveCount: number }, fifo?: boolean }} QueueSpec
 */

/** @param {QueueSpec[]} queues @param {number} port */
function configFor(queues, port) {
  const queueLines = queues.map((q) => {
    const parts = [];
    if (q.visibilityTimeoutSeconds)
      parts.push(`defaultVisibilityTimeout = ${q.visibilityTimeoutSeconds} seconds`);
    if (q.deadLetter)
      parts.push(
        `deadLettersQueue { name = "${q.deadLetter.name}", maxReceiveCount = ${q.deadLetter.maxReceiveCount} }`,
      );
    if (q.fifo) parts.push('fifo = true', 'contentBasedDeduplication = false');
    return `  "${q.name}" { ${parts.join('\n    ')} }`;
  });
  return `include classpath("application.conf")
node-address { protocol = http, host = 127.0.0.1, port = ${port}, context-path = "" }
rest-sqs { enabled = true, bind-port = ${port}, bind-hostname = "127.0.0.1", sqs-limits = strict }
rest-stats { enabled = false }
queues {
${queueLines.join('\n')}
}
`;
}

/**
 * The queue pairs sluice uses by default, standard and FIFO; the same as docker-compose's and the
 * SAM template's shape (QueueType Standard or Fifo).
 */
export const DEFAULT_QUEUES = /** @type {QueueSpec[]} */ ([
  { name: 'sluice-users-dlq' },
  {
    name: 'sluice-users',
    visibilityTimeoutSeconds: 60,
    deadLetter: { name: 'sluice-users-dlq', maxReceiveCount: 5 },
  },
  { name: 'sluice-users-dlq.fifo', fifo: true },
  {
    name: 'sluice-users.fifo',
    visibilityTimeoutSeconds: 60,
    deadLetter: { name: 'sluice-users-dlq.fifo', maxReceiveCount: 5 },
    fifo: true,
  },
]);

/**
 * What Java said that names the problem (an exception's first line, e.g. a BindException for a port
 * in use), rather than its whole stack: the first line that is no `at ...` frame.
 * @param {string} stderr
 */
function firstWords(stderr) {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('at ') && !l.startsWith('...'));
  return lines.find((l) => /Exception|Error/.test(l)) ?? lines.at(-1) ?? 'no output';
}

/**
 * Starts ElasticMQ on 127.0.0.1 with these queues and waits until it answers.
 * @param {{ port: number, queues?: QueueSpec[], log?: (m: string) => void }} options
 */
export async function startElasticMQ({ port, queues = DEFAULT_QUEUES, log }) {
  const lib = ensureElasticMQ({ log });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-elasticmq-'));
  const configFile = path.join(dir, 'elasticmq.conf');
  await writeFile(configFile, configFor(queues, port));
  const child = spawn(
    'java',
    ['-Xmx512m', `-Dconfig.file=${configFile}`, '-cp', `${lib}/*`, 'org.elasticmq.server.Main'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  const endpoint = `http://127.0.0.1:${port}`;
  /** @type {Error | undefined} */
  let spawnError;
  /** @type {Promise<{ code: number | null, signal: NodeJS.Signals | null }>} */
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
    // No java on PATH: an 'error' and no 'exit'.
    child.on('error', (err) => {
      spawnError = err;
      resolve({ code: null, signal: null });
    });
  });
  const cleanUp = () => rm(dir, { recursive: true, force: true });

  const deadline = Date.now() + 60_000;
  for (;;) {
    if (spawnError) {
      await cleanUp();
      const missing = /** @type {NodeJS.ErrnoException} */ (spawnError).code === 'ENOENT';
      throw new Error(
        missing
          ? 'ElasticMQ needs Java 17 or later, and there is no `java` on PATH: install a JDK or JRE 17'
          : `could not run java: ${spawnError.message}`,
      );
    }
    if (child.exitCode !== null) {
      await cleanUp();
      throw Object.assign(
        new Error(`ElasticMQ exited at start (exit code ${child.exitCode}): ${firstWords(stderr)}`),
        { stderr },
      );
    }
    const ok = await fetch(`${endpoint}/?Action=ListQueues`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      await cleanUp();
      throw Object.assign(
        new Error(`ElasticMQ did not answer on ${endpoint} within 60 s: ${firstWords(stderr)}`),
        { stderr },
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    endpoint,
    /** @param {string} name */
    queueUrl: (name) => `${endpoint}/000000000000/${name}`,
    /** Resolves when the server exits, for whatever reason (stop(), a signal, a crash). */
    exited,
    /** The end of what the server wrote on stderr, its first meaningful line: why it exited. */
    lastWords: () => firstWords(stderr),
    async stop() {
      child.kill('SIGTERM');
      await exited;
      await cleanUp();
    },
  };
}

// `npm run import -- FILE`: streams an NDJSON or CSV file of users (gzip-compressed too) to the
// service's POST /users in one request, with progress on stderr, and prints the counts. Each run
// sends an Idempotency-Key (a new one, or --idempotency-key's), named when it fails, so a run again
// with it learns what the failed one wrote instead of writing twice.
import { randomUUID } from 'node:crypto';
import { createCommand, Option, wholeNumber } from '@sluice/db/command-line';
import { USER_FIELDS } from '../service/src/user-columns.js';

const program = createCommand(
  'npm run import --',
  'Streams a file of users to POST /users in one request: all of it is ' +
    'stored, or none. NDJSON or JSON Lines (.ndjson, .jsonl: one user a line) ' +
    `or CSV (.csv: a header row naming ${USER_FIELDS.join(', ')}), ` +
    `either gzip-compressed too (.gz, sent compressed). ` +
    'Progress (bytes and rows per second) on stderr once connected; the counts as one ' +
    'JSON line on stdout. Told 429 or 503 overloaded (nothing written), it waits ' +
    'Retry-After, says so, and sends the file again. A refusal is one line on stderr, ' +
    'with how much of the file was sent before it came (the rest is not sent), exit 1.',
  { INGEST_TOKEN: 'the bearer token, when --token is not given (default: none)' },
)
  .argument('<file>', 'the file of users')
  .addOption(
    new Option('--resolution <r>', 'what the service does with an email already stored')
      .choices(['ignore', 'merge'])
      .default('ignore'),
  )
  .option('--url <url>', 'the service', 'http://127.0.0.1:3000')
  .option(
    '--token <token>',
    'the bearer token (default: INGEST_TOKEN, better: on ' +
      "the command line, npm's header line and ps show it)",
  )
  .addOption(
    new Option('--format <f>', "the file's format (default: from its name)").choices([
      'ndjson',
      'csv',
    ]),
  )
  .option(
    '--quarantine',
    'set invalid users aside instead of refusing the file (Prefer: invalid=quarantine): ' +
      'the valid ones are stored, and the command that exports the others is printed',
  )
  .option(
    '--max-invalid <n>',
    'with --quarantine: refuse the whole file past this ' +
      "many invalid users (the service's default: 100)",
    wholeNumber(0),
  )
  .option(
    '--idempotency-key <key>',
    'the Idempotency-Key of the upload, to send a failed run again: its answer if ' +
      'it was written (1 to 255 visible ASCII characters; default: a new one each run)',
  )
  .addOption(
    new Option(
      '--retry-for <seconds>',
      'how long to keep sending again when the service answers 429 (this client over its ' +
        'rate) or 503 overloaded, nothing written: after each Retry-After, said on stderr',
    )
      .argParser(Number)
      .default(600),
  )
  .parse();

const [file] = program.args;
const args = program.opts();
const compressed = file.endsWith('.gz');
const name = compressed ? file.slice(0, -3) : file;
const format =
  args.format ??
  (name.endsWith('.csv') ? 'csv' : /\.(ndjson|jsonl|json)$/.test(name) ? 'ndjson' : undefined);
if (!format)
  program.error(
    `error: cannot tell the format of ${file} from its name; give --format ndjson or --format csv`,
  );
/** @type {string} */
const key = args.idempotencyKey ?? randomUUID();
if (!/^[\x20-\x7e]{1,255}$/.test(key))
  program.error('error: --idempotency-key must be 1 to 255 visible ASCII characters');
const url = URL.canParse(args.url)
  ? new URL('/users', args.url)
  : program.error(`error: --url ${args.url} is not a URL`);

const { createReadStream } = await import('node:fs');
const { open } = await import('node:fs/promises');
const http = await import('node:http');
const https = await import('node:https');
const { Transform } = await import('node:stream');
const { pipeline } = await import('node:stream/promises');
const zlib = await import('node:zlib');

// A file that cannot be read is one line naming it and why, not a stack trace.
/** @type {Record<string, string>} */
const FILE_PROBLEMS = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EISDIR: 'it is a directory',
  ELOOP: 'too many symbolic links',
};
/** @param {unknown} err @returns {never} */
function cannotRead(err) {
  const { code = '', message } = /** @type {NodeJS.ErrnoException} */ (err);
  console.error(`import: cannot read ${file}: ${FILE_PROBLEMS[code] ?? message}`);
  process.exit(1);
}
const handle = await open(file, 'r').catch(cannotRead);
const info = await handle.stat().catch(cannotRead);
// A directory opens on Linux; reading it fails later, mid-request.
if (!info.isFile()) cannotRead({ message: 'not a regular file' });
const total = info.size;
const started = performance.now();
let bytes = 0;
let rows = 0;
/** @param {Buffer} chunk */
const countLines = (chunk) => {
  for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) rows++;
};

const tty = process.stderr.isTTY;
let lastShown = 0;
// Nothing is shown until the service is connected: before, what is read only waits in a buffer.
let connected = false;
/** @param {boolean} [last] */
function showProgress(last = false) {
  const now = performance.now();
  if (!connected || (!last && now - lastShown < (tty ? 200 : 2000))) return;
  lastShown = now;
  const seconds = Math.max(0.001, (now - started) / 1000);
  const line =
    `${(bytes / 1e6).toFixed(1)} / ${(total / 1e6).toFixed(1)} MB ` +
    `(${total ? Math.floor((100 * bytes) / total) : 100}%), ` +
    `${Math.round(rows / seconds).toLocaleString('en-US')} rows/s, ` +
    `${(bytes / 1e6 / seconds).toFixed(1)} MB/s`;
  process.stderr.write(tty ? `\r${line}\x1b[K${last ? '\n' : ''}` : `${line}\n`);
}

// The rows of a compressed file are counted on a copy of it decompressed here: the service gets it
// compressed.
/** @param {import('node:zlib').Gunzip | undefined} counter */
const progress = (counter) =>
  new Transform({
    transform(chunk, _encoding, done) {
      bytes += chunk.length;
      if (counter) counter.write(chunk);
      else countLines(chunk);
      showProgress();
      done(null, chunk);
    },
  });

const token = args.token ?? process.env.INGEST_TOKEN;
const prefer = [
  args.resolution === 'merge' ? 'resolution=merge-duplicates' : '',
  args.quarantine
    ? `invalid=quarantine${args.maxInvalid === undefined ? '' : `; max-invalid=${args.maxInvalid}`}`
    : '',
]
  .filter(Boolean)
  .join(', ');
/** What to run to send this upload again under its key. */
const again =
  `send it again with --idempotency-key '${key.replaceAll("'", "'\\''")}': ` +
  `if it was written, you get its answer, else it is written`;
/** @param {number} n */
const megabytes = (n) => `${(n / 1e6).toFixed(1)} MB`;
/**
 * The progress line drawn in place on a terminal, cleared so that a refusal or a failure is one
 * line.
 */
const clearProgress = () => {
  if (tty && lastShown) process.stderr.write('\r\x1b[K');
};

let attempts = 0;
/**
 * Sends the file once. The service's answer may come before the whole file is sent: a wrong token,
 * an invalid user or a malformed line is refused at once. Then the answer is what counts and the
 * upload stops there, rather than going on into a connection the service has stopped reading until
 * BODY_READ_TIMEOUT_MS. A service that closes the connection after an early refusal may cut the
 * upload short (EPIPE, ECONNRESET): once an answer has begun, what it says is the outcome.
 * @returns {Promise<{ status: number, text: string, retryAfter: string | undefined,
 *   requestId: string | undefined, replayed: boolean, sent: number }>}
 */
async function sendFile() {
  bytes = 0;
  rows = 0;
  connected = false;
  const counter = compressed
    ? zlib
        .createGunzip()
        .on('data', countLines)
        .on('error', () => {})
    : undefined;
  const request = (url.protocol === 'https:' ? https : http).request(url, {
    method: 'POST',
    headers: {
      'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson',
      ...(compressed ? { 'content-encoding': 'gzip' } : {}),
      'content-length': String(total),
      ...(prefer ? { prefer } : {}),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      'idempotency-key': `"${key.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`,
    },
  });
  request.on('socket', (socket) => {
    if (socket.connecting) socket.once('connect', () => (connected = true));
    else connected = true;
  });
  /**
   * The bytes of the file that have left for the service: what was read, less what still waits in
   * the request's buffers.
   */
  const sentBytes = () => (connected ? Math.max(0, bytes - request.writableLength) : 0);
  /**
   * @type {Promise<{ status: number, text: string, retryAfter: string | undefined,
   *   requestId: string | undefined, replayed: boolean }>}
   */
  const answered = new Promise((resolve, reject) => {
    /** @type {(() => void) | undefined} */ let done;
    request.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      const retryAfter = res.headers['retry-after'];
      // The id its set-aside users are kept under; a client's own X-Request-Id never is.
      const requestId = res.headers['quarantine-request-id'] ?? res.headers['x-request-id'];
      done = () =>
        resolve({
          status: res.statusCode ?? 0,
          text,
          retryAfter,
          requestId: typeof requestId === 'string' ? requestId : undefined,
          replayed: res.headers['idempotent-replayed'] === 'true',
        });
      res.on('end', done);
      res.on('close', done);
      res.on('error', done);
    });
    request.on('error', (err) => {
      if (!done) reject(Object.assign(err, { sent: sentBytes() }));
    });
    // Closed with no error and no answer: the connection went (a last resort, so nothing waits
    // forever).
    request.on('close', () => {
      if (done) done();
      else
        reject(
          Object.assign(new Error('the connection closed before an answer'), {
            code: 'ECONNRESET',
            sent: sentBytes(),
          }),
        );
    });
  });
  // The file opened above the first time; a retry sends the whole file again, opened again.
  const source = attempts++ === 0 ? createReadStream('', { fd: handle }) : createReadStream(file);
  const meter = progress(counter);
  // The file into the request, outside the pipeline: a failed write (the service answered and
  // closed) is the request's own error, and the answer already read stays the outcome; a pipeline
  // would abort the request, dropping an answer still being read. A failure to read the file
  // reaches the request (destroyed with it), and so `answered`.
  pipeline(source, meter).catch((err) => request.destroy(err));
  meter.pipe(request);
  try {
    const answer = await answered;
    return { ...answer, sent: sentBytes() };
  } finally {
    // Whatever is left of the file is not sent: the service has answered. The upload's pipeline
    // is not waited for: destroyed while the file is being read, it may never settle, and a retry
    // opens the file again.
    source.destroy();
    meter.destroy();
    request.destroy();
    counter?.end();
  }
}

/**
 * Seconds to wait before sending again, when the answer says nothing was written and to come back
 * later: 429 (this client over its rate) or 503 overloaded (the service's in-flight budget), with
 * Retry-After; else undefined.
 * @param {{ status: number, text: string, retryAfter: string | undefined }} answer
 */
function retryAfterOf({ status, text, retryAfter }) {
  const seconds = Number(retryAfter);
  if (!Number.isFinite(seconds) || seconds < 0) return undefined;
  if (status === 429) return seconds;
  return status === 503 && errorCodeOf(text) === 'overloaded' ? seconds : undefined;
}

/**
 * The catalogue's `error` of an answer's body; undefined when the body is not the service's JSON (a
 * proxy's page).
 * @param {string} text
 */
function errorCodeOf(text) {
  try {
    const error = JSON.parse(text)?.error;
    return typeof error === 'string' ? error : undefined;
  } catch {
    return undefined;
  }
}

try {
  const retryUntil = performance.now() + args.retryFor * 1000;
  let answer = await sendFile();
  for (
    let wait = retryAfterOf(answer);
    wait !== undefined && performance.now() + wait * 1000 <= retryUntil;
    wait = retryAfterOf(answer)
  ) {
    clearProgress();
    const why =
      answer.status === 429
        ? 'this client is over its rate (429)'
        : 'the service is at its in-flight limit (503 overloaded)';
    console.error(
      `import: ${why}, nothing written; waiting ${wait} s ` +
        `as Retry-After asks, then sending the file again`,
    );
    await new Promise((resolve) => setTimeout(resolve, Math.max(1, wait) * 1000));
    answer = await sendFile();
  }
  const { status, text, sent, requestId, replayed } = answer;
  if (status >= 200 && status < 300) {
    showProgress(true);
    const seconds = (performance.now() - started) / 1000;
    const counts = JSON.parse(text);
    // A replay: the answer of an earlier run with this key, which wrote the file; this one wrote
    // nothing.
    console.log(
      JSON.stringify({
        ...counts,
        ...(replayed ? { replayed: true } : {}),
        seconds: Number(seconds.toFixed(2)),
      }),
    );
    if (counts.quarantined > 0) {
      console.error(
        `${counts.quarantined} user${counts.quarantined === 1 ? ' was' : 's were'} set ` +
          `aside; to fix and send them again: npm run quarantine -- export --items ` +
          `--request ${requestId ?? '<Quarantine-Request-Id>'} --output fixed.ndjson`,
      );
    }
  } else {
    // The service answers about the line it has read; what was sent meanwhile may be well past it.
    clearProgress();
    const part = total ? Math.floor((100 * sent) / total) : 100;
    console.error(
      `import refused (${status}): ${text.trim()} (${megabytes(sent)} of ${megabytes(total)}` +
        ` sent, ${part}%; the rest not sent)${status === 503 ? `; ${again}` : ''}`,
    );
    process.exitCode = 1;
  }
} catch (err) {
  clearProgress();
  const {
    code,
    message,
    sent = 0,
  } = /** @type {NodeJS.ErrnoException & { sent?: number }} */ (err);
  const hint =
    code === 'ECONNREFUSED'
      ? ` (is the service running at ${url.origin}? \`npm start\` starts it; --url names another)`
      : '';
  console.error(
    `import failed after ${sent} bytes: ${message || code}${hint}${sent > 0 ? `; ${again}` : ''}`,
  );
  process.exitCode = 1;
}

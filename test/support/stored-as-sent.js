// The fuzz property: every value the validator accepts is stored exactly as sent
// (emails lower-cased), and every value it refuses is refused with a 400 that names the item and
// the field, never a 500 or a 503 (PostgreSQL refusing a value, or a value changing a statement,
// would show as one of those). Shared by service/test/integration/stored-as-sent.fuzz.test.js (a
// bounded run in `npm test`) and scripts/fuzz.js (`npm run fuzz`, the long run), so the two cannot
// drift. The users are generated over the whole of Unicode (fuzz-users.js), sent over HTTP to the
// real service, and read back from PostgreSQL.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { MAX_RECORD_CHARS } from '../../service/src/users/stream-parse.js';
import { caseArbitrary, materialize } from './fuzz-users.js';
import { contractBreaches } from './user-contract.js';

/** @typedef {import('./fuzz-users.js').FuzzCase} FuzzCase */
/** @typedef {import('./fuzz-users.js').FuzzRequest} FuzzRequest */
/** @typedef {Awaited<ReturnType<typeof import('./app.js').startTestApp>>} TestApp */
/** @typedef {{ pool: import('pg').Pool }} TestDatabase */
/**
 * email (lower-cased), name, phone, password_hash, changed_at (in UTC to the microsecond, as
 * checkTable reads it back: fixed width, so it orders as text)
 * @typedef {[string, string, string | null, string | null, string | null]} Row
 */

/**
 * The service's settings for a fuzz run, beside the write variant. Sizes small enough that the
 * generated batches (1 to 14 users) take every way to the table: grouped (up to 4 users, when group
 * commit is on), alone in one statement of the strategy, and alone in several chunks in one
 * transaction. A long admission wait: a request shed with 503 would read as a finding. LOG_LEVEL
 * warn: the app keeps its log lines in memory, and a long run sends a lot of requests.
 */
export const FUZZ_APP_ENV = {
  GROUP_COMMIT_SMALL_ROWS: '4',
  INSERT_CHUNK_ROWS: '5',
  ADMISSION_WAIT_MS: '30000',
  LOG_LEVEL: 'warn',
};

const FIELDS = ['email', 'name', 'phone', 'passwordHash', 'changedAt'];
// The largest generated body is a few megabytes, which the service checks and writes in tens of
// milliseconds: an answer this late means work that grows faster than the body (a regular
// expression that backtracks), which one request can use to hold the event loop for minutes.
const ANSWER_LIMIT_MS = 5000;

/** What a run did, for its report: the accept path must be exercised, not only refusals. */
export function createStats() {
  return { cases: 0, requests: 0, users: 0, accepted: 0, refused: 0, updated: 0 };
}
/** @typedef {ReturnType<typeof createStats>} Stats */

/**
 * Every character outside printable ASCII as \u{…}, so that a failure shows what was sent; a long
 * value cut in the middle.
 * @param {unknown} v
 */
export function show(v) {
  const text = (JSON.stringify(v) ?? String(v)).replace(
    /[^\x20-\x7e]/gu,
    (c) => `\\u{${/** @type {number} */ (c.codePointAt(0)).toString(16)}}`,
  );
  return text.length <= SHOWN
    ? text
    : `${text.slice(0, SHOWN / 2)} …(${text.length - SHOWN} characters)… ${text.slice(-SHOWN / 2)}`;
}
const SHOWN = 4000;

/**
 * How a request's users are sent: a JSON array, or a stream (NDJSON, one a line; CSV, the four
 * columns, every value quoted so that an empty string stays one). A request CSV cannot carry as it
 * is (an item not an object of strings, a field CSV has no column for, a lone surrogate, which
 * UTF-8 cannot encode) goes as NDJSON instead.
 * @typedef {'json' | 'ndjson' | 'csv'} BodyFormat
 */

/**
 * The body of a request in `format`: what to send, its Content-Type, and the line each user starts
 * on (a stream's errors name it).
 * A line or record longer than MAX_RECORD_CHARS is no user: the stream is refused at the first
 * (`tooLongAt`, its line) as malformed, not as invalid.
 * @param {unknown[]} items @param {BodyFormat} format
 * @returns {{ body: unknown, contentType: string, lines?: number[], tooLongAt?: number }}
 */
export function encodeBody(items, format) {
  if (format === 'json') return { body: items, contentType: 'application/json' };
  if (format === 'csv' && items.every(csvCanCarry)) {
    let body = 'email,name,phone,passwordHash,changedAt\r\n';
    let line = 2;
    const lines = [];
    let tooLongAt;
    for (const item of /** @type {Record<string, string>[]} */ (items)) {
      lines.push(line);
      const record = FIELDS.map((f) =>
        item[f] === undefined ? '' : `"${item[f].replaceAll('"', '""')}"`,
      ).join(',');
      if (tooLongAt === undefined && record.length + 2 > MAX_RECORD_CHARS) tooLongAt = line;
      body += `${record}\r\n`;
      line += record.split('\n').length;
    }
    return { body, contentType: 'text/csv', lines, tooLongAt };
  }
  const texts = items.map((item) => JSON.stringify(item));
  const tooLong = texts.findIndex((t) => t.length > MAX_RECORD_CHARS);
  return {
    body: texts.map((t) => `${t}\n`).join(''),
    contentType: 'application/x-ndjson',
    lines: items.map((_, i) => i + 1),
    tooLongAt: tooLong === -1 ? undefined : tooLong + 1,
  };
}

/** @param {unknown} item */
function csvCanCarry(item) {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) return false;
  return Object.entries(item).every(
    ([k, v]) =>
      FIELDS.includes(k) && typeof v === 'string' && /** @type {any} */ (v).isWellFormed(),
  );
}

/**
 * The property over generated cases, for fc.assert (the tests) and fc.check (npm run fuzz).
 * @param {{ app: TestApp, db: TestDatabase }} target  the service, and a pool on its database
 * @param {Stats} [stats]
 * @param {BodyFormat} [format]
 */
export function storedAsSentProperty(target, stats = createStats(), format = 'json') {
  return fc.asyncProperty(caseArbitrary, (generated) =>
    runCase(target, materialize(generated), stats, format),
  );
}

/**
 * One case: the table emptied, then its requests sent phase by phase (the requests of a phase
 * concurrently; they share no email), each answer checked, and the table read back after each
 * phase and compared with what the contract says it holds.
 * @param {{ app: TestApp, db: TestDatabase }} target
 * @param {FuzzCase} fuzzCase
 * @param {Stats} [stats]
 * @param {BodyFormat} [format]
 */
export async function runCase({ app, db }, fuzzCase, stats = createStats(), format = 'json') {
  await db.pool.query('DELETE FROM users');
  app.logs.length = 0;
  stats.cases++;
  /** @type {Map<string, Row>} what the table must hold, by email */
  const table = new Map();
  for (const phase of fuzzCase) {
    const bodies = phase.map((r) => encodeBody(r.items, format));
    const answers = await Promise.all(
      phase.map((r, i) =>
        timed(() =>
          app.postUsers(bodies[i].body, {
            contentType: bodies[i].contentType,
            headers: r.resolution === 'merge' ? { prefer: 'resolution=merge-duplicates' } : {},
          }),
        ),
      ),
    );
    phase.forEach((request, i) =>
      checkAnswer(request, answers[i], table, app.logs, stats, bodies[i]),
    );
    await checkTable(db, table);
  }
}

/**
 * @template T
 * @param {() => Promise<T>} send
 * @returns {Promise<T & { ms: number }>}
 */
async function timed(send) {
  const started = performance.now();
  const answer = await send();
  return { ...answer, ms: performance.now() - started };
}

/**
 * @param {FuzzRequest} request
 * @param {{ status: number, body: any, text: string, ms: number }} answer
 * @param {Map<string, Row>} table  updated with what an accepted request wrote
 * @param {any[]} logs
 * @param {Stats} stats
 * @param {{ contentType: string, lines?: number[], tooLongAt?: number }} sent
 */
function checkAnswer(request, answer, table, logs, stats, sent) {
  const { items, resolution, plausible } = request;
  const context = () =>
    `request (${resolution}, ${sent.contentType}): ${show(items)}\nanswer ${answer.status}: ${show(answer.body ?? answer.text)}${errorLogs(logs)}`;
  stats.requests++;
  stats.users += items.length;
  assert.ok(
    answer.ms < ANSWER_LIMIT_MS,
    `answered in ${Math.round(answer.ms)} ms: checking a body must take time linear in its size\n${context()}`,
  );
  if (sent.tooLongAt !== undefined) {
    stats.refused++;
    assert.equal(
      answer.status,
      400,
      `a stream with a line too long for a user, not refused\n${context()}`,
    );
    assert.ok(
      ['malformed_json', 'malformed_csv'].includes(answer.body?.error),
      `a line too long for a user, not refused as malformed\n${context()}`,
    );
    assert.match(
      answer.body.message,
      new RegExp(`^line ${sent.tooLongAt}\\b`),
      `the refusal names another line than the first too long\n${context()}`,
    );
    return;
  }
  if (answer.status === 400) {
    stats.refused++;
    assert.equal(
      answer.body?.error,
      'invalid_batch',
      `a 400 other than invalid_batch\n${context()}`,
    );
    const errors = answer.body.errors;
    assert.ok(
      Array.isArray(errors) && errors.length >= 1 && errors.length <= 100,
      `invalid_batch with no errors\n${context()}`,
    );
    errors.forEach((/** @type {any} */ e, /** @type {number} */ k) => {
      assert.ok(
        Number.isInteger(e.index) && e.index >= 0 && e.index < items.length,
        `error ${k} names no item\n${context()}`,
      );
      assert.ok(
        k === 0 || errors[k - 1].index <= e.index,
        `errors not in index order\n${context()}`,
      );
      const item = items[e.index];
      const isObject = item !== null && typeof item === 'object' && !Array.isArray(item);
      // A field of the item, or a required one it lacks; for an item that is no object, none.
      const named = isObject
        ? typeof e.field === 'string' && (Object.hasOwn(item, e.field) || FIELDS.includes(e.field))
        : e.field === null;
      assert.ok(named, `error ${k} names no field of item ${e.index}\n${context()}`);
      assert.ok(
        typeof e.message === 'string' && e.message !== '',
        `error ${k} has no message\n${context()}`,
      );
      if (sent.lines)
        assert.equal(e.line, sent.lines[e.index], `error ${k} names the wrong line\n${context()}`);
      assert.ok(
        !plausible[e.index],
        `item ${e.index} follows the contract, yet is refused (${e.field}: ${e.message})\n${context()}`,
      );
    });
    assert.ok(
      expect(request) !== 'accept',
      `refused a batch that follows the contract\n${context()}`,
    );
    // Every field of every item that breaks the contract is named (unless the list is full).
    if (errors.length < 100) {
      items.forEach((item, i) => {
        for (const { field, rule } of contractBreaches(item)) {
          assert.ok(
            errors.some((/** @type {any} */ e) => e.index === i && e.field === field),
            `item ${i} breaks the contract (${field}: ${rule}), yet is not named\n${context()}`,
          );
        }
      });
    }
    return;
  }
  assert.ok(answer.status === 200 || answer.status === 201, `neither 2xx nor 400\n${context()}`);
  assert.ok(expect(request) !== 'refuse', `accepted a batch the contract refuses\n${context()}`);
  items.forEach((item, i) =>
    assert.deepEqual(
      contractBreaches(item),
      [],
      `accepted item ${i}, which breaks the contract\n${context()}`,
    ),
  );
  stats.accepted += items.length;

  const expected = write(table, items, resolution);
  stats.updated += expected.updated;
  const counts = {
    received: items.length,
    inserted: expected.inserted,
    updated: expected.updated,
    duplicates: items.length - expected.inserted,
  };
  // Merge mode counts every item that wrote nothing as stale: inserted + updated + stale = received.
  const answered =
    resolution === 'merge'
      ? { ...counts, stale: items.length - expected.inserted - expected.updated }
      : counts;
  assert.deepEqual(answer.body, answered, `counts\n${context()}`);
  assert.equal(answer.status, expected.inserted > 0 ? 201 : 200, `status\n${context()}`);
}

/** @param {FuzzRequest} request @returns {'accept' | 'refuse' | undefined} */
const expect = (request) =>
  request.expect ?? (request.plausible.every(Boolean) ? 'accept' : undefined);

/** The error lines the service logged for this case (a 500's error id and cause). @param {any[]} logs */
function errorLogs(logs) {
  const errors = logs.filter((l) => l.level >= 50);
  return errors.length
    ? `\nlogged: ${show(errors.map((l) => ({ msg: l.msg, errorId: l.errorId, err: l.err?.message ?? l.err })))}`
    : '';
}

/**
 * What an accepted request does to the table, as the contract says: in one request an email sent
 * twice is applied in order (ignore keeps the first; merge takes the later name, and its phone and
 * hash where it has them), in merge mode the order of the changes: those without changedAt first,
 * then by changedAt, a tie keeping the order sent. A stored email is skipped (ignore) or takes the
 * request's values (merge, an omitted phone or hash keeping the stored one), counted as updated only
 * when a value changes, and only when the change is newer than the stored one: a row with changedAt
 * takes only a later changedAt; a row without takes any change.
 * @param {Map<string, Row>} table  changed in place
 * @param {any[]} items  valid users (the service accepted them)
 * @param {'ignore' | 'merge'} resolution
 */
function write(table, items, resolution) {
  /** @type {Map<string, Row[]>} */
  const byEmail = new Map();
  for (const u of items) {
    const row = /** @type {Row} */ ([
      u.email.toLowerCase(),
      u.name,
      u.phone ?? null,
      u.passwordHash ?? null,
      u.changedAt === undefined ? null : inUtc(u.changedAt),
    ]);
    const rows = byEmail.get(row[0]);
    if (rows) rows.push(row);
    else byEmail.set(row[0], [row]);
  }
  let inserted = 0;
  let updated = 0;
  for (const [email, rows] of byEmail) {
    /** @type {Row} */
    let row;
    if (resolution === 'ignore') row = rows[0];
    else {
      const ordered = rows
        .map((r, i) => ({ r, i }))
        .sort((a, b) => (older(a.r[4], b.r[4]) ? -1 : older(b.r[4], a.r[4]) ? 1 : a.i - b.i))
        .map((x) => x.r);
      row = ordered.reduce((before, next) => merged(before, next));
    }
    const stored = table.get(email);
    if (stored === undefined) {
      table.set(email, row);
      inserted++;
    } else if (
      resolution === 'merge' &&
      (stored[4] === null || (row[4] !== null && row[4] > stored[4]))
    ) {
      const next = merged(stored, row);
      if (next.some((v, c) => v !== stored[c])) {
        table.set(email, next);
        updated++;
      }
    }
  }
  return { inserted, updated };
}

/** Whether change a is older than b: none is older than any. @param {string | null} a @param {string | null} b */
const older = (a, b) => (a === null ? b !== null : b !== null && a < b);

/**
 * A changedAt as checkTable reads it back: UTC, 6 fractional digits.
 * @param {string} s  RFC 3339 with an offset
 */
function inUtc(s) {
  const offsetAt = s.endsWith('Z') ? s.length - 1 : s.length - 6;
  const fraction = s[19] === '.' ? s.slice(20, offsetAt).padEnd(6, '0') : '000000';
  return `${new Date(Date.parse(`${s.slice(0, 19)}${s.slice(offsetAt)}`)).toISOString().slice(0, 19)}.${fraction}Z`;
}

/** @param {Row} before @param {Row} row @returns {Row} */
const merged = (before, row) => [row[0], row[1], row[2] ?? before[2], row[3] ?? before[3], row[4]];

/**
 * The table holds exactly the expected rows: each read back by its email, byte for byte, and no
 * other (nothing of a refused request).
 * @param {TestDatabase} db
 * @param {Map<string, Row>} table
 */
async function checkTable(db, table) {
  const { rows } = await db.pool.query(
    `SELECT email, name, phone, password_hash, to_char(changed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS changed_at FROM users WHERE email = ANY($1::text[])`,
    [[...table.keys()]],
  );
  const stored = new Map(
    rows.map((r) => [
      r.email,
      /** @type {Row} */ ([r.email, r.name, r.phone, r.password_hash, r.changed_at]),
    ]),
  );
  for (const [email, row] of table) {
    const found = stored.get(email);
    assert.ok(found, `${show(email)} was accepted but is not stored under that email`);
    assert.ok(
      found.every((v, c) => v === row[c]),
      `stored ${show(found)}\n  sent ${show(row)} (email lower-cased)`,
    );
  }
  const {
    rows: [{ n }],
  } = await db.pool.query('SELECT count(*)::int AS n FROM users');
  assert.equal(
    n,
    table.size,
    `the table holds ${n} users, the accepted requests wrote ${table.size}: something refused was stored`,
  );
}

import { timeoutOf } from '../db/database.js';
import { byScopedKey, claimed, completeKeys, keyInFlight, scopedKey } from './idempotency-keys.js';
import { keepQuarantined } from './quarantine.js';

// The write unit: every write (a request, a group, a stream) is one transaction of one shape: its
// keys claimed in BEGIN's round trip, its rows, the items it sets aside, its outcomes stored under
// its keys in COMMIT's round trip. A part whose key is taken writes nothing: that is its outcome.
// It returns domain values; the caller renders the answer after COMMIT.

/** @import { IdempotencyKey, KeyDone, KeyStore, Lending, Outcome } from './write-types.js' */
/** @import { Part, QueryResult, RowCounts, TakenKey, TimeLimits } from './write-types.js' */
/** @import { Unit, UnitDeps, Written } from './write-types.js' */

/**
 * The unit's transaction: each part's outcome, in order. A claim that waited out its lock timeout
 * is a single request's key in flight (409); a group's is thrown as it came, for its policy.
 * @param {UnitDeps} deps @param {Unit} unit @returns {Promise<Outcome[]>}
 */
export async function writeUnit({ db, keys }, { parts, rows, limits }) {
  const keyed = firstOfEachKey(parts);
  if (keyed.length === 0 && !parts.some((p) => p.quarantine) && rows.oneStatement) {
    const settings = db.settings.statement('', limits);
    const counts = await db.withClient((client) => rows.write(client, [...parts], settings));
    return parts.map((part, i) => writtenOf(part, counts[i]));
  }
  const claim = keyed.length > 0 ? keysOf(keys).claim(keyed.map((p) => keyOf(p))) : '';
  const then = [rows.beginWith, claim].filter(Boolean).join('; ');
  let begun = false;
  try {
    return await db.transaction(
      async (client, answers) => {
        begun = true;
        const taken = keyed.length > 0 ? await takenKeys(client, answers, parts, keyed) : NONE;
        const going = parts.filter((part) => !taken.has(part));
        const counts = going.length > 0 ? await rows.write(client, going, '') : [];
        for (const part of going)
          if (part.quarantine) await keepQuarantined(client, part.quarantine);
        const written = new Map(going.map((part, i) => [part, writtenOf(part, counts[i])]));
        const done = keyed.filter((part) => written.has(part)).map((part) => doneOf(part, written));
        if (done.length > 0) client.withCommit(completeKeys(done));
        return parts.map((part) => written.get(part) ?? { taken: taken.get(part) ?? null });
      },
      { limits, then },
    );
  } catch (err) {
    const inFlight = parts.length === 1 && keyed.length === 1 && !begun;
    throw inFlight && timeoutOf(err) === 'lock_timeout' ? keyInFlight(err) : err;
  }
}

/**
 * Every row new, so the outcome is known before it runs: `statement` and its keys inserted complete
 * in one statement (a key stored meanwhile fails it too: 23505, and the caller goes to writeUnit).
 * For parts that want no rows back, keep nothing, give no key twice. @returns {Promise<Outcome[]>}
 * @param {UnitDeps} deps @param {{ parts: Part[], statement: string, limits?: TimeLimits }} unit
 */
export async function writeAllNewAtOnce({ db, keys }, { parts, statement, limits }) {
  const written = new Map(
    parts.map((part) => [part, writtenOf(part, { inserted: part.rows.length, updated: 0 })]),
  );
  const keyed = firstOfEachKey(parts);
  const done = keyed.map((part) => doneOf(part, written));
  const text = done.length > 0 ? `${statement}; ${keysOf(keys).insertComplete(done)}` : statement;
  await db.withClient((client) =>
    client.query({ text: db.settings.statement(text, limits), operation: 'INSERT' }),
  );
  return parts.map((part) => /** @type {Written} */ (written.get(part)));
}

/** Whether writeAllNewAtOnce can write these parts. @param {readonly Part[]} parts */
export const canWriteAtOnce = (parts) =>
  !parts.some((part) => part.withRows || part.quarantine) &&
  firstOfEachKey(parts).length === parts.filter((part) => part.key).length;

/** @type {ReadonlyMap<Part, TakenKey>} */
const NONE = new Map();

/** @param {KeyStore | undefined} keys @returns {KeyStore} */
function keysOf(keys) {
  if (!keys) throw new Error('a keyed write needs the key store');
  return keys;
}

/** @param {Part} part @returns {IdempotencyKey} */
const keyOf = (part) => /** @type {IdempotencyKey} */ (part.key);

/**
 * The keyed parts, the first of each key only, in key order (two units never wait on each other
 * in a cycle). @param {readonly Part[]} parts
 */
function firstOfEachKey(parts) {
  /** @type {Map<string, Part>} */
  const first = new Map();
  for (const part of parts) {
    if (!part.key) continue;
    const scoped = scopedKey(part.key);
    if (!first.has(scoped)) first.set(scoped, part);
  }
  return [...first.values()].sort((a, b) => byScopedKey(keyOf(a), keyOf(b)));
}

/**
 * The parts that write nothing: a key taken (or in flight), or given again by a later part (in
 * flight: its first is this unit's). @param {Lending} client @param {QueryResult[]} begun
 * @param {readonly Part[]} parts @param {readonly Part[]} keyed
 */
async function takenKeys(client, begun, parts, keyed) {
  const found = await claimed(client, begun, keyed.map(keyOf));
  /** @type {Map<Part, TakenKey>} */
  const taken = new Map();
  const claimedBy = new Set(keyed);
  for (const part of parts) {
    if (!part.key) continue;
    const state = found.get(scopedKey(part.key));
    if (!claimedBy.has(part)) taken.set(part, null);
    else if (state !== 'claimed') taken.set(part, state ?? null);
  }
  return taken;
}

/** @param {Part} part @param {RowCounts} counts @returns {Written} */
function writtenOf(part, { inserted, updated, users, received, tombstoned }) {
  /** @type {Written} */
  const written = { received: received ?? part.received, inserted, updated };
  if (tombstoned) written.tombstoned = tombstoned;
  if (part.withRows) written.users = users ?? [];
  const q = part.quarantine;
  if (q) written.quarantined = { count: q.count, requestId: q.requestId, errors: q.errors };
  return written;
}

/** @param {Part} part @param {Map<Part, Written>} written */
const doneOf = (part, written) => ({
  key: keyOf(part),
  written: /** @type {Written} */ (written.get(part)),
});

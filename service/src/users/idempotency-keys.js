import { runStatement } from '../db/statement.js';
import { lastResult } from '../db/transaction-settings.js';
import { ApiError } from '../errors.js';
import { literal } from './user-sql.js';

// The idempotency_keys table: a key is claimed in its write's BEGIN round trip (one in flight
// elsewhere waited for, within the lock timeout) and completed, fingerprint and outcome, in its
// COMMIT round trip, so the rows and their outcome commit together or not at all.

/** @import { Database, KeyDone, KeyName, Lending } from './write-types.js' */
/** @import { QueryResult, StoredOutcome, TakenKey } from './write-types.js' */

/** As one Map key: no NUL is in a key (visible ASCII) or a credential's name. @param {KeyName} k */
export const scopedKey = (k) => `${k.client}\u0000${k.key}`;

/** @param {KeyName} a @param {KeyName} b */
export const byScopedKey = (a, b) => (scopedKey(a) < scopedKey(b) ? -1 : 1);

/** @param {KeyName} k */
const rowOf = (k) => `(${literal(k.client)}, ${literal(k.key)})`;

/** @param {KeyDone} done */
function completeValues({ key, written }) {
  const fingerprint = `'\\x${/** @type {Buffer} */ (key.fingerprint).toString('hex')}'::bytea`;
  const outcome = literal(JSON.stringify({ written, rendering: key.rendering }));
  return `(${literal(key.client)}, ${literal(key.key)}, ${fingerprint}, ${outcome}::json)`;
}

/** `ttlSeconds`: IDEMPOTENCY_KEY_TTL_SECONDS. @param {{ ttlSeconds: number }} options */
export function createKeyStore({ ttlSeconds }) {
  const expiresAt = `now() + interval '${Math.trunc(ttlSeconds)} seconds'`;
  return {
    ttlSeconds,
    /**
     * The claim of `keys` (each once, in one order: no two claims wait on each other in a cycle),
     * for a BEGIN's round trip, read by `claimed`; an expired row is claimed again as a new key.
     * @param {readonly KeyName[]} keys
     */
    claim: (keys) => `INSERT INTO idempotency_keys (client, key, expires_at)
  SELECT c, k, ${expiresAt} FROM (VALUES ${keys.map(rowOf).join(', ')}) AS v (c, k)
  ON CONFLICT (client, key) DO UPDATE
    SET expires_at = EXCLUDED.expires_at,
      fingerprint = NULL, outcome = NULL, status = NULL, headers = NULL, body = NULL
  WHERE idempotency_keys.expires_at <= now()
  RETURNING client, key`,
    /**
     * The keys' rows inserted complete, for a write whose outcome is known before it runs: a key
     * stored or in flight elsewhere fails it (23505), and the write goes again with claims.
     * @param {readonly KeyDone[]} done
     */
    insertComplete: (done) =>
      `INSERT INTO idempotency_keys (client, key, fingerprint, outcome, expires_at)
  SELECT c, k, f, o, ${expiresAt}
  FROM (VALUES ${done.map(completeValues).join(', ')}) AS v (c, k, f, o)`,
  };
}

/** @typedef {ReturnType<typeof createKeyStore>} KeyStore */

/** For the COMMIT's round trip. @param {readonly KeyDone[]} done */
export const completeKeys = (done) => `UPDATE idempotency_keys AS k
  SET fingerprint = v.f, outcome = v.o
  FROM (VALUES ${done.map(completeValues).join(', ')}) AS v (c, k, f, o)
  WHERE k.client = v.c AND k.key = v.k; `;

/**
 * What a claim found, from its BEGIN's last answer: each key claimed now, or taken (its row, read
 * only when a key was not claimed; null when not complete or purged meanwhile: in flight).
 * @param {Lending} client @param {QueryResult[]} begun @param {readonly KeyName[]} keys
 * @returns {Promise<Map<string, 'claimed' | TakenKey>>}
 */
export async function claimed(client, begun, keys) {
  /** @type {Map<string, 'claimed' | TakenKey>} */
  const found = new Map();
  for (const row of begun[begun.length - 1].rows) found.set(scopedKey(row), 'claimed');
  if (found.size === keys.length) return found;
  const taken = keys.filter((k) => !found.has(scopedKey(k)));
  for (const k of taken) found.set(scopedKey(k), null);
  for (const [scoped, key] of await runStatement(client, completeRows(taken)))
    found.set(scoped, key);
  return found;
}

/**
 * The complete rows of `keys`, each as a taken key by its scoped name.
 * @param {readonly KeyName[]} keys
 * @returns {import('../db/db-types.js').Statement<Map<string, TakenKey>>}
 */
const completeRows = (keys) => ({
  text: `SELECT client, key, fingerprint, outcome, status, headers, body FROM idempotency_keys
    WHERE (client, key) IN (VALUES ${keys.map(rowOf).join(', ')}) AND fingerprint IS NOT NULL`,
  decode: (answer) =>
    new Map(lastResult(answer).rows.map((row) => [scopedKey(row), takenKeyOf(row)])),
});

/**
 * @param {{ fingerprint: Buffer, outcome: StoredOutcome | null, status: number,
 *   headers: Record<string, string>, body: string }} row @returns {TakenKey}
 */
function takenKeyOf({ fingerprint, outcome, status, headers, body }) {
  return { fingerprint, stored: outcome ?? { answer: { status, headers, body } } };
}

/**
 * The stored outcome when the fingerprint is this request's; else 422, or 409 while in flight.
 * @param {TakenKey} taken @param {Buffer} fingerprint @returns {StoredOutcome}
 */
export function storedOutcomeOf(taken, fingerprint) {
  if (taken === null) throw new ApiError('idempotency_key_in_flight');
  if (!taken.fingerprint.equals(fingerprint)) throw new ApiError('idempotency_key_reused');
  return taken.stored;
}

/** A write a key in flight elsewhere kept past its lock timeout: 409. @param {unknown} cause */
export const keyInFlight = (cause) =>
  new ApiError('idempotency_key_in_flight', undefined, { cause });

/** Rows a purge deletes in one transaction: short, so no writer waits long on one. */
export const PURGE_BATCH_ROWS = 1000;

/** Oldest first, skipping rows a claim holds. @param {Database} db @param {number} [batchRows] */
export const purgeExpiredKeys = (db, batchRows = PURGE_BATCH_ROWS) =>
  db.withClient((client) =>
    runStatement(client, {
      text: db.settings.statement(`DELETE FROM idempotency_keys WHERE (client, key) IN (
    SELECT client, key FROM idempotency_keys WHERE expires_at <= now() ORDER BY expires_at
    LIMIT ${Math.trunc(batchRows)} FOR UPDATE SKIP LOCKED)`),
      decode: (answer) => lastResult(answer).rowCount ?? 0,
    }),
  );

import { lastResult } from '../db/transaction-settings.js';
import { ApiError } from '../errors.js';
import { literal } from './user-sql.js';

// The Idempotency-Key store: a key is claimed in the round trip of its write's BEGIN (a key in
// flight in another transaction is waited for, within the write's lock timeout), its fingerprint
// and answer stored in the round trip of its COMMIT, so the rows and their answer commit together
// or not at all. A key taken (committed, not expired) is answered from its row: the same
// fingerprint its answer again, another 422. Expired keys are purged in small batches
// (purgeExpiredKeys).

/**
 * What a write answered, as stored and replayed: the status, its headers (no Content-Length), the
 * body's text.
 * @typedef {{ status: number, headers: Record<string, string>, body: string }} StoredAnswer
 */
/**
 * A request's key, scoped by its client; `fingerprint()` final once its body is read; `answer`
 * the answer its counts get (the HTTP layer's), asked before COMMIT.
 * @typedef {{ client: string, key: string, fingerprint: () => Buffer,
 *   answer: (counts: import('./user-writer.js').Counts) => StoredAnswer }} IdempotencyKey
 */
/**
 * A key another request holds: its committed fingerprint and answer, or (null) still in flight.
 * @typedef {{ fingerprint: Buffer, answer: StoredAnswer } | null} TakenKey
 */

/**
 * A key's scope and name as one Map key (a NUL is in neither: a key is visible ASCII, a client a
 * credential's name).
 * @param {{ client: string, key: string }} k
 */
export const scopedKey = (k) => `${k.client}\u0000${k.key}`;

/** @param {{ client: string, key: string }} k */
const rowOf = (k) => `(${literal(k.client)}, ${literal(k.key)})`;
/** @param {Buffer} fingerprint */
const bytea = (fingerprint) => `'\\x${fingerprint.toString('hex')}'::bytea`;

/**
 * The key store's statements; ttlSeconds: how long a key is kept (IDEMPOTENCY_KEY_TTL_SECONDS).
 * @param {{ ttlSeconds: number }} options
 */
export function createKeyStore({ ttlSeconds }) {
  const expiresAt = `now() + interval '${Math.trunc(ttlSeconds)} seconds'`;
  return {
    ttlSeconds,
    /**
     * The claim of `keys` (each once, in one order: two claims never wait on each other in a
     * cycle), for a BEGIN's round trip; its last answer is read by `claimed`. An expired row is
     * claimed again as a new key.
     * @param {readonly { client: string, key: string }[]} keys
     */
    claim: (
      keys,
    ) => `INSERT INTO idempotency_keys (client, key, expires_at) SELECT c, k, ${expiresAt}
    FROM (VALUES ${keys.map(rowOf).join(', ')}) AS v (c, k)
  ON CONFLICT (client, key) DO UPDATE
    SET expires_at = EXCLUDED.expires_at,
      fingerprint = NULL, status = NULL, headers = NULL, body = NULL
  WHERE idempotency_keys.expires_at <= now()
  RETURNING client, key`,
    /**
     * The keys' rows, complete, for a write that claimed none first (a group: in its COMMIT's round
     * trip, or in its one statement when all new): a key another request stored meanwhile fails it
     * (23505, then `readKeys`); one another transaction holds is waited for. In one order, as
     * `claim`.
     * @param {readonly { key: IdempotencyKey, answer: StoredAnswer }[]} done
     */
    insertAnswers: (done) =>
      `INSERT INTO idempotency_keys (client, key, expires_at, fingerprint, status, headers, body)
      VALUES ${done
        .map(
          ({ key, answer }) =>
            `(${literal(key.client)}, ${literal(key.key)}, ${expiresAt}, ` +
            `${bytea(key.fingerprint())}, ${answer.status}, ` +
            `${literal(JSON.stringify(answer.headers))}::jsonb, ${literal(answer.body)})`,
        )
        .join(', ')}; `,
  };
}

/** @typedef {ReturnType<typeof createKeyStore>} KeyStore */

/**
 * What a claim found, from the last answer of its BEGIN's round trip: each key claimed now, or
 * taken (its row, read in one more round trip only when a key was not claimed; null when it has
 * none: purged meanwhile, so in flight for the client).
 * @param {import('../db/lending.js').Lending} client
 * @param {import('pg').QueryResult[]} begun
 * @param {readonly { client: string, key: string }[]} keys
 * @returns {Promise<Map<string, 'claimed' | TakenKey>>}
 */
export async function claimed(client, begun, keys) {
  /** @type {Map<string, 'claimed' | TakenKey>} */
  const found = new Map();
  for (const row of begun[begun.length - 1].rows) found.set(scopedKey(row), 'claimed');
  if (found.size === keys.length) return found;
  const taken = keys.filter((k) => !found.has(scopedKey(k)));
  const read =
    await client.query(`SELECT client, key, fingerprint, status, headers, body FROM idempotency_keys
    WHERE (client, key) IN (VALUES ${taken.map(rowOf).join(', ')}) AND status IS NOT NULL`);
  for (const k of taken) found.set(scopedKey(k), null);
  for (const row of read.rows) {
    found.set(scopedKey(row), {
      fingerprint: row.fingerprint,
      answer: { status: row.status, headers: row.headers, body: row.body },
    });
  }
  return found;
}

/**
 * The stored rows of `keys`: each expired (to be deleted before it is used again) or taken.
 * @param {import('../db/lending.js').Lending} client
 * @param {readonly { client: string, key: string }[]} keys
 * @returns {Promise<Map<string,
 *   { expired: true } | { expired: false, taken: NonNullable<TakenKey> }>>}
 */
export async function readKeys(client, keys) {
  const read = await client.query(`
    SELECT client, key, expires_at <= now() AS expired, fingerprint, status, headers, body
    FROM idempotency_keys
    WHERE (client, key) IN (VALUES ${keys.map(rowOf).join(', ')})`);
  return new Map(
    read.rows.map((row) => [
      scopedKey(row),
      row.expired
        ? { expired: /** @type {const} */ (true) }
        : {
            expired: /** @type {const} */ (false),
            taken: {
              fingerprint: row.fingerprint,
              answer: { status: row.status, headers: row.headers, body: row.body },
            },
          },
    ]),
  );
}

/**
 * Expired rows of `keys` deleted, so that they are inserted as new keys.
 * @param {readonly { client: string, key: string }[]} keys
 */
export const deleteExpired = (keys) =>
  `DELETE FROM idempotency_keys WHERE (client, key) IN (VALUES ${keys.map(rowOf).join(', ')})
    AND expires_at <= now()`;

/**
 * The statement that completes claimed keys with their fingerprints and answers, for the COMMIT's
 * round trip. @param {readonly { key: IdempotencyKey, answer: StoredAnswer }[]} done
 */
export function storeAnswers(done) {
  const values = done.map(
    ({ key, answer }) =>
      `(${literal(key.client)}, ${literal(key.key)}, ${bytea(key.fingerprint())}, ` +
      `${answer.status}, ${literal(JSON.stringify(answer.headers))}::jsonb, ` +
      `${literal(answer.body)})`,
  );
  return `UPDATE idempotency_keys AS k
    SET fingerprint = v.fingerprint, status = v.status, headers = v.headers, body = v.body
  FROM (VALUES ${values.join(', ')}) AS v (client, key, fingerprint, status, headers, body)
  WHERE k.client = v.client AND k.key = v.key; `;
}

/**
 * The answer to a request whose key was taken: the stored one when its fingerprint is this
 * request's; else 422, or 409 while the first is in flight.
 * @param {TakenKey} taken @param {Buffer} fingerprint @returns {StoredAnswer}
 */
export function answerOfTaken(taken, fingerprint) {
  if (taken === null) throw new ApiError('idempotency_key_in_flight');
  if (!taken.fingerprint.equals(fingerprint)) throw new ApiError('idempotency_key_reused');
  return taken.answer;
}

/**
 * The write a key in flight elsewhere kept waiting past its lock timeout: 409.
 * @param {unknown} cause
 */
export const keyInFlight = (cause) =>
  new ApiError('idempotency_key_in_flight', undefined, { cause });

/** Rows a purge deletes in one transaction: short, so no writer waits long on one. */
export const PURGE_BATCH_ROWS = 1000;

/**
 * Deletes up to `batchRows` expired keys, oldest first, skipping rows another transaction holds
 * (a claim taking an expired key again): the rows deleted.
 * @param {import('../db/database.js').Database} db @param {number} [batchRows]
 */
export async function purgeExpiredKeys(db, batchRows = PURGE_BATCH_ROWS) {
  const result = await db.withClient((client) =>
    client.query(
      db.settings.statement(`DELETE FROM idempotency_keys WHERE (client, key) IN (
    SELECT client, key FROM idempotency_keys WHERE expires_at <= now() ORDER BY expires_at
    LIMIT ${Math.trunc(batchRows)} FOR UPDATE SKIP LOCKED)`),
    ),
  );
  return lastResult(result).rowCount ?? 0;
}

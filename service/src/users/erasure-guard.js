import { createHmac } from 'node:crypto';
import siphash24 from 'siphash24';
import { runStatement } from '../db/statement.js';
import { ApiError } from '../errors.js';
import { ORDER_COLUMN, keyOf } from '../user-columns.js';
import { ERASED_EMAIL_WRITTEN, changedArray, guarded, hmacArray } from './erasure-sql.js';
import { newerTombstone, staleRows, staleTombstone, tombstonesSince } from './erasure-sql.js';
import { KnownTombstones } from './known-tombstones.js';
import { csvLine } from './user-sql.js';

// What keeps an erased email from coming back. Every write asserts, in its own statement (which
// holds the lock an erasure waits for), that no tombstone exists its process has not read, and
// that none of its emails a tombstone read may name is older than its erasure. An email's tag
// (SipHash, cheap) is looked up among the tombstones read; only the few it may name are hashed
// (HMAC-SHA-256) and sent. A failed assertion reads the tombstones it missed, finds the rows they
// keep out (`staleOf`), and the writer goes again without them.

/** @import { Database, UserRow } from './write-types.js' */

/** @param {unknown} err */
export const isErasedWrite = (err) =>
  err instanceof Error && /** @type {{ code?: string }} */ (err).code === ERASED_EMAIL_WRITTEN;

const MAX_EMAIL_BYTES = 1024;

/** `key`: ERASURE_KEY's bytes, when set. @param {{ key?: Buffer }} [options] */
export const createErasureGuard = ({ key } = {}) => new ErasureGuard(key);

export class ErasureGuard {
  #known = new KnownTombstones();
  #key;
  #hmac;
  #tag;
  /** @type {Promise<void> | undefined} */
  #reading;

  /** @param {Buffer} [key] ERASURE_KEY's bytes */
  constructor(key) {
    this.#key = key;
    this.#hmac = key && emailHmac(key);
    this.#tag = key && emailTags(key);
  }

  /**
   * What a write of these rows asserts: a query that fails, or gives no row (bound: a chunk writer
   * is given it alone). @param {readonly UserRow[]} rows @returns {string}
   */
  assertion = (rows) => {
    const newer = newerTombstone(this.#known.generation);
    const named = this.#candidates(rows);
    if (named.length === 0) return newer;
    const { hmac } = this.#keyed();
    const stale = staleTombstone(
      hmacArray(named.map((row) => hmac(keyOf(row)))),
      changedArray(named.map((row) => row[ORDER_COLUMN.field])),
    );
    return `${newer} UNION ALL ${stale}`;
  };

  /** Whether this process has ERASURE_KEY: without it, it can read no tombstone. */
  get keyed() {
    return this.#hmac !== undefined;
  }

  /**
   * A write's source with its assertion.
   * @param {string} source @param {readonly UserRow[]} rows
   */
  guard = (source, rows) => guarded(source, this.assertion(rows));

  /**
   * After a failed assertion: the tombstones missed read, then the rows they keep out.
   * @param {Database} db @param {readonly UserRow[]} rows @returns {Promise<Set<UserRow>>}
   */
  async staleOf(db, rows) {
    const { hmac } = this.#keyed();
    await this.#readNewer(db);
    const named = this.#candidates(rows);
    if (named.length === 0) return new Set();
    const changes = named.map((row) => row[ORDER_COLUMN.field]);
    const stale = staleRows(
      named.map((row) => hmac(keyOf(row))),
      changes,
    );
    const at = await db.withClient((client) => runStatement(client, stale));
    return new Set(at.map((i) => named[i]));
  }

  /** An erasure's hashes and tags. @param {readonly string[]} emails */
  tombstonesOf(emails) {
    const { hmac, tag } = this.#keyed();
    return { hmacs: emails.map((email) => hmac(email)), tags: emails.map((email) => tag(email)) };
  }

  /**
   * For a stream, read at its start: each line's CSV with its email's hash after it when a
   * tombstone read may name it (else none), and what it asserts at its end.
   * @param {Database} db
   */
  async forStream(db) {
    if (this.#key) await this.#readNewer(db);
    const assertion = `SELECT WHERE NOT EXISTS (${newerTombstone(this.#known.generation)})`;
    const [hmac, tag, known] = [this.#hmac, this.#tag, this.#known];
    if (!hmac || !tag || known.size === 0) return { lineOf: undefined, assertion };
    /** @param {UserRow} row */
    const lineOf = (row) => {
      const line = csvLine(row).slice(0, -1);
      const email = keyOf(row);
      return known.has(tag(email)) ? `${line},\\x${hmac(email).toString('hex')}\n` : `${line},\n`;
    };
    return { lineOf, assertion };
  }

  /** The rows a tombstone read may name. @param {readonly UserRow[]} rows */
  #candidates(rows) {
    const tag = this.#tag;
    if (!tag || this.#known.size === 0) return [];
    return rows.filter((row) => this.#known.has(tag(keyOf(row))));
  }

  #keyed() {
    if (!this.#hmac || !this.#tag) throw new ApiError('erasure_key_missing');
    return { hmac: this.#hmac, tag: this.#tag };
  }

  /** The tombstones missed, read once however many writes ask at once. @param {Database} db */
  #readNewer(db) {
    this.#reading ??= db
      .withClient((client) => runStatement(client, tombstonesSince(this.#known.generation)))
      .then(({ generation, tags }) => this.#known.absorb(generation, tags))
      .finally(() => {
        this.#reading = undefined;
      });
    return this.#reading;
  }
}

/** The email's tombstone name: HMAC-SHA-256 under ERASURE_KEY. @param {Buffer} key */
const emailHmac = (key) => (/** @type {string} */ email) =>
  createHmac('sha256', key).update(email).digest();

/**
 * An email's tag: 32 bits of SipHash-2-4 under a key derived from ERASURE_KEY, a few hundred
 * nanoseconds where HMAC takes microseconds. @param {Buffer} key
 */
function emailTags(key) {
  const tagKey = createHmac('sha256', key).update('sluice email tag').digest().subarray(0, 16);
  const bytes = Buffer.alloc(MAX_EMAIL_BYTES);
  const out = Buffer.alloc(siphash24.BYTES);
  return (/** @type {string} */ email) => {
    const length = bytes.write(email);
    siphash24(bytes.subarray(0, length), tagKey, out);
    return out.readInt32LE(0);
  };
}

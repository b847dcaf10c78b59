import { allNewFirst, isUniqueViolation } from './all-new-first.js';
import { ChunkBuffer } from './chunk-buffer.js';
import { copyAll, longQuery, startCopy } from './copy-from.js';
import { runStatement } from '../db/statement.js';
import { LEAVE_OUT_STAGED } from './erasure-sql.js';
import {
  COPY_STREAM_STAGING,
  COPY_STREAM_STAGING_HASHED,
  COPY_USERS,
  CREATE_STREAM_STAGING,
  EMPTY_STREAM_STAGING,
  FIRST_OF_EACH,
  writeStatement,
} from './user-sql.js';

// Ignore mode's chunks, all-new first: COPY into users under a savepoint; a chunk that meets a
// stored or repeated email goes through the staging table, and so does every chunk after it.

/** @import { CopyInto, Lending } from './stream-types.js' */

/** Bytes a chunk holds until it is in users. */
const CHUNK_BYTES = 1024 * 1024;

export class ChunkedCopy {
  #client;
  #chunk = new ChunkBuffer(CHUNK_BYTES);
  #staged = false;
  #inserted = 0;
  #leftOut = 0;
  #hashed = false;
  /** @type {CopyInto | undefined} none once staged */
  #copy;

  /**
   * The first chunk begun; `hashed`, lines with their email's hash: every chunk through the
   * staging table, what an erasure keeps out left out.
   * @param {Lending} client @param {boolean} [hashed]
   */
  static async begin(client, hashed = false) {
    const chunks = new ChunkedCopy(client);
    chunks.#hashed = hashed;
    if (!hashed) chunks.#copy = await startCopy(client, COPY_USERS, 'chunk');
    return chunks;
  }

  /** The lines an erasure kept out. */
  get leftOut() {
    return this.#leftOut;
  }

  /** @param {Lending} client */
  constructor(client) {
    this.#client = client;
  }

  /** A unique violation waits for the chunk's end. @param {string} csv */
  async send(csv) {
    // Kept as bytes: a string built row by row is a rope holding all its pieces.
    if (csv !== '') {
      const bytes = this.#chunk.append(csv);
      if (this.#copy) await this.#copy.write(bytes);
    }
    const failure = this.#copy?.error();
    if (failure && !isUniqueViolation(failure)) throw failure;
  }

  /** `between` runs while no COPY is in progress. @param {() => Promise<void>} [between] */
  async next(between) {
    await this.#endChunk();
    await between?.();
    if (!this.#staged && !this.#hashed)
      this.#copy = await startCopy(this.#client, COPY_USERS, 'chunk');
  }

  async end() {
    await this.#endChunk();
    return this.#inserted;
  }

  abandon = () => {
    this.#copy?.abandon();
  };

  /** The COPY in progress abandoned and ended, before the transaction rolls back. */
  async close() {
    this.#copy?.abandon();
    await this.#copy?.finish();
  }

  async #endChunk() {
    const client = this.#client;
    this.#inserted += await allNewFirst(
      () => this.#copied(),
      () => this.#stagedChunk(),
      {
        tryNew: this.#copy !== undefined,
        undo: () => client.query('ROLLBACK TO SAVEPOINT chunk'),
      },
    );
    this.#chunk.clear();
  }

  async #copied() {
    const { rows, error } = await /** @type {CopyInto} */ (this.#copy).finish();
    this.#copy = undefined;
    if (error) throw error;
    await this.#client.query('RELEASE SAVEPOINT chunk');
    return rows;
  }

  async #stagedChunk() {
    const client = this.#client;
    const rows = await insertStaged(client, this.#chunk.bytes(), !this.#staged, this.#hashed);
    this.#staged = true;
    if (!this.#hashed) return rows;
    const leftOut = await runStatement(client, LEAVE_OUT_STAGED);
    this.#leftOut += leftOut;
    return rows - leftOut;
  }
}

/**
 * A chunk through the staging table, an email's first line, ON CONFLICT DO NOTHING.
 * @param {Lending} client @param {Buffer} csv @param {boolean} first @param {boolean} hashed
 */
async function insertStaged(client, csv, first, hashed) {
  await client.query(first ? CREATE_STREAM_STAGING : EMPTY_STREAM_STAGING);
  await copyAll(client, hashed ? COPY_STREAM_STAGING_HASHED : COPY_STREAM_STAGING, csv);
  const result = await longQuery(client, writeStatement(FIRST_OF_EACH, 'skip', 'counts'));
  return /** @type {{ inserted: number }} */ (result.rows[0]).inserted;
}

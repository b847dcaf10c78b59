import { ApiError } from '../errors.js';
import { allNewFirst } from './all-new-first.js';
import { CheckedBody } from './checked-body.js';
import { ChunkedCopy } from './chunked-copy.js';
import { longQuery, startCopy } from './copy-from.js';
import { QUARANTINE_KEEP_CHARS, keepQuarantinedSoFar } from './quarantine.js';
import { runStatement } from '../db/statement.js';
import { createErasureGuard, isErasedWrite } from './erasure-guard.js';
import { LEAVE_OUT_STAGED } from './erasure-sql.js';
import {
  COPY_STREAM_STAGING,
  COPY_STREAM_STAGING_HASHED,
  CREATE_STREAM_STAGING,
  INSERT_ALL_AS_SENT,
  MERGED_OF_EACH,
  writeStatement,
} from './user-sql.js';
import { STREAM_LIMITS } from './write-policy.js';
import { writeUnit } from './write-unit.js';

// A streamed import: a body of any size, parsed and checked record by record and sent on through
// COPY as it comes, all or nothing in the write unit's one transaction. Ignore mode copies into
// users a chunk at a time; merge mode stages the whole body, then writes it all-new first.

/** @import { Database, Hash, IdempotencyKey, KeyStore, Lending, Part } from './write-types.js' */
/** @import { Quarantine, Resolution, RowCounts, RowsStep, StreamFormat } from './write-types.js' */
/** @import { StreamKey, StreamTaken, WritePolicy, Written } from './write-types.js' */
/** @import { ErasureGuard } from './erasure-guard.js' */
/** @typedef {(row: import('./write-types.js').UserRow) => string} LineOf */

/** What a stream holds at once (buffers, a record, COPY's lead, a chunk), for admission control. */
export const STREAM_HOLD_BYTES = 1.5 * 1024 * 1024;
/** Rows a chunk of ignore mode holds until it is in users (chunked-copy.js holds its bytes). */
const CHUNK_ROWS = 7_500;

/**
 * `erasures`: what keeps erased emails out (erasure-guard.js): a process that has seen a tombstone
 * hashes each line's email and leaves out what a tombstone keeps out; one that has not asserts at
 * the end that none exists.
 * @param {{ db: Database, policy: WritePolicy, keys?: KeyStore, erasures?: ErasureGuard }} deps
 */
export function createStreamImport({ db, policy, keys, erasures = createErasureGuard() }) {
  /**
   * A failure of `texts` itself thrown as it came, any other as the policy answers a stream's.
   * @param {AsyncIterable<string>} texts @param {StreamFormat} format
   * @param {Resolution} resolution @param {{ key?: StreamKey, quarantine?: Quarantine }} [options]
   * @returns {Promise<Written | StreamTaken>}
   */
  return async function importUsers(texts, format, resolution, { key, quarantine } = {}) {
    const source = watchedSource(key ? hashed(texts, key.hash) : texts);
    /** @type {Part} */
    const part = { rows: [], received: 0, withRows: false, key: key && keyOf(key), quarantine };
    try {
      const { lineOf, assertion } = await erasures.forStream(db);
      const how = { format, resolution, lineOf, assertion };
      const rows = streamRows(source.texts, how, key?.hash);
      const [outcome] = await writeUnit(
        { db, keys },
        { parts: [part], rows, limits: STREAM_LIMITS },
      );
      if (!('taken' in outcome)) return outcome;
      for await (const _ of source.texts); // the rest of the body, for its fingerprint
      return { taken: outcome.taken, fingerprint: /** @type {StreamKey} */ (key).hash.digest() };
    } catch (err) {
      if (err instanceof ApiError || source.failedWith(err)) throw err;
      // Without the key no tombstone is read: sent again, it would fail the same way.
      if (isErasedWrite(err))
        throw new ApiError(
          erasures.keyed ? 'erasure_during_import' : 'erasure_key_missing',
          undefined,
          { cause: err },
        );
      const decision = await policy.afterFailure('stream', err);
      throw 'err' in decision ? decision.err : err;
    }
  };
}

/** Fingerprinted once the body is read. @param {StreamKey} key @returns {IdempotencyKey} */
const keyOf = ({ client, key, rendering }) => ({ client, key, rendering });

/** Each piece into the fingerprint. @param {AsyncIterable<string>} texts @param {Hash} hash */
async function* hashed(texts, hash) {
  for await (const text of texts) {
    hash.update(text);
    yield text;
  }
}

/**
 * Its import by mode (merge mode's staging table in BEGIN's round trip), then what an erasure keeps
 * out, what it asserts against erasures (in COMMIT's round trip), then the fingerprint. `lineOf`:
 * each line with its email's hash where a tombstone may name it; without, none is.
 * @param {AsyncIterable<string>} texts
 * @param {{ format: StreamFormat, resolution: Resolution, lineOf?: LineOf,
 *   assertion: string }} how
 * @param {Hash} [hash] @returns {RowsStep}
 */
function streamRows(texts, { format, resolution, lineOf, assertion }, hash) {
  const merge = resolution === 'merge';
  return {
    oneStatement: false,
    beginWith: merge ? CREATE_STREAM_STAGING : undefined,
    async write(client, [{ key, quarantine }]) {
      const body = new CheckedBody(texts, format, quarantine, lineOf);
      const counts = merge
        ? await importMerging(client, body)
        : await importIgnoring(client, body, quarantine);
      client.withCommit(`${assertion}; `);
      if (key && hash) key.fingerprint = hash.digest();
      return [counts];
    },
  };
}

/** Tells the reader's failures from the database's. @param {AsyncIterable<string>} texts */
function watchedSource(texts) {
  /** @type {{ err: unknown } | undefined} */
  let failure = undefined;
  return {
    texts: (async function* () {
      try {
        yield* texts;
      } catch (err) {
        failure = { err };
        throw err;
      }
    })(),
    /** @param {unknown} err */
    failedWith: (err) => failure !== undefined && failure.err === err,
  };
}

/**
 * @param {Lending} client @param {CheckedBody} body @param {Quarantine} [quarantine]
 * @returns {Promise<RowCounts>}
 */
async function importIgnoring(client, body, quarantine) {
  const chunks = await ChunkedCopy.begin(client, body.hashed);
  try {
    let chunkStart = 0;
    for await (const csv of body.pieces(chunks.abandon)) {
      await chunks.send(csv);
      if (body.received - chunkStart >= CHUNK_ROWS) {
        // Between two chunks no COPY runs: the items set aside so far are kept there, once many.
        const keep =
          quarantine && quarantine.heldChars >= QUARANTINE_KEEP_CHARS
            ? () => keepQuarantinedSoFar(client, quarantine)
            : undefined;
        await chunks.next(keep);
        chunkStart = body.received;
      }
    }
    await chunks.send(body.end());
    const inserted = await chunks.end();
    return { received: body.received, inserted, updated: 0, tombstoned: chunks.leftOut };
  } catch (err) {
    await chunks.close();
    throw err;
  }
}

/** @param {Lending} client @param {CheckedBody} body @returns {Promise<RowCounts>} */
async function importMerging(client, body) {
  const copy = await startCopy(
    client,
    body.hashed ? COPY_STREAM_STAGING_HASHED : COPY_STREAM_STAGING,
  );
  /** @param {string} csv */
  const send = async (csv) => {
    if (csv !== '') await copy.write(Buffer.from(csv));
  };
  try {
    for await (const csv of body.pieces(copy.abandon)) {
      await send(csv);
      const failure = copy.error();
      if (failure) throw failure;
    }
    await send(body.end());
    const { error } = await copy.finish();
    if (error) throw error;
  } catch (err) {
    // The COPY ended before the transaction rolls back.
    copy.abandon();
    await copy.finish();
    throw err;
  }
  const { inserted, updated } = await writeMerged(client);
  if (!body.hashed) return { received: body.received, inserted, updated };
  const tombstoned = await runStatement(client, LEAVE_OUT_STAGED);
  return { received: body.received, inserted: inserted - tombstoned, updated, tombstoned };
}

/** @param {Lending} client @returns {Promise<{ inserted: number, updated: number }>} */
function writeMerged(client) {
  const asNew = async () => {
    await client.query('SAVEPOINT all_new');
    const result = await longQuery(client, INSERT_ALL_AS_SENT);
    return { inserted: result.rowCount ?? 0, updated: 0 };
  };
  const merged = async () =>
    (await longQuery(client, writeStatement(MERGED_OF_EACH, 'merge', 'counts'))).rows[0];
  return allNewFirst(asNew, merged, { undo: () => client.query('ROLLBACK TO SAVEPOINT all_new') });
}

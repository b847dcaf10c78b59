import { timeoutOf } from '../db/database.js';
import { lastResult } from '../db/transaction-settings.js';
import { claimed, completeKeys, keyInFlight, scopedKey } from './idempotency-keys.js';
import { CREATED_AT, KEY_COLUMN, READ_FIELDS, UPDATED_AT, USER_COLUMNS } from '../user-columns.js';
import {
  DELETE_OLD_ANSWERS,
  DELETE_QUARANTINED,
  HOLD_WRITERS,
  KEYS_NAMING,
} from './erasure-sql.js';
import { REWRITE_OUTCOMES, deleteUsers, recordTombstones } from './erasure-sql.js';
import { RETURNED_AS_TEXT, timestampAsJson } from './user-sql.js';
import { tried } from './user-writer.js';

// An erasure: in one transaction, writers held off, a tombstone a person (their email's keyed hash
// and the erasure's time) and every copy of them deleted: their row, the items set aside that name
// them, and their rows in the answers stored under Idempotency-Keys (the answer kept, without them,
// counting them as erased). A failure is answered as a write's: the database's state a 503, tried
// again once when that may help (an erasure done twice erases nothing more).

/** @import { ErasureGuard } from './erasure-guard.js' */
/** @import { Database, IdempotencyKey, KeyStore, KeyTaken } from './write-types.js' */
/** @import { Lending, TimeLimits } from './write-types.js' */
/** @import { WritePolicy } from './write-types.js' */

/** One email to erase (lower-cased, valid) and when it was erased at its source, if said. */
/** @typedef {{ email: string, changedAt: string | null }} Erasure */
/**
 * @typedef {{ received: number, erased: number, absent: number,
 *   users: Record<string, string | null>[] }} Erased
 */

/** The columns a representation of an erased user shows, in READ_FIELDS' order: a write's. */
const SHOWN = [
  ...USER_COLUMNS.filter((c) => c.shown === true).map((c) => c.column),
  CREATED_AT.column,
  UPDATED_AT.column,
];
/** @type {ReadonlySet<string>} */
const TIMES = new Set([CREATED_AT.column, UPDATED_AT.column]);

/**
 * With an Idempotency-Key (`key`, its store `keys`): claimed in BEGIN's round trip, the counts
 * stored under it in COMMIT's; a key taken erases nothing, and says what it holds. `policy`: how
 * a failure is answered (without one, as it came).
 * @param {{ db: Database, erasures: ErasureGuard, keys?: KeyStore, policy?: WritePolicy }} deps
 * @param {{ items: Erasure[], key?: IdempotencyKey, limits?: TimeLimits }} request
 * @returns {Promise<Erased | KeyTaken>}
 */
export async function eraseUsers({ db, erasures, keys, policy }, { items, key, limits }) {
  const tombstones = {
    ...erasures.tombstonesOf(items.map((item) => item.email)),
    changes: items.map((item) => item.changedAt),
  };
  const emails = [...new Set(items.map((item) => item.email))];
  const erasure = { items, tombstones, emails };
  const attempt = () => eraseOnce(db, { erasure, key, keys, limits });
  return policy ? tried({ policy }, 'batch', attempt) : attempt();
}

/**
 * The erasure's one transaction, its key claimed first when it has one.
 * @param {Database} db
 * @param {{ erasure: Parameters<typeof eraseEveryCopy>[1], key?: IdempotencyKey,
 *   keys?: KeyStore, limits?: TimeLimits }} how
 * @returns {Promise<Erased | KeyTaken>}
 */
async function eraseOnce(db, { erasure, key, keys, limits }) {
  const claim = key && keys ? keys.claim([key]) : undefined;
  let begun = false;
  try {
    return await db.transaction(
      async (client, answers) => {
        begun = true;
        if (key && claim) {
          const found = (await claimed(client, answers, [key])).get(scopedKey(key));
          if (found !== 'claimed') return { taken: found ?? null };
        }
        await client.query(HOLD_WRITERS);
        const erased = await eraseEveryCopy(client, erasure);
        const { users, ...counts } = erased;
        if (key) client.withCommit(completeKeys([{ key, written: /** @type {any} */ (counts) }]));
        return erased;
      },
      { limits, then: claim },
    );
  } catch (err) {
    throw key && !begun && timeoutOf(err) === 'lock_timeout' ? keyInFlight(err) : err;
  }
}

/**
 * @param {Lending} client
 * @param {{ items: Erasure[], emails: string[],
 *   tombstones: Parameters<typeof recordTombstones>[0] }} erasure
 * @returns {Promise<Erased>}
 */
async function eraseEveryCopy(client, { items, tombstones, emails }) {
  await client.query(recordTombstones(tombstones));
  const deleted = await client.query({
    ...deleteUsers(SHOWN),
    ...RETURNED_AS_TEXT,
    values: [emails],
  });
  await client.query({ text: DELETE_QUARANTINED, values: [emails] });
  await client.query({ text: DELETE_OLD_ANSWERS, values: [emails] });
  await scrubOutcomes(client, emails);
  const users = lastResult(deleted).rows.map(userOf);
  const absent = emails.length - users.length;
  return { received: items.length, erased: users.length, absent, users };
}

/** @param {(string | null)[]} row */
function userOf(row) {
  /** @type {Record<string, string | null>} */
  const user = {};
  READ_FIELDS.forEach((field, i) => {
    const v = row[i];
    user[field] = v !== null && TIMES.has(SHOWN[i]) ? timestampAsJson(v) : v;
  });
  return user;
}

/**
 * Each stored outcome that shows one of the emails, without it: its rows out of the users written
 * and of the emails its representation is rendered in, `erased` counting them.
 * @param {Lending} client @param {readonly string[]} emails
 */
async function scrubOutcomes(client, emails) {
  const found = lastResult(await client.query({ text: KEYS_NAMING, values: [emails] })).rows;
  if (found.length === 0) return;
  const gone = new Set(emails);
  const keep = (/** @type {string} */ email) => !gone.has(email);
  const outcomes = found.map(({ outcome }) => {
    const { written, rendering } = outcome;
    const shown = /** @type {string[]} */ (rendering.emails);
    const erased = new Set(shown.filter((e) => !keep(e))).size;
    return JSON.stringify({
      written: {
        ...written,
        users: (written.users ?? []).filter((u) => keep(u[KEY_COLUMN.field])),
      },
      rendering: {
        ...rendering,
        emails: shown.filter(keep),
        erased: (rendering.erased ?? 0) + erased,
      },
    });
  });
  await client.query({
    text: REWRITE_OUTCOMES,
    values: [found.map((r) => r.client), found.map((r) => r.key), outcomes],
  });
}

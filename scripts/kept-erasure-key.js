// The erasure key `npm start` keeps when it runs the embedded PostgreSQL and none is configured: a
// file beside the data directory, made once and never printed, which the service reads through
// ERASURE_KEY_FILE and `npm run erase` finds the same way. Tombstones are keyed by it, so it lives
// as long as the data: a new key would no longer match the erasures made under the old one.
import { randomBytes } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Random bytes in a key made here: as many as the hash's (HMAC-SHA-256). */
const KEY_BYTES = 32;

/**
 * The file that holds the erasure key of the embedded PostgreSQL whose data is in `dataDir`.
 * @param {string} dataDir  absolute
 */
export const keptErasureKeyFile = (dataDir) => path.join(path.dirname(dataDir), 'erasure.key');

/**
 * Makes the key file unless it exists: 32 random bytes as 64 hex characters, readable by its owner
 * only. Written aside and linked into place, so that no reader ever sees half a key and two starts
 * at once keep the same one.
 * @param {string} file @returns {boolean}  whether it was made now
 */
export function keepErasureKey(file) {
  if (existsSync(file)) return false;
  mkdirSync(path.dirname(file), { recursive: true });
  const aside = `${file}.${process.pid}.new`;
  rmSync(aside, { force: true });
  writeFileSync(aside, randomBytes(KEY_BYTES).toString('hex'), { mode: 0o600, flag: 'wx' });
  try {
    linkSync(aside, file);
    return true;
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'EEXIST') return false;
    throw err;
  } finally {
    rmSync(aside, { force: true });
  }
}

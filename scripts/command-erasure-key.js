// The erasure key of a command that erases beside the service (`npm run erase`): ERASURE_KEY or
// ERASURE_KEY_FILE, read as the service reads them; on `npm start`'s embedded PostgreSQL without
// either, the key npm start keeps beside its data. It must be the service's own: a tombstone keyed
// by another would stop none of its writes.
import { existsSync } from 'node:fs';
import { ConfigError, loadEnv } from '@sluice/env';
import { SERVICE_VARIABLES, erasureKeyOf, erasureRules } from '../service/src/config.js';
import { embeddedDataDir, shownPath } from './embedded-database.js';
import { keptErasureKeyFile } from './kept-erasure-key.js';

/** What the key is read from, for a command's --help. */
export const ERASURE_KEY_VARIABLES = {
  ERASURE_KEY: SERVICE_VARIABLES.ERASURE_KEY,
  ERASURE_KEY_FILE: SERVICE_VARIABLES.ERASURE_KEY_FILE,
};

/**
 * The key's bytes, or a ConfigError saying why there is none.
 * @param {NodeJS.ProcessEnv} env
 * @param {{ embedded: boolean }} database  embedded: npm start's, found on EMBEDDED_PG_DIR
 * @returns {Buffer}
 */
export function commandErasureKey(env, { embedded }) {
  const v = loadEnv(ERASURE_KEY_VARIABLES, env, erasureRules);
  const given = erasureKeyOf({ erasureKey: v.ERASURE_KEY, erasureKeyFile: v.ERASURE_KEY_FILE });
  if (given) return given;
  const unset = 'is unset, as is ERASURE_KEY_FILE';
  if (!embedded)
    throw new ConfigError('ERASURE_KEY', `${unset}: give the key the service erases with`);
  const file = keptErasureKeyFile(embeddedDataDir(env));
  const kept = `the key npm start keeps, ${shownPath(file)},`;
  if (!existsSync(file))
    throw new ConfigError(
      'ERASURE_KEY',
      `${unset}, and ${kept} does not exist: npm start makes it when it starts the embedded ` +
        'PostgreSQL without them',
    );
  try {
    return /** @type {Buffer} */ (erasureKeyOf({ erasureKeyFile: file }));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    throw new ConfigError('ERASURE_KEY', `${unset}, and ${kept} ${err.problem}`);
  }
}

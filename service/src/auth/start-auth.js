import { startTokenSource } from './token-source.js';

/**
 * @typedef {object} Authentication
 * @property {import('./token-source.js').TokenSource | undefined} tokens  the static tokens, kept current
 * @property {((token: string) => Promise<string | undefined>) | undefined} verifyJwt
 * @property {() => void} close  stops refreshing the tokens
 */

/**
 * What http/authenticate.js checks credentials against, made once before the service serves: the
 * static tokens read (a file or a secret read for the first time, then refreshed) and the JWT
 * verifier with its key. A source that cannot be read rejects with a ConfigError naming it.
 * @param {import('../config.js').Auth} config
 * @param {{ logger: import('pino').Logger, secrets?: import('./token-source.js').SecretReader }} deps
 * @returns {Promise<Authentication>}
 */
export async function startAuthentication(config, { logger, secrets }) {
  const tokens = await startTokenSource(config, { logger, secrets });
  // jose (auth/jwt.js) is loaded only when a JWT is configured: about 26 ms of every start otherwise.
  const verifyJwt = config.jwt ? await (await import('./jwt.js')).createJwtVerifier(config.jwt) : undefined;
  return { tokens, verifyJwt, close: () => tokens?.close() };
}

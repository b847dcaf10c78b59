import { startTokenSource } from './token-source.js';

/**
 * @typedef {{ tokens: import('./token-source.js').TokenSource | undefined,
 *   verifyJwt: ((token: string) => Promise<import('./jwt.js').JwtIdentity>) | undefined,
 *   close: () => void }} Authentication
 */

/**
 * @param {import('../config.js').Auth} config
 * @param {{ logger: import('pino').Logger,
 *   secrets?: import('./token-source.js').SecretReader }} deps
 * @returns {Promise<Authentication>}
 */
export async function startAuthentication(config, { logger, secrets }) {
  const tokens = await startTokenSource(config, { logger, secrets });
  const verifyJwt = config.jwt
    ? await (await import('./jwt.js')).createJwtVerifier(config.jwt)
    : undefined;
  return { tokens, verifyJwt, close: () => tokens?.close() };
}

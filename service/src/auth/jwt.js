import { createRemoteJWKSet, errors, jwtVerify } from 'jose';
import { ANONYMOUS_ROLE, JWT_REFUSAL_REASONS, JwtRefusal } from './refusals.js';

// Verifies a JWT as PostgREST does: the signature (`none` never), `exp` and `nbf`, `aud` and `iss`
// when configured, a role claim that grants writing; the same claim grants erasing when its role is
// one of eraseRoles. A verified token is remembered a while, as PostgREST's JWT cache does: the
// price is that a key removed still admits its tokens that long.

/**
 * @typedef {{ secret: string | undefined, jwksUrl: string | undefined,
 *   audience: string | undefined, issuer: string | undefined, roleClaim: string,
 *   roles: string[] | undefined, eraseRoles?: string[], clientClaim: string,
 *   jwksTimeoutMs: number }} JwtConfig
 */
/**
 * Who a verified token is for: its client claim, and whether it may erase.
 * @typedef {{ client: string | undefined, mayErase: boolean }} JwtIdentity
 */

export const CLOCK_TOLERANCE_S = 5;
/** jose's cooldown: an unknown kid fetches the key set again only this much after a fetch. */
const JWKS_COOLDOWN_MS = 30_000;
const JWKS_MAX_AGE_MS = 10 * 60_000;
// An HMAC key taken from a public key set would let anyone sign.
const ASYMMETRIC = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];
/** How long a verified token is remembered at most (never past its exp). */
export const VERIFIED_CACHE_MS = 60_000;
const VERIFIED_CACHE_SIZE = 1000;
/** Characters of a client claim kept (a longer one names the client its first characters name). */
const MAX_CLIENT_CHARS = 256;
// C0, DEL and C1: none has a place in a name, and NUL cannot be stored.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/u;

export { JWT_REFUSAL_REASONS, JwtRefusal };

// A verifier against the secret or jose's remote key set (a fetch bounded by JWT_JWKS_TIMEOUT_MS),
// resolving with the client claim and the right to erase.
/** @param {JwtConfig} config @returns {Promise<(token: string) => Promise<JwtIdentity>>} */
export async function createJwtVerifier(config) {
  const key =
    config.secret !== undefined
      ? await crypto.subtle.importKey(
          'raw',
          new TextEncoder().encode(config.secret),
          { name: 'HMAC', hash: 'SHA-256' },
          false,
          ['verify'],
        )
      : createRemoteJWKSet(new URL(/** @type {string} */ (config.jwksUrl)), {
          timeoutDuration: config.jwksTimeoutMs,
          cooldownDuration: JWKS_COOLDOWN_MS,
          cacheMaxAge: JWKS_MAX_AGE_MS,
        });
  /** @type {import('jose').JWTVerifyOptions} */
  const options = {
    algorithms: config.secret !== undefined ? ['HS256'] : ASYMMETRIC,
    clockTolerance: CLOCK_TOLERANCE_S,
    ...(config.audience !== undefined ? { audience: config.audience } : {}),
    ...(config.issuer !== undefined ? { issuer: config.issuer } : {}),
  };
  const roles = config.roles === undefined ? undefined : new Set(config.roles);
  const eraseRoles = new Set(config.eraseRoles ?? []);

  /** @type {Map<string, { identity: JwtIdentity, until: number }>} */
  const verified = new Map();

  return async (token) => {
    const known = verified.get(token);
    if (known !== undefined) {
      if (Date.now() < known.until) return known.identity;
      verified.delete(token);
    }
    let payload;
    try {
      ({ payload } = await jwtVerify(token, /** @type {any} */ (key), options));
    } catch (err) {
      throw refusalOf(err, config.jwksUrl !== undefined);
    }
    const role = payload[config.roleClaim];
    const grants =
      typeof role === 'string' &&
      role !== '' &&
      (roles ? roles.has(role) : role !== ANONYMOUS_ROLE);
    if (!grants)
      throw new JwtRefusal(`the token's ${config.roleClaim} claim does not grant writing`, 'role');
    const identity = {
      client: clientOf(payload[config.clientClaim], config.clientClaim),
      mayErase: eraseRoles.has(role),
    };
    const now = Date.now();
    const expires =
      typeof payload.exp === 'number' ? payload.exp * 1000 + CLOCK_TOLERANCE_S * 1000 : Infinity;
    if (verified.size >= VERIFIED_CACHE_SIZE) verified.clear();
    verified.set(token, { identity, until: Math.min(now + VERIFIED_CACHE_MS, expires) });
    return identity;
  };
}

/**
 * The name goes into SQL text (the keys' scope) and the log: a control character (text holds no
 * NUL) or a lone surrogate (stored as another character, so the key read back would not be the key
 * claimed) refuses the token, naming the claim, never quoting it.
 * @param {unknown} claimed @param {string} claim
 */
function clientOf(claimed, claim) {
  if (typeof claimed !== 'string' || claimed === '') return undefined;
  let end = Math.min(claimed.length, MAX_CLIENT_CHARS);
  const last = claimed.charCodeAt(end - 1);
  if (end < claimed.length && last >= 0xd800 && last <= 0xdbff) end--;
  const client = claimed.slice(0, end);
  // String.prototype.isWellFormed, which TypeScript's ES2022 library does not declare.
  const wellFormed = /** @type {{ isWellFormed(): boolean }} */ (/** @type {unknown} */ (client));
  if (CONTROL.test(client) || !wellFormed.isWellFormed())
    throw new JwtRefusal(
      `the token's ${claim} claim is not a client name: ` +
        `it holds a control character or a lone surrogate`,
      'claim',
    );
  return client;
}

/**
 * By its class: jose's message may quote a claim's value.
 * @param {unknown} err @param {boolean} keySet
 */
function refusalOf(err, keySet) {
  if (err instanceof errors.JWTExpired) return new JwtRefusal('the token has expired', 'expired');
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf') return new JwtRefusal('the token is not valid yet', 'not_yet_valid');
    const missing = err.reason === 'missing';
    if (err.claim === 'aud')
      return new JwtRefusal(
        missing ? 'the token has no audience (aud)' : 'the token is for another audience',
        'audience',
      );
    if (err.claim === 'iss')
      return new JwtRefusal(
        missing ? 'the token has no issuer (iss)' : 'the token is from another issuer',
        'issuer',
      );
    return new JwtRefusal(`the token's ${err.claim} claim is not valid`, 'claim');
  }
  if (err instanceof errors.JWSSignatureVerificationFailed)
    return new JwtRefusal("the token's signature does not verify", 'signature');
  if (err instanceof errors.JOSEAlgNotAllowed)
    return new JwtRefusal("the token's algorithm is not accepted", 'algorithm');
  if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys)
    return new JwtRefusal('no key of the key set matches the token', 'unknown_key');
  if (err instanceof errors.JWKSTimeout)
    return new JwtRefusal(
      'the key set could not be fetched in time to verify the token',
      'jwks_unavailable',
    );
  if (
    err instanceof errors.JWSInvalid ||
    err instanceof errors.JWTInvalid ||
    err instanceof errors.JOSENotSupported
  )
    return new JwtRefusal('the token is not a valid JWT', 'malformed');
  // Anything else came from fetching the key set: refused, answered, not JSON, or not a key set.
  if (keySet)
    return new JwtRefusal(
      'the key set could not be fetched to verify the token',
      'jwks_unavailable',
    );
  return new JwtRefusal('the token is not a valid JWT', 'malformed');
}

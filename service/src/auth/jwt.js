import { createRemoteJWKSet, errors, jwtVerify } from 'jose';
import { JWT_REFUSAL_REASONS, JwtRefusal } from './refusals.js';

/**
 * @typedef {object} JwtConfig
 * @property {string | undefined} secret      JWT_SECRET: HS256
 * @property {string | undefined} jwksUrl     JWT_JWKS_URL: asymmetric keys, by kid
 * @property {string | undefined} audience    JWT_AUDIENCE: `aud` must hold it, when set
 * @property {string | undefined} issuer      JWT_ISSUER: `iss` must be it, when set
 * @property {string} roleClaim               JWT_ROLE_CLAIM: the claim that must grant writing
 * @property {string[] | undefined} roles     JWT_ROLES: the values that grant it (unset: any but anon)
 * @property {string} clientClaim             JWT_CLIENT_CLAIM: the client's name
 * @property {number} jwksTimeoutMs           JWT_JWKS_TIMEOUT_MS: one fetch of the key set, at most
 */

/** Clock skew allowed on exp and nbf, in seconds: small, so an expired token stays refused. */
export const CLOCK_TOLERANCE_S = 5;
/** After a fetch of the key set, an unknown kid fetches it again only this much later (jose's cooldown). */
const JWKS_COOLDOWN_MS = 30_000;
/** Keys are fetched again this often, whatever kid is asked for. */
const JWKS_MAX_AGE_MS = 10 * 60_000;
/** Asymmetric algorithms only for a key set: an HMAC key taken from a public JWKS would let anyone sign. */
const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/**
 * A verified token is remembered this long at most (never past its exp), as PostgREST's JWT cache
 * does: a client sends the same token with every request, and verifying it again (jose and
 * WebCrypto, about 35 µs) is a cost a request of one user would otherwise pay each time. The
 * price: a key removed from the key set still admits its tokens for this long.
 */
export const VERIFIED_CACHE_MS = 60_000;
/** Verified tokens remembered at most; when full, all are forgotten (only valid tokens ever enter). */
const VERIFIED_CACHE_SIZE = 1000;
/** Supabase's role of its public anon key: supabase-js sends it as the bearer when no user is signed in. */
const ANONYMOUS_ROLE = 'anon';

export { JWT_REFUSAL_REASONS, JwtRefusal };

/**
 * A JWT verifier, with what it verifies against built once: the HS256 secret imported as a key,
 * or jose's remote key set (keys cached, fetched again on an unknown kid after a cooldown, each
 * fetch bounded by JWT_JWKS_TIMEOUT_MS, so a key host that hangs costs a request that long and
 * no more). Resolves with the client's name (the client claim; undefined when the token has none).
 *
 * What PostgREST checks, sluice checks: the signature, `exp` and `nbf` (with CLOCK_TOLERANCE_S),
 * `aud` and `iss` when configured, and a role claim. `alg` is restricted to HS256 for a secret and
 * to asymmetric algorithms for a key set (`none` never).
 *
 * @param {JwtConfig} config
 * @returns {Promise<(token: string) => Promise<string | undefined>>}
 */
export async function createJwtVerifier(config) {
  const key = config.secret !== undefined
    ? await crypto.subtle.importKey('raw', new TextEncoder().encode(config.secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify'])
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

  /** @type {Map<string, { client: string | undefined, until: number }>} token → its client, while it may be trusted */
  const verified = new Map();

  return async (token) => {
    const known = verified.get(token);
    if (known !== undefined) {
      if (Date.now() < known.until) return known.client;
      verified.delete(token);
    }
    let payload;
    try {
      // One call shape for both keys (jose's overloads differ only in the key's type).
      ({ payload } = await jwtVerify(token, /** @type {any} */ (key), options));
    } catch (err) {
      throw refusalOf(err, config.jwksUrl !== undefined);
    }
    const role = payload[config.roleClaim];
    const grants = typeof role === 'string' && role !== '' && (roles ? roles.has(role) : role !== ANONYMOUS_ROLE);
    if (!grants) throw new JwtRefusal(`the token's ${config.roleClaim} claim does not grant writing`, 'role');
    const claimed = payload[config.clientClaim];
    const client = typeof claimed === 'string' && claimed !== '' ? claimed.slice(0, 256) : undefined;
    const now = Date.now();
    const expires = typeof payload.exp === 'number' ? payload.exp * 1000 + CLOCK_TOLERANCE_S * 1000 : Infinity;
    if (verified.size >= VERIFIED_CACHE_SIZE) verified.clear();
    verified.set(token, { client, until: Math.min(now + VERIFIED_CACHE_MS, expires) });
    return client;
  };
}

/**
 * jose's error as a refusal: its class tells why; its message is not passed on (it may quote a
 * claim's value).
 * @param {unknown} err @param {boolean} keySet  verifying against a remote key set
 */
function refusalOf(err, keySet) {
  if (err instanceof errors.JWTExpired) return new JwtRefusal('the token has expired', 'expired');
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf') return new JwtRefusal('the token is not valid yet', 'not_yet_valid');
    const missing = err.reason === 'missing';
    if (err.claim === 'aud') return new JwtRefusal(missing ? 'the token has no audience (aud)' : 'the token is for another audience', 'audience');
    if (err.claim === 'iss') return new JwtRefusal(missing ? 'the token has no issuer (iss)' : 'the token is from another issuer', 'issuer');
    return new JwtRefusal(`the token's ${err.claim} claim is not valid`, 'claim');
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return new JwtRefusal("the token's signature does not verify", 'signature');
  if (err instanceof errors.JOSEAlgNotAllowed) return new JwtRefusal("the token's algorithm is not accepted", 'algorithm');
  if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) return new JwtRefusal('no key of the key set matches the token', 'unknown_key');
  if (err instanceof errors.JWKSTimeout) return new JwtRefusal('the key set could not be fetched in time to verify the token', 'jwks_unavailable');
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid || err instanceof errors.JOSENotSupported) return new JwtRefusal('the token is not a valid JWT', 'malformed');
  // Anything else came from fetching the key set: refused, answered, not JSON, or not a key set.
  if (keySet) return new JwtRefusal('the key set could not be fetched to verify the token', 'jwks_unavailable');
  return new JwtRefusal('the token is not a valid JWT', 'malformed');
}

// Why credentials are refused; a leaf, so naming one loads no jose.
import { frozenWords } from '@sluice/env';

export const JWT_REFUSAL_REASONS = frozenWords([
  'expired',
  'not_yet_valid',
  'audience',
  'issuer',
  'claim',
  'signature',
  'algorithm',
  'unknown_key',
  'jwks_unavailable',
  'malformed',
  'role',
]);

/** Supabase's role of its public anon key, which supabase-js sends when no user is signed in. */
export const ANONYMOUS_ROLE = 'anon';

export const AUTH_REFUSAL_REASONS = frozenWords([
  'missing',
  'malformed',
  'unknown_token',
  ...JWT_REFUSAL_REASONS,
]);

/** A message quoting nothing of the token, and a fixed word for the metric. */
export class JwtRefusal extends Error {
  constructor(
    /** @type {string} */ message,
    /** @type {typeof JWT_REFUSAL_REASONS[number]} */ reason,
  ) {
    super(message);
    this.name = 'JwtRefusal';
    this.reason = reason;
  }
}

import { frozenWords } from '@sluice/env';
import { ApiError } from '../errors.js';
import { DEFAULT_MAX_INVALID, MAX_INVALID_LIMIT } from '../users/quarantine.js';

// The Prefer header (RFC 7240): PostgREST's words for writes, and sluice's `invalid=quarantine`.
// Others are ignored, unless `handling=strict` (then 400, as in PostgREST).

const RESOLUTIONS = Object.freeze({
  'ignore-duplicates': 'ignore',
  'merge-duplicates': 'merge',
});
const RETURNS = frozenWords(['minimal', 'headers-only', 'representation']);
// planned and estimated are guesses in PostgREST; a write knows its exact count for free.
const COUNTS = new Set(['exact', 'planned', 'estimated']);
const HANDLINGS = new Set(['lenient', 'strict']);

/**
 * return: none is sluice's counts; count: Content-Range; invalid: set invalid items aside, at most
 * maxInvalid of them; applied: Preference-Applied's value.
 * @typedef {{ resolution: import('../users/write-types.js').Resolution,
 *   return?: 'minimal' | 'headers-only' | 'representation', count: boolean,
 *   invalid?: { maxInvalid: number }, applied?: string }} Preferences
 */

/** @type {Readonly<Preferences>} */
const NONE = Object.freeze({ resolution: 'ignore', count: false });

/**
 * The `Prefer` headers: the first of a name counts; two resolutions that differ are refused.
 * @param {string | undefined} header @returns {Preferences}
 */
export function parsePreferences(header) {
  if (!header) return NONE;
  const { first, unknown, invalidParameters } = readPreferences(header);

  const resolutionValue = first.get('resolution');
  const resolution =
    resolutionValue === undefined ? NONE.resolution : resolutionOf(resolutionValue);
  const strict = first.get('handling') === 'strict';
  if (strict && unknown.length > 0) {
    throw new ApiError('unsupported_preference', 'Invalid preferences given with handling=strict', {
      details: `Invalid preferences: ${unknown.join(', ')}`,
    });
  }

  const invalidValue = first.get('invalid');
  const invalid =
    invalidValue === undefined ? undefined : invalidPreference(invalidValue, invalidParameters);

  const returnValue = first.get('return');
  const ret = RETURNS.find((r) => r === returnValue);
  const countValue = first.get('count');
  const count = countValue !== undefined && COUNTS.has(countValue);
  const applied = [
    resolutionValue === undefined ? '' : `resolution=${resolutionValue}`,
    ret === undefined ? '' : `return=${ret}`,
    count ? `count=${countValue}` : '',
    strict ? 'handling=strict' : '',
    invalid ? 'invalid=quarantine' : '',
  ]
    .filter(Boolean)
    .join(', ');
  return invalid
    ? { resolution, return: ret, count, invalid, applied }
    : { resolution, return: ret, count, applied: applied || undefined };
}

/** Each name's first value, those not honoured, `invalid`'s parameters. @param {string} header */
function readPreferences(header) {
  /** @type {Map<string, string>} */
  const first = new Map();
  /** @type {string[]} */
  const unknown = [];
  /** @type {string[]} */
  let invalidParameters = [];
  for (const preference of header.split(',')) {
    const [nameValue, ...parameters] = preference.split(';');
    const { name, value } = nameAndValue(nameValue);
    if (name === '') continue;
    if (first.has(name)) {
      if (name === 'resolution' && first.get(name) !== value) {
        throw new ApiError(
          'unsupported_preference',
          `Prefer: resolution is given twice with different values ` +
            `(${JSON.stringify(first.get(name)).slice(1, -1)}, ` +
            `${JSON.stringify(value).slice(1, -1)}); send one`,
        );
      }
      continue;
    }
    first.set(name, value);
    if (name === 'invalid') invalidParameters = parameters;
    if (!isHonoured(name, value)) unknown.push(preference.trim());
  }
  return { first, unknown, invalidParameters };
}

/** `name[=value]`, the name lowercased, the value unquoted. @param {string} text */
function nameAndValue(text) {
  const eq = text.indexOf('=');
  const name = (eq === -1 ? text : text.slice(0, eq)).trim().toLowerCase();
  const value =
    eq === -1
      ? ''
      : text
          .slice(eq + 1)
          .trim()
          .replace(/^"(.*)"$/, '$1');
  return { name, value };
}

/** @param {string} value @returns {import('../users/write-types.js').Resolution} */
function resolutionOf(value) {
  const resolved = Object.hasOwn(RESOLUTIONS, value)
    ? RESOLUTIONS[/** @type {keyof typeof RESOLUTIONS} */ (value)]
    : undefined;
  if (!resolved) {
    throw new ApiError(
      'unsupported_preference',
      `Prefer: resolution=${JSON.stringify(value).slice(1, -1)} is not ` +
        `supported; send resolution=merge-duplicates or resolution=ignore-duplicates`,
    );
  }
  return resolved;
}

/**
 * `invalid=quarantine[; max-invalid=N]`; another value or parameter is refused, so a typo never
 * turns into all or nothing.
 * @param {string} value @param {string[]} parameters @returns {{ maxInvalid: number }}
 */
function invalidPreference(value, parameters) {
  if (value !== 'quarantine') {
    throw new ApiError(
      'unsupported_preference',
      `Prefer: invalid=${JSON.stringify(value).slice(1, -1)} is not supported; send ` +
        `invalid=quarantine (optionally invalid=quarantine; max-invalid=N), or leave it out`,
    );
  }
  let maxInvalid = DEFAULT_MAX_INVALID;
  for (const parameter of parameters) {
    const { name, value: given } = nameAndValue(parameter);
    if (name === '') continue;
    if (
      name !== 'max-invalid' ||
      !/^[0-9]{1,6}$/.test(given) ||
      Number(given) > MAX_INVALID_LIMIT
    ) {
      throw new ApiError(
        'unsupported_preference',
        `Prefer: invalid=quarantine takes one parameter, max-invalid=N with ` +
          `N from 0 to ${MAX_INVALID_LIMIT} (default ${DEFAULT_MAX_INVALID}); ` +
          `got ${JSON.stringify(parameter.trim()).slice(1, -1)}`,
      );
    }
    maxInvalid = Number(given);
  }
  return { maxInvalid };
}

/** @param {string} name @param {string} value */
function isHonoured(name, value) {
  switch (name) {
    case 'resolution':
      return true; // a wrong value is refused whatever the handling
    case 'return':
      return RETURNS.some((r) => r === value);
    case 'count':
      return COUNTS.has(value);
    case 'handling':
      return HANDLINGS.has(value);
    case 'invalid':
      return true; // a wrong value is refused whatever the handling
    default:
      return false;
  }
}

/**
 * @param {string | undefined} header
 * @returns {{ resolution: import('../users/write-types.js').Resolution, applied?: string }}
 */
export function resolutionPreference(header) {
  const { resolution, applied } = parsePreferences(header);
  const resolutionApplied = applied?.split(', ').find((p) => p.startsWith('resolution='));
  return resolutionApplied ? { resolution, applied: resolutionApplied } : { resolution };
}

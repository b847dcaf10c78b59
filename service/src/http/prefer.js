import { frozenWords } from '@sluice/env';
import { ApiError } from '../errors.js';
import { DEFAULT_MAX_INVALID, MAX_INVALID_LIMIT } from '../users/quarantine.js';

// The Prefer header (RFC 7240) with PostgREST's words for writes: resolution, return, count,
// handling; and sluice's `invalid=quarantine` (its parameter `max-invalid=N`, the bound). Others
// are ignored, unless `handling=strict` (then 400, as in PostgREST).

/** The `resolution` preferences (PostgREST's names), by the Resolution they select. */
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
 * A request's `Prefer` headers (joined with ", "): `name[=value][;...]` by commas, names in any
 * case, the first of a name counts but two resolutions that differ are refused
 * (unsupported_preference).
 * @param {string | undefined} header @returns {Preferences}
 */
export function parsePreferences(header) {
  if (!header) return NONE;
  /** @type {Map<string, string>} */
  const first = new Map();
  /** @type {string[]} */
  const unknown = [];
  /** @type {string[]} */
  let invalidParameters = [];
  for (const preference of header.split(',')) {
    const [nameValue, ...parameters] = preference.split(';');
    const eq = nameValue.indexOf('=');
    const name = (eq === -1 ? nameValue : nameValue.slice(0, eq)).trim().toLowerCase();
    if (name === '') continue;
    const value =
      eq === -1
        ? ''
        : nameValue
            .slice(eq + 1)
            .trim()
            .replace(/^"(.*)"$/, '$1');
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

  const resolutionValue = first.get('resolution');
  let resolution = NONE.resolution;
  if (resolutionValue !== undefined) {
    const resolved = Object.hasOwn(RESOLUTIONS, resolutionValue)
      ? RESOLUTIONS[/** @type {keyof typeof RESOLUTIONS} */ (resolutionValue)]
      : undefined;
    if (!resolved) {
      throw new ApiError(
        'unsupported_preference',
        `Prefer: resolution=${JSON.stringify(resolutionValue).slice(1, -1)} is not ` +
          `supported; send resolution=merge-duplicates or resolution=ignore-duplicates`,
      );
    }
    resolution = resolved;
  }
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

/**
 * `invalid=quarantine`, with `max-invalid=N` (0 to MAX_INVALID_LIMIT) as its parameter; another
 * value or parameter is refused, so a typo never turns into all or nothing.
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
    const eq = parameter.indexOf('=');
    const name = (eq === -1 ? parameter : parameter.slice(0, eq)).trim().toLowerCase();
    if (name === '') continue;
    const given =
      eq === -1
        ? ''
        : parameter
            .slice(eq + 1)
            .trim()
            .replace(/^"(.*)"$/, '$1');
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
 * The `resolution` a request asks for.
 * @param {string | undefined} header
 * @returns {{ resolution: import('../users/write-types.js').Resolution, applied?: string }}
 */
export function resolutionPreference(header) {
  const { resolution, applied } = parsePreferences(header);
  const resolutionApplied = applied?.split(', ').find((p) => p.startsWith('resolution='));
  return resolutionApplied ? { resolution, applied: resolutionApplied } : { resolution };
}

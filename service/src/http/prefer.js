import { ApiError } from '../errors.js';

// The Prefer header (RFC 7240) with PostgREST's words for writes: resolution, return, count,
// handling. Others are ignored, unless `handling=strict` (then 400, as in PostgREST).

/** The `resolution` preferences (PostgREST's names), by the Resolution they select. */
const RESOLUTIONS = /** @type {const} */ ({ 'ignore-duplicates': 'ignore', 'merge-duplicates': 'merge' });
const RETURNS = new Set(['minimal', 'headers-only', 'representation']);
// planned and estimated are guesses in PostgREST; a write knows its exact count for free.
const COUNTS = new Set(['exact', 'planned', 'estimated']);
const HANDLINGS = new Set(['lenient', 'strict']);

/**
 * return: none is sluice's counts; count: Content-Range; applied: Preference-Applied's value.
 * @typedef {{ resolution: import('../users/user-schema.js').Resolution, return?: 'minimal' | 'headers-only' | 'representation', count: boolean, applied?: string }} Preferences
 */

/** @type {Readonly<Preferences>} */
const NONE = Object.freeze({ resolution: 'ignore', count: false });

/**
 * A request's `Prefer` headers (joined with ", "): `name[=value][;...]` by commas, names in any
 * case, the first of a name counts but two resolutions that differ are refused (unsupported_preference).
 * @param {string | undefined} header @returns {Preferences}
 */
export function parsePreferences(header) {
  if (!header) return NONE;
  const first = /** @type {Map<string, string>} */ (new Map());
  const unknown = /** @type {string[]} */ ([]);
  for (const preference of header.split(',')) {
    const [nameValue] = preference.split(';');
    const eq = nameValue.indexOf('=');
    const name = (eq === -1 ? nameValue : nameValue.slice(0, eq)).trim().toLowerCase();
    if (name === '') continue;
    const value = eq === -1 ? '' : nameValue.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1');
    if (first.has(name)) {
      if (name === 'resolution' && first.get(name) !== value) {
        throw new ApiError('unsupported_preference', `Prefer: resolution is given twice with different values (${JSON.stringify(first.get(name)).slice(1, -1)}, ${JSON.stringify(value).slice(1, -1)}); send one`);
      }
      continue;
    }
    first.set(name, value);
    if (!isHonoured(name, value)) unknown.push(preference.trim());
  }

  const resolutionValue = first.get('resolution');
  let resolution = NONE.resolution;
  if (resolutionValue !== undefined) {
    const resolved = Object.hasOwn(RESOLUTIONS, resolutionValue) ? RESOLUTIONS[/** @type {keyof typeof RESOLUTIONS} */ (resolutionValue)] : undefined;
    if (!resolved) {
      throw new ApiError('unsupported_preference', `Prefer: resolution=${JSON.stringify(resolutionValue).slice(1, -1)} is not supported; send resolution=merge-duplicates or resolution=ignore-duplicates`);
    }
    resolution = resolved;
  }
  const strict = first.get('handling') === 'strict';
  if (strict && unknown.length > 0) {
    throw new ApiError('unsupported_preference', 'Invalid preferences given with handling=strict', { details: `Invalid preferences: ${unknown.join(', ')}` });
  }

  const returnValue = first.get('return');
  const ret = returnValue !== undefined && RETURNS.has(returnValue) ? /** @type {Preferences['return']} */ (returnValue) : undefined;
  const countValue = first.get('count');
  const count = countValue !== undefined && COUNTS.has(countValue);
  const applied = [
    resolutionValue === undefined ? '' : `resolution=${resolutionValue}`,
    ret === undefined ? '' : `return=${ret}`,
    count ? `count=${countValue}` : '',
    strict ? 'handling=strict' : '',
  ].filter(Boolean).join(', ');
  return { resolution, return: ret, count, applied: applied || undefined };
}

/** @param {string} name @param {string} value */
function isHonoured(name, value) {
  switch (name) {
    case 'resolution': return true; // a wrong value is refused whatever the handling
    case 'return': return RETURNS.has(value);
    case 'count': return COUNTS.has(value);
    case 'handling': return HANDLINGS.has(value);
    default: return false;
  }
}

/** The `resolution` a request asks for. @param {string | undefined} header @returns {{ resolution: import('../users/user-schema.js').Resolution, applied?: string }} */
export function resolutionPreference(header) {
  const { resolution, applied } = parsePreferences(header);
  const resolutionApplied = applied?.split(', ').find((p) => p.startsWith('resolution='));
  return resolutionApplied ? { resolution, applied: resolutionApplied } : { resolution };
}

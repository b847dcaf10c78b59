import { ApiError } from '../errors.js';

/** The `resolution` preferences (PostgREST's names), by the Resolution they select. */
const RESOLUTIONS = /** @type {const} */ ({ 'ignore-duplicates': 'ignore', 'merge-duplicates': 'merge' });

/**
 * The `resolution` a request asks for in its `Prefer` header (RFC 7240): preferences are separated
 * by commas, each `name[=value]` with optional `;` parameters; names are case-insensitive; the
 * first of a name counts; preferences sluice does not know are ignored, as the RFC says.
 *
 * @param {string | undefined} header  every Prefer header of the request (Node joins them with ", ")
 * @returns {{ resolution: import('../users/user-schema.js').Resolution, applied?: string }}
 *   applied: the value for Preference-Applied, when a resolution was asked
 * @throws {ApiError} unsupported_preference, for another resolution value
 */
export function resolutionPreference(header) {
  if (!header) return { resolution: 'ignore' };
  for (const preference of header.split(',')) {
    const [nameValue] = preference.split(';');
    const eq = nameValue.indexOf('=');
    const name = (eq === -1 ? nameValue : nameValue.slice(0, eq)).trim().toLowerCase();
    if (name !== 'resolution') continue;
    const value = eq === -1 ? '' : nameValue.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1');
    const resolution = Object.hasOwn(RESOLUTIONS, value) ? RESOLUTIONS[/** @type {keyof typeof RESOLUTIONS} */ (value)] : undefined;
    if (!resolution) {
      throw new ApiError('unsupported_preference', `Prefer: resolution=${JSON.stringify(value).slice(1, -1)} is not supported; send resolution=merge-duplicates or resolution=ignore-duplicates`);
    }
    return { resolution, applied: `resolution=${value}` };
  }
  return { resolution: 'ignore' };
}

/**
 * Middleware: reads the resolution before the body is read, so an unsupported one costs nothing;
 * leaves it in res.locals (resolution, and preferenceApplied for the answer's Preference-Applied).
 * @returns {import('express').RequestHandler}
 */
export function readPreferences() {
  return (req, res, next) => {
    const header = req.headers.prefer;
    const { resolution, applied } = resolutionPreference(Array.isArray(header) ? header.join(', ') : header);
    res.locals.resolution = resolution;
    res.locals.preferenceApplied = applied;
    next();
  };
}

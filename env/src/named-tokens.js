// The one reading of named tokens: here because the service and the feeder both import this.

/** The access log, the span and the metric label carry it: short and plain. */
const CLIENT_NAME = /^[A-Za-z0-9][\w.:@-]{0,63}$/;

/**
 * Declared beside its token (the feeder ignores them). rate: users a second; burst: users at once
 * (default: one second's rate); weight: its share against the others waiting (default 1).
 * @typedef {{ rate?: number, burst?: number, weight?: number,
 *   maxInFlightBytes?: number }} ClientLimits
 */
/**
 * `erase`: its client may erase users (a right beyond writing, granted only so).
 * @typedef {{ name: string, token: string, limits?: ClientLimits, erase?: true }} NamedToken
 */

const LIMITS = Object.freeze({
  rate: { min: 0.001, max: 1e9, whole: false },
  burst: { min: 1, max: 1e9, whole: false },
  weight: { min: 0.001, max: 1000, whole: false },
  maxInFlightBytes: { min: 1024, max: 2 ** 40, whole: true },
});

/** The settings beside a token that are not limits. */
const RIGHTS = Object.freeze(['erase']);

/**
 * Its token, or an object of its token, its limits and its right to erase.
 * @param {string} name @param {unknown} value
 * @returns {{ token: unknown, limits?: ClientLimits, erase?: true }}
 */
function tokenAndSettings(name, value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { token: value };
  const { token, erase, ...rest } = /** @type {Record<string, unknown>} */ (value);
  if (erase !== undefined && typeof erase !== 'boolean')
    refuse(`gives the client ${JSON.stringify(name)} an erase that is not true or false`);
  const limits = limitsOf(name, rest);
  return {
    token,
    ...(limits ? { limits } : {}),
    ...(erase === true ? { erase } : {}),
  };
}

/**
 * @param {string} name @param {Record<string, unknown>} settings
 * @returns {ClientLimits | undefined}
 */
function limitsOf(name, settings) {
  /** @type {Record<string, number>} */
  const limits = {};
  for (const [key, limit] of Object.entries(settings)) {
    const bounds = LIMITS[/** @type {keyof typeof LIMITS} */ (key)];
    if (!bounds)
      refuse(
        `gives the client ${JSON.stringify(name)} a ` +
          `setting ${JSON.stringify(key.slice(0, 32))} that is ` +
          `not one: token, ${[...RIGHTS, ...Object.keys(LIMITS)].join(', ')}`,
      );
    if (
      typeof limit !== 'number' ||
      !(limit >= bounds.min && limit <= bounds.max) ||
      (bounds.whole && !Number.isInteger(limit))
    ) {
      refuse(
        `gives the client ${JSON.stringify(name)} a ${key} that is not ` +
          `a ${bounds.whole ? 'whole ' : ''}number from ${bounds.min} to ${bounds.max}`,
      );
    }
    limits[key] = limit;
  }
  if (limits.burst !== undefined && limits.rate === undefined)
    refuse(`gives the client ${JSON.stringify(name)} a burst without a rate: a burst is of a rate`);
  return Object.keys(limits).length === 0 ? undefined : limits;
}

/** @param {string} problem @returns {never} */
const refuse = (problem) => {
  throw new TypeError(problem);
};

/**
 * A JSON object of client name → token (or → { token, erase, ...limits }): a problem is a
 * TypeError that
 * quotes names only; one token for two clients is refused (the log could not tell them apart).
 * @param {string} text @returns {NamedToken[]}
 */
export function parseNamedTokens(text) {
  /** @type {unknown} */
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    // JSON.parse's own message may quote the text: a token.
    refuse('must be a JSON object of client name → token, and is not valid JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    refuse('must be a JSON object of client name → token');
  const entries = Object.entries(/** @type {Record<string, unknown>} */ (parsed));
  if (entries.length === 0) refuse('holds no client: give at least one name → token');
  /** @type {Map<string, string>} */
  const owners = new Map();
  return entries.map(([name, value], position) => {
    // Not quoted: a name and its token swapped by mistake would put the token in the message.
    if (!CLIENT_NAME.test(name))
      refuse(
        `has a client name (its entry ${position + 1}) that is not one: a name is ` +
          `1 to 64 letters, digits and _ . : @ -, starting with a letter or digit`,
      );
    const { token, ...settings } = tokenAndSettings(name, value);
    if (typeof token !== 'string' || token.length === 0)
      refuse(
        `gives the client ${JSON.stringify(name)} no token: each value ` +
          `is a non-empty string, or an object with one as its token`,
      );
    const owner = owners.get(token);
    if (owner !== undefined)
      refuse(
        `gives the clients ${JSON.stringify(owner)} and ${JSON.stringify(name)} the ` +
          `same token: each client needs its own`,
      );
    owners.set(token, name);
    return { name, token, ...settings };
  });
}

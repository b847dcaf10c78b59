// The contract's rules for one user (docs/contract.md, "A user object"), written apart from the
// validator, so that the fuzz property can say of every user the service accepted that it follows
// them, as sent and as stored (email lower-cased). Where the contract leaves room ("a plausible
// address") these hold what any reading of it must: they are looser than the validator, never
// stricter, so a user they pass may still be refused.

const FIELDS = ['email', 'name', 'phone', 'passwordHash', 'changedAt'];
const CONTROL = /\p{Cc}/u;
const WHITESPACE = /[\s\p{White_Space}]/u;
const PHONE = /^\+[0-9]{6,15}$/;
// `$id$`, then printable ASCII without quotes, backslash or space: nothing that could end a
// literal or a CSV field, or hide in a log.
const PASSWORD_HASH = /^\$[a-z0-9-]+\$[!#-&(-[\]-~]*$/;

/** @param {string} s */
const codePoints = (s) => Array.from(s).length;
/** @param {string} s */
const isWellFormed = (s) =>
  /** @type {{ isWellFormed(): boolean }} */ (/** @type {unknown} */ (s)).isWellFormed();

/**
 * A plausible address: one `@` with something before it, a dot inside the domain, no whitespace
 * and no control character; at most 254 characters.
 * @param {string} email
 */
function emailBreaches(email) {
  const [local, domain, ...more] = email.split('@');
  /** @type {string[]} */
  const found = [];
  if (more.length > 0 || domain === undefined) found.push('one @');
  else if (local === '' || !domain.slice(1, -1).includes('.')) found.push('local@domain.tld');
  if (WHITESPACE.test(email) || CONTROL.test(email))
    found.push('no whitespace or control character');
  if (codePoints(email) > 254) found.push('at most 254 characters');
  return found;
}

/**
 * RFC 3339's date-time with an offset, kept to the microsecond: a date and time that exist (read
 * back through a Date, which rolls a 30 February over into March), an offset within ±15:59.
 * @param {string} s
 */
function isChangedAt(s) {
  const m =
    /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.\d{1,6})?(?:Z|[+-](\d\d):(\d\d))$/.exec(s);
  if (!m) return false;
  const [year, month, day, hour, minute, second, offsetHours = 0, offsetMinutes = 0] = m
    .slice(1)
    .map((v) => Number(v ?? 0));
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second);
  const same =
    d.getUTCFullYear() === year &&
    d.getUTCMonth() === month - 1 &&
    d.getUTCDate() === day &&
    d.getUTCHours() === hour &&
    d.getUTCMinutes() === minute &&
    d.getUTCSeconds() === second;
  // RFC 3339 allows offsets to ±23:59; the contract only what PostgreSQL stores, ±15:59.
  return same && year >= 1 && offsetHours <= 15 && offsetMinutes <= 59;
}

/** @typedef {{ field: string | null, rule: string }} Breach  field null: the item itself */

/**
 * What in `item` breaks the contract, by field; [] when nothing does.
 * @param {unknown} item
 * @returns {Breach[]}
 */
export function contractBreaches(item) {
  if (item === null || typeof item !== 'object' || Array.isArray(item))
    return [{ field: null, rule: 'a user object' }];
  const u = /** @type {Record<string, unknown>} */ (item);
  /** @type {Breach[]} */
  const found = Object.keys(u)
    .filter((k) => !FIELDS.includes(k))
    .map((k) => ({ field: k, rule: 'no such field' }));
  for (const [field, value] of Object.entries(u)) {
    if (typeof value === 'string' && !isWellFormed(value))
      found.push({ field, rule: 'no lone surrogate' });
  }
  const { email, name, phone, passwordHash } = u;
  if (typeof email !== 'string') found.push({ field: 'email', rule: 'a string' });
  else
    for (const rule of new Set([...emailBreaches(email), ...emailBreaches(email.toLowerCase())]))
      found.push({ field: 'email', rule });
  if (typeof name !== 'string') found.push({ field: 'name', rule: 'a string' });
  else {
    if (codePoints(name) < 1 || codePoints(name) > 200)
      found.push({ field: 'name', rule: '1 to 200 characters' });
    if (CONTROL.test(name)) found.push({ field: 'name', rule: 'no control character' });
  }
  if (phone !== undefined && (typeof phone !== 'string' || !PHONE.test(phone)))
    found.push({ field: 'phone', rule: '+ and 6 to 15 digits' });
  if (
    passwordHash !== undefined &&
    (typeof passwordHash !== 'string' ||
      passwordHash.length > 255 ||
      !PASSWORD_HASH.test(passwordHash))
  ) {
    found.push({
      field: 'passwordHash',
      rule: '$id$ then printable ASCII without quotes, backslash or space, at most 255 characters',
    });
  }
  if (u.changedAt !== undefined && (typeof u.changedAt !== 'string' || !isChangedAt(u.changedAt))) {
    found.push({
      field: 'changedAt',
      rule: 'RFC 3339 with an offset, to the microsecond, a date and time that exist',
    });
  }
  return found;
}

// Users for the fuzz property (stored-as-sent.js): generated over the whole of Unicode for every
// field, biased towards what has broken stores before (NUL and every control character, lone and
// paired surrogates, SQL, array, CSV and format syntax, very long strings counted in characters and
// in UTF-8 bytes, non-ASCII digits, characters whose case mapping changes their length, invisible
// and bidi characters, noncharacters), and users built to pass, with random Unicode mixed in, so
// that the accept path is exercised as much as the refusals.
//
// A generated user says which of its fields are "plausible": made to follow the contract. A request
// whose users are all plausible must be accepted, and no plausible user may be blamed in a 400; of
// the others the property asks only that they are refused properly or stored exactly.
import fc from 'fast-check';

/**
 * @typedef {object} FuzzRequest
 * @property {'ignore' | 'merge'} resolution
 * @property {unknown[]} items  the JSON array sent
 * @property {boolean[]} plausible  by item: made to follow the contract
 * @property {'accept' | 'refuse'} [expect]  a regression's known answer (else: accept when every item is plausible)
 */
/** @typedef {FuzzRequest[][]} FuzzCase  phases, in order; the requests of a phase are sent together and share no email */

/** @typedef {{ v: unknown, ok: boolean }} Field  v undefined: the field is left out; ok: it follows the contract */
/** @typedef {'same' | 'upper' | 'lower' | 'title'} Recase */
/**
 * @typedef {{ email: Field, name: Field, phone: Field, passwordHash: Field, changedAt: Field, oddity: Oddity | null } | { notAUser: unknown }} GeneratedUser
 * @typedef {{ drop: 'email' | 'name' } | { add: [string, unknown] }} Oddity
 */

// ---- characters ----------------------------------------------------------------------------

/** @param {number} from @param {number} to */
const range = (from, to) =>
  Array.from({ length: to - from + 1 }, (_, i) => String.fromCodePoint(from + i));

const CONTROLS = [...range(0x00, 0x1f), '\u007f', ...range(0x80, 0x9f)];
const SYNTAX = [...'\'"\\$%{},@. +-_()[]:;*?`|&#!~^=<>/'];
// Whole words that mean something to one layer or another: SQL, pg-format, array_in, COPY, JSON.
const WORDS = [
  'NULL',
  'null',
  "''",
  '\\N',
  '\\.',
  '%s',
  '%L',
  '%I',
  '%%',
  '$1',
  '$$',
  "E'",
  '{}',
  '","',
  '\\"',
  '--',
  '/*',
  ');',
  'u&',
  '\\u0000',
  '""',
];
const NON_ASCII_DIGITS = [
  ...range(0x660, 0x669),
  ...range(0x6f0, 0x6f9),
  ...range(0x966, 0x96f),
  ...range(0xff10, 0xff19),
  '¹',
  '²',
  '³',
  '𝟎',
  '𝟗',
  '߀',
  '٫',
];
// Letters whose case mapping changes their length (İ lower-cases to i + U+0307; ß, ŉ, ǰ, ΐ and the
// ligatures upper-case to two or three), depends on context (final sigma), or crosses scripts.
const CASE_CHANGERS = [
  'İ',
  'ẞ',
  'ß',
  'Σ',
  'σ',
  'ς',
  'ﬀ',
  'ﬁ',
  'ﬃ',
  'ﬆ',
  'ŉ',
  'ǰ',
  'ΐ',
  'ᾼ',
  'ǅ',
  'ı',
  'ſ',
  '\u212a',
  '\u212b',
  '\u2126',
  'Ⅻ',
  'Ⓐ',
  '𐐀',
  'I',
  'i',
];
const INVISIBLE = [
  '\u200b',
  '\u200c',
  '\u200d',
  '\u200e',
  '\u200f',
  ...range(0x202a, 0x202e),
  '\u2060',
  ...range(0x2066, 0x2069),
  '\u061c',
  '\u00ad',
  '\u034f',
  '\u180e',
  '\ufeff',
];
const ODD = [
  '\ufffe',
  '\uffff',
  '\ufffd',
  '\ufdd0',
  '\u{1fffe}',
  '\u{10ffff}',
  '\u{e0001}',
  '\u2028',
  '\u2029',
  '\u00a0',
  '\u3000',
  '\u1680',
  '\u2000',
  '\u205f',
  '😀',
  '👩‍👩‍👧‍👦',
  'e\u0301',
  '\u0301',
];

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((u) => String.fromCharCode(u));
const surrogatePair = fc
  .integer({ min: 0x10000, max: 0x10ffff })
  .map((cp) => String.fromCodePoint(cp));
// Surrogate code points come out as lone UTF-16 units.
const anyCodePoint = fc
  .integer({ min: 0, max: 0x10ffff })
  .map((cp) => (cp >= 0xd800 && cp <= 0xdfff ? String.fromCharCode(cp) : String.fromCodePoint(cp)));
const asciiPrintable = fc.integer({ min: 0x20, max: 0x7e }).map((cp) => String.fromCharCode(cp));

/** A character (or a short word), anything at all, the interesting ones often. */
const hostileChar = fc.oneof(
  fc.constantFrom(...CONTROLS),
  fc.constantFrom(...SYNTAX),
  fc.constantFrom(...WORDS),
  fc.constantFrom(...NON_ASCII_DIGITS),
  fc.constantFrom(...CASE_CHANGERS),
  fc.constantFrom(...INVISIBLE),
  fc.constantFrom(...ODD),
  loneSurrogate,
  surrogatePair,
  anyCodePoint,
  asciiPrintable,
);

/**
 * One flaw to put into a value that is otherwise fine, weighted towards what a store cannot keep
 * (a lone surrogate, NUL) or a statement could mistake (controls, quotes, backslashes).
 */
const flaw = fc.oneof(
  { weight: 4, arbitrary: loneSurrogate },
  { weight: 2, arbitrary: fc.constant('\u0000') },
  { weight: 3, arbitrary: fc.constantFrom(...CONTROLS) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      ' ',
      '\t',
      '\u00a0',
      '\u2028',
      '\u2029',
      '\u3000',
      '\ufeff',
      '\u1680',
      '\u0085',
    ),
  },
  { weight: 2, arbitrary: fc.constantFrom(...SYNTAX) },
  { weight: 1, arbitrary: fc.constantFrom(...WORDS) },
  { weight: 2, arbitrary: fc.constantFrom(...NON_ASCII_DIGITS) },
  { weight: 2, arbitrary: fc.constantFrom(...CASE_CHANGERS) },
  { weight: 1, arbitrary: fc.constantFrom(...INVISIBLE) },
  { weight: 1, arbitrary: fc.constantFrom(...ODD) },
  { weight: 1, arbitrary: anyCodePoint },
);

const CONTROL = /\p{Cc}/u; // U+0000 to U+001F and U+007F to U+009F
/** @param {string} s */
const isWellFormed = (s) =>
  /** @type {{ isWellFormed(): boolean }} */ (/** @type {unknown} */ (s)).isWellFormed();
const letter = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789');
/** What a name may hold: anything but a control character or a lone surrogate; letters often. */
const nameChar = fc.oneof(
  { weight: 2, arbitrary: letter },
  { weight: 3, arbitrary: hostileChar.filter((c) => isWellFormed(c) && !CONTROL.test(c)) },
);
/** What an email's parts may hold: the same, without `@` and whitespace. */
const emailChar = nameChar.filter((c) => !/[\s@]/u.test(c));

// ---- strings -------------------------------------------------------------------------------

/** @param {string} s */
const codePoints = (s) => Array.from(s).length;

/**
 * Exactly `n` code points, `seed`'s over and over.
 * @param {number} n @param {string} seed  not empty
 */
function exactly(n, seed) {
  const cps = Array.from(seed);
  let out = '';
  for (let i = 0; i < n; i++) out += cps[i % cps.length];
  return out;
}

/**
 * `s` with `c` put in at a position (a fraction of its length, so it shrinks well).
 * @param {fc.Arbitrary<string>} s @param {fc.Arbitrary<string>} c
 */
const withInserted = (s, c) =>
  fc.tuple(s, c, fc.double({ min: 0, max: 1, noNaN: true })).map(([v, ch, at]) => {
    const cps = Array.from(v);
    cps.splice(Math.floor(at * cps.length), 0, ch);
    return cps.join('');
  });

/** @param {fc.Arbitrary<string>} unit @param {number} [maxLength] */
const stringOf = (unit, maxLength = 24) => fc.string({ unit, minLength: 1, maxLength });
/** Long strings: from the limits up to tens of thousands of characters. */
const hugeLength = fc.oneof(
  fc.integer({ min: 256, max: 2000 }),
  fc.integer({ min: 2000, max: 30_000 }),
);
/** A seed for long strings: one-, two-, three- and four-byte characters in UTF-8. */
const longSeed = fc.oneof(
  fc.constantFrom('a', 'é', '€', '😀', '𝔘', 'aé€😀', 'İ'),
  stringOf(nameChar, 6),
);

/** Anything that is not a string, where a string is wanted. */
const notAString = fc.oneof(
  fc.constantFrom(null, 0, 1e21, -1, true, false, [], {}, ['a@b.c']),
  fc.jsonValue({ maxDepth: 2 }).filter((v) => typeof v !== 'string'),
);
/** Any string at all. */
const hostileString = fc.oneof(
  fc.string({ unit: hostileChar, maxLength: 24 }),
  fc.string({ unit: 'binary', maxLength: 24 }),
);

/**
 * A field: a plausible value (follows the contract) most of the time, else a hostile one.
 * @param {fc.Arbitrary<unknown>} plausible @param {fc.Arbitrary<unknown>} hostile @param {number} hostileWeight  of 20
 * @returns {fc.Arbitrary<Field>}
 */
const field = (plausible, hostile, hostileWeight) => {
  const made = plausible.map((v) => /** @type {Field} */ ({ v, ok: true }));
  return hostileWeight === 0
    ? made
    : fc.oneof(
        { weight: 20 - hostileWeight, arbitrary: made },
        { weight: hostileWeight, arbitrary: hostile.map((v) => ({ v, ok: false })) },
      );
};
/**
 * An optional field: left out a third of the time.
 * @param {fc.Arbitrary<unknown>} plausible @param {fc.Arbitrary<unknown>} hostile @param {number} hostileWeight
 */
const optionalField = (plausible, hostile, hostileWeight) =>
  fc.oneof(
    { weight: 1, arbitrary: fc.constant(/** @type {Field} */ ({ v: undefined, ok: true })) },
    { weight: 2, arbitrary: field(plausible, hostile, hostileWeight) },
  );

// ---- email ---------------------------------------------------------------------------------

const MAX_EMAIL = 254;
/** An email whose lower-cased form (what is stored) still fits: otherwise it is no plausible one. @param {string} e */
const fitsLowerCased = (e) =>
  codePoints(e.toLowerCase()) <= MAX_EMAIL && codePoints(e) <= MAX_EMAIL;

const emailParts = fc.tuple(
  stringOf(emailChar, 24),
  stringOf(emailChar, 12),
  stringOf(emailChar, 6),
);
/**
 * An email of exactly `n` code points: the local part stretched.
 * @param {fc.Arbitrary<number>} n
 */
const emailOfLength = (n) =>
  fc
    .tuple(n, emailParts)
    .map(
      ([length, [local, domain, tld]]) =>
        `${exactly(Math.max(1, length - codePoints(domain) - codePoints(tld) - 2), local)}@${domain}.${tld}`,
    );

const plausibleEmail = fc
  .oneof(
    { weight: 6, arbitrary: emailParts.map(([local, domain, tld]) => `${local}@${domain}.${tld}`) },
    { weight: 1, arbitrary: emailOfLength(fc.integer({ min: 240, max: MAX_EMAIL })) },
  )
  .filter(fitsLowerCased);

const hostileEmail = fc.oneof(
  // Most often one flaw in a value that is otherwise fine, so that the flaw alone decides.
  { weight: 8, arbitrary: withInserted(plausibleEmail, flaw) },
  hostileString,
  // Over the limit as sent, or only once lower-cased (each İ becomes two code points).
  { weight: 2, arbitrary: emailOfLength(fc.integer({ min: MAX_EMAIL + 1, max: MAX_EMAIL + 3 })) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 6 }), emailParts)
      .map(
        ([k, [, domain, tld]]) =>
          `${'İ'.repeat(k)}${exactly(MAX_EMAIL - k - codePoints(domain) - codePoints(tld) - 2, 'a')}@${domain}.${tld}`,
      ),
  },
  fc.tuple(hugeLength, longSeed).map(([n, seed]) => `${exactly(n, seed)}@example.com`),
  // Long, and wrong only at its end: a pattern that backtracks takes time quadratic in the length.
  fc
    .tuple(
      fc.integer({ min: 1_000, max: 100_000 }),
      fc.constantFrom('.', 'a.', '.a', 'a', 'İ.'),
      fc.constantFrom(' ', '\u0000', '@', '\u0085', '\ud800', '.', ''),
    )
    .map(([n, seed, end]) => `a@${exactly(n, seed)}${end}`),
  fc.constantFrom(
    '',
    '@',
    'a@',
    '@b.c',
    'a@b',
    'a@b.',
    'a@.c',
    'a@@b.c',
    'a b@c.d',
    'a@b.c ',
    ' a@b.c',
    'a@b.c\n',
    'a\u0000@b.c',
    'NULL',
    "'@'.'",
    'a@b.c\u2028',
    'a\u0085b@c.d',
    'İ@İ.İ',
  ),
  notAString,
);

// ---- name ----------------------------------------------------------------------------------

const MAX_NAME = 200;
const plausibleName = fc.oneof(
  {
    weight: 6,
    arbitrary: stringOf(nameChar, 32).map((s) => Array.from(s).slice(0, MAX_NAME).join('')),
  },
  // At the limit: 200 characters, up to 800 bytes in UTF-8.
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(1, MAX_NAME - 1, MAX_NAME), longSeed)
      .map(([n, seed]) => exactly(n, seed)),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'NULL',
      ' ',
      "O'Brien",
      'a\\b',
      '\\N',
      '\\.',
      '"',
      '{a,b}',
      '%s %L',
      '$1',
      'İstanbul',
      'STRASSE ẞ',
      'ΟΔΥΣΣΕΥΣ',
      '\u2028',
    ),
  },
);
const hostileName = fc.oneof(
  // Most often one flaw in a value that is otherwise fine, so that the flaw alone decides.
  { weight: 8, arbitrary: withInserted(plausibleName, flaw) },
  hostileString,
  fc
    .tuple(fc.constantFrom(MAX_NAME + 1, MAX_NAME + 2), longSeed)
    .map(([n, seed]) => exactly(n, seed)),
  fc.tuple(hugeLength, longSeed).map(([n, seed]) => exactly(n, seed)),
  fc.constantFrom(
    '',
    '\u0000',
    'a\u0000b',
    '\n',
    'tab\there',
    '\u007f',
    '\u0085',
    '\ud800',
    '\udfff\ud800',
  ),
  notAString,
);

// ---- phone ---------------------------------------------------------------------------------

const digits = (/** @type {number} */ min, /** @type {number} */ max) =>
  fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: min, maxLength: max });
const plausiblePhone = digits(6, 15).map((d) => `+${d}`);
const hostilePhone = fc.oneof(
  // Most often one flaw in a value that is otherwise fine, so that the flaw alone decides.
  { weight: 8, arbitrary: withInserted(plausiblePhone, flaw) },
  // A digit in another script: \d and [[:digit:]] may take it, the contract does not.
  fc
    .tuple(
      plausiblePhone,
      fc.constantFrom(...NON_ASCII_DIGITS),
      fc.double({ min: 0, max: 1, noNaN: true }),
    )
    .map(([p, d, at]) => {
      const i = 1 + Math.floor(at * (p.length - 1));
      return p.slice(0, i) + d + p.slice(i + 1);
    }),
  digits(0, 5).map((d) => `+${d}`),
  digits(16, 40).map((d) => `+${d}`),
  digits(6, 15),
  fc.constantFrom(
    '+',
    '＋1234567',
    '+1234567\n',
    ' +1234567',
    '+1234567 ',
    '+123 4567',
    '+1234567\u0000',
    '00441234567',
    '+0x123456',
    '+1e10000',
    'NULL',
    '',
  ),
  hostileString,
  notAString,
);

// ---- passwordHash --------------------------------------------------------------------------

const MAX_HASH = 255;
const hashId = fc.string({
  unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789-'),
  minLength: 1,
  maxLength: 12,
});
const hashBody = (/** @type {number} */ max) =>
  fc.string({
    unit: fc.constantFrom(
      ...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789./+=,$-',
    ),
    maxLength: max,
  });
const plausibleHash = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(hashId, hashBody(90)).map(([id, body]) => `$${id}$${body}`) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(hashId, hashBody(8))
      .map(([id, body]) => `$${id}$${exactly(MAX_HASH - id.length - 2, body || 'x')}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG',
      '$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW',
      '$6$rounds=5000$salt$hash',
      '$y$j9T$F5Jx$abc',
      '$1$$',
    ),
  },
);
const hostileHash = fc.oneof(
  // Most often one flaw in a value that is otherwise fine, so that the flaw alone decides.
  { weight: 8, arbitrary: withInserted(plausibleHash, flaw) },
  fc
    .tuple(hashId, hashBody(8))
    .map(([id, body]) => `$${id}$${exactly(MAX_HASH - id.length - 1, body || 'x')}`),
  fc.tuple(hugeLength, longSeed).map(([n, seed]) => `$x$${exactly(n, seed)}`),
  fc.constantFrom(
    '',
    '$',
    '$$x',
    'argon2id$x',
    '$ARGON2$x',
    "$2b$12$'; DROP TABLE users;--",
    '$2b$\\',
    '$2b$12$a\u0000b',
    '$x$%s',
    '$x$é',
  ),
  hostileString,
  notAString,
);

// ---- changedAt -----------------------------------------------------------------------------

// A few instants, so that generated changes of one email are often older, newer or the same instant
// (merge mode's ordering), each written in one of several offsets and with as many fractional
// digits as it needs or more (up to 6): the same instant spelt differently is one change.
const OFFSETS = [
  ['Z', 0],
  ['+00:00', 0],
  ['+01:00', 60],
  ['-05:30', -330],
  ['+14:00', 840],
  ['-15:59', -959],
];
const INSTANTS = [
  [Date.parse('2026-11-26T10:00:00Z'), 0],
  [Date.parse('2026-11-26T10:00:00Z'), 1],
  [Date.parse('2026-11-26T10:00:00.5Z'), 0],
  [Date.parse('2026-11-26T10:00:01Z'), 999],
  [Date.parse('2024-02-29T23:59:59.999Z'), 999],
  [Date.parse('2000-01-01T00:00:00Z'), 0],
];
/**
 * An instant (milliseconds, and microseconds beyond them) as RFC 3339 in an offset.
 * @param {number} ms @param {number} micros @param {string} offset @param {number} offsetMinutes @param {number} extraDigits
 */
function rfc3339(ms, micros, offset, offsetMinutes, extraDigits) {
  const local = new Date(ms + offsetMinutes * 60_000).toISOString();
  let fraction = `${local.slice(20, 23)}${String(micros).padStart(3, '0')}`.replace(/0+$/, '');
  fraction = fraction.padEnd(Math.min(6, fraction.length + extraDigits), '0');
  return `${local.slice(0, 19)}${fraction ? `.${fraction}` : ''}${offset}`;
}
const plausibleChangedAt = fc
  .tuple(fc.constantFrom(...INSTANTS), fc.constantFrom(...OFFSETS), fc.nat({ max: 6 }))
  .map(([[ms, micros], [offset, minutes], extra]) =>
    rfc3339(ms, micros, /** @type {string} */ (offset), /** @type {number} */ (minutes), extra),
  );
const hostileChangedAt = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      '2025-02-29T00:00:00Z',
      '2100-02-29T00:00:00Z',
      '2026-04-31T00:00:00Z',
      '2026-11-26T24:00:00Z',
      '2026-11-26T10:60:00Z',
      '2016-12-31T23:59:60Z',
      '2026-11-26T10:00:00',
      '2026-11-26T10:00:00.1234567Z',
      '2026-11-26T10:00:00.Z',
      '2026-11-26 10:00:00Z',
      '2026-11-26t10:00:00z',
      '2026-13-01T00:00:00Z',
      '2026-00-10T00:00:00Z',
      '2026-11-00T00:00:00Z',
      '2026-11-26T10:00:00+24:00',
      '2026-11-26T10:00:00-23:59',
      '2026-11-26T10:00:00+16:00',
      '2026-11-26T10:00:00+01:60',
      '2026-11-26T10:00:00+0100',
      '0000-01-01T00:00:00Z',
      '+02026-11-26T10:00:00Z',
      '2026-11-26',
      '10:00:00Z',
      '2026-11-26T10:00Z',
      'now',
      'infinity',
      '',
      '2026-11-26T10:00:00Z\n',
      ' 2026-11-26T10:00:00Z',
    ),
  },
  { weight: 2, arbitrary: withInserted(plausibleChangedAt, flaw) },
  fc.integer(),
  hostileString,
  notAString,
);

// ---- users, requests, cases ----------------------------------------------------------------

const oddity = fc.oneof(
  fc.constant(/** @type {Oddity} */ ({ drop: 'email' })),
  fc.constant(/** @type {Oddity} */ ({ drop: 'name' })),
  fc
    .tuple(
      fc.oneof(
        fc.constantFrom(
          'password',
          'Email',
          'phone_number',
          'password_hash',
          '__proto__',
          'constructor',
          '',
        ),
        hostileString,
      ),
      fc.jsonValue({ maxDepth: 1 }),
    )
    .map(([k, v]) => /** @type {Oddity} */ ({ add: [k, v] })),
);

/**
 * A user: each field hostile `hostileWeight` times in 20, now and then a field missing or one too
 * many, and once in a while no user object at all.
 * @param {number} hostileWeight
 * @returns {fc.Arbitrary<GeneratedUser>}
 */
const userArbitrary = (hostileWeight) =>
  fc.oneof(
    {
      weight: 40,
      arbitrary: fc.record({
        email: field(plausibleEmail, hostileEmail, hostileWeight),
        name: field(plausibleName, hostileName, hostileWeight),
        phone: optionalField(plausiblePhone, hostilePhone, hostileWeight),
        passwordHash: optionalField(plausibleHash, hostileHash, hostileWeight),
        changedAt: optionalField(plausibleChangedAt, hostileChangedAt, hostileWeight),
        oddity:
          hostileWeight === 0
            ? fc.constant(null)
            : fc.oneof(
                { weight: 19, arbitrary: fc.constant(null) },
                { weight: 1, arbitrary: oddity },
              ),
      }),
    },
    {
      weight: hostileWeight === 0 ? 0 : 1,
      arbitrary: fc.record({ notAUser: fc.oneof(notAString, hostileString) }),
    },
  );
const generatedUser = userArbitrary(3);
/** Users made to pass, for batches that must be accepted whole. */
const plausibleUser = userArbitrary(0);

const recase = fc.constantFrom(.../** @type {Recase[]} */ (['same', 'upper', 'lower', 'title']));
const resolution = fc.constantFrom(.../** @type {const} */ (['ignore', 'ignore', 'merge']));

/** A request: most are one user (group commit groups them), some are batches; now and then an email twice. */
const generatedRequest = fc.record({
  resolution,
  users: fc.oneof(
    { weight: 8, arbitrary: fc.tuple(generatedUser) },
    { weight: 1, arbitrary: fc.array(generatedUser, { minLength: 2, maxLength: 12 }) },
    { weight: 1, arbitrary: fc.array(plausibleUser, { minLength: 2, maxLength: 12 }) },
  ),
  // The email of users[of] again (re-cased), with other values: applied in order within the request.
  echoes: fc.oneof(
    { weight: 5, arbitrary: fc.constant([]) },
    {
      weight: 1,
      arbitrary: fc.array(fc.record({ of: fc.nat(), recase, user: generatedUser }), {
        minLength: 1,
        maxLength: 2,
      }),
    },
  ),
});

/**
 * A later request: users of the first phase again, in merge mode mostly, with changed values that
 * are seldom hostile (the first phase tries those), so that merges are often written; and a new user.
 */
const generatedFollowUp = fc.record({
  resolution: fc.constantFrom(.../** @type {const} */ (['merge', 'merge', 'ignore'])),
  updates: fc.array(
    fc.record({
      of: fc.nat(),
      recase,
      name: fc.oneof(
        fc.constant(null),
        field(plausibleName, hostileName, 1),
        field(plausibleName, hostileName, 1),
      ),
      phone: fc.oneof(
        fc.constant('keep'),
        fc.constant('omit'),
        field(plausiblePhone, hostilePhone, 1),
      ),
      passwordHash: fc.oneof(
        fc.constant('keep'),
        fc.constant('omit'),
        field(plausibleHash, hostileHash, 1),
      ),
      // A change's ordering value, when it has one: a few instants, so often older, newer or the same.
      changedAt: fc.oneof(
        fc.constant('omit'),
        field(plausibleChangedAt, hostileChangedAt, 1),
        field(plausibleChangedAt, hostileChangedAt, 1),
      ),
    }),
    { minLength: 1, maxLength: 4 },
  ),
  fresh: fc.array(generatedUser, { maxLength: 1 }),
});

/** A case as generated: a first phase of requests sent together, then follow-ups sent together. */
export const caseArbitrary = fc.record({
  first: fc.array(generatedRequest, { minLength: 1, maxLength: 8 }),
  then: fc.array(generatedFollowUp, { maxLength: 4 }),
});
/** @typedef {typeof caseArbitrary extends fc.Arbitrary<infer T> ? T : never} GeneratedCase */

/** @param {string} s @param {Recase} how */
function recased(s, how) {
  if (how === 'upper') return s.toUpperCase();
  if (how === 'lower') return s.toLowerCase();
  if (how === 'title') return s.slice(0, 1).toUpperCase() + s.slice(1);
  return s;
}

/**
 * A user object as sent, and whether it follows the contract.
 * @param {GeneratedUser} g
 * @returns {{ item: unknown, plausible: boolean }}
 */
function userOf(g) {
  if ('notAUser' in g) return { item: g.notAUser, plausible: false };
  /** @type {Record<string, unknown>} */
  const u = {};
  for (const key of /** @type {const} */ (['email', 'name', 'phone', 'passwordHash', 'changedAt']))
    if (g[key].v !== undefined) u[key] = g[key].v;
  if (g.oddity && 'drop' in g.oddity) delete u[g.oddity.drop];
  // defineProperty: `__proto__` becomes a key like any other, as JSON.parse makes it on the other side.
  if (g.oddity && 'add' in g.oddity)
    Object.defineProperty(u, g.oddity.add[0], {
      value: g.oddity.add[1],
      enumerable: true,
      configurable: true,
      writable: true,
    });
  return {
    item: u,
    plausible:
      g.email.ok &&
      g.name.ok &&
      g.phone.ok &&
      g.passwordHash.ok &&
      g.changedAt.ok &&
      g.oddity === null,
  };
}

/**
 * The same user with its email re-cased: still plausible when the original was and the new form,
 * and its lower-cased form, fit the length (ß upper-cases to SS).
 * @param {{ item: unknown, plausible: boolean }} u @param {Recase} how
 */
function emailRecased(u, how) {
  const email = /** @type {any} */ (u.item)?.email;
  if (typeof email !== 'string') return { email, plausible: u.plausible };
  const again = recased(email, how);
  return { email: again, plausible: u.plausible && fitsLowerCased(again) };
}

/** @param {unknown} item  the key group commit and the table know an item by */
const emailKey = (item) => {
  const email = /** @type {any} */ (item)?.email;
  return typeof email === 'string' ? email.toLowerCase() : undefined;
};

/**
 * The requests of one phase, each keeping only users whose email no earlier request of the phase
 * has (requests sent together must not race for one row); a request left empty is dropped.
 * @param {FuzzRequest[]} requests
 */
function sharingNoEmail(requests) {
  /** @type {Set<string>} */
  const taken = new Set();
  /** @type {FuzzRequest[]} */
  const out = [];
  for (const r of requests) {
    const mine = new Set(r.items.map(emailKey).filter((k) => k !== undefined));
    const keep = r.items.map((item) => {
      const k = emailKey(item);
      return k === undefined || !taken.has(k);
    });
    for (const k of mine) taken.add(k);
    const items = r.items.filter((_, i) => keep[i]);
    if (items.length) out.push({ ...r, items, plausible: r.plausible.filter((_, i) => keep[i]) });
  }
  return out;
}

/**
 * A generated case as the requests to send.
 * @param {GeneratedCase} g
 * @returns {FuzzCase}
 */
export function materialize(g) {
  const first = sharingNoEmail(
    g.first.map((r) => {
      const users = r.users.map(userOf);
      for (const echo of r.echoes) {
        const original = users[echo.of % users.length];
        const other = userOf(echo.user);
        if (typeof other.item !== 'object' || other.item === null || Array.isArray(other.item))
          continue;
        const { email, plausible } = emailRecased(original, echo.recase);
        if (email === undefined) continue;
        users.push({ item: { ...other.item, email }, plausible: other.plausible && plausible });
      }
      return {
        resolution: r.resolution,
        items: users.map((u) => u.item),
        plausible: users.map((u) => u.plausible),
      };
    }),
  );
  const sent = first
    .flatMap((r) => r.items.map((item, i) => ({ item, plausible: r.plausible[i] })))
    .filter((u) => typeof (/** @type {any} */ (u.item)?.email) === 'string');
  const then = sharingNoEmail(
    g.then.map((f) => {
      const users = f.fresh.map(userOf);
      if (sent.length > 0) {
        for (const update of f.updates) {
          const original = sent[update.of % sent.length];
          const before = /** @type {Record<string, unknown>} */ (original.item);
          const { email, plausible } = emailRecased(original, update.recase);
          /** @type {Record<string, unknown>} */
          const u = { email, name: update.name ? update.name.v : before.name };
          let ok = plausible && (update.name ? update.name.ok : true);
          for (const key of /** @type {const} */ (['phone', 'passwordHash'])) {
            const change = update[key];
            if (change === 'keep') {
              if (before[key] !== undefined) u[key] = before[key];
            } else if (change !== 'omit') {
              if (change.v !== undefined) u[key] = change.v;
              ok &&= change.ok;
            }
          }
          if (update.changedAt !== 'omit') {
            if (update.changedAt.v !== undefined) u.changedAt = update.changedAt.v;
            ok &&= update.changedAt.ok;
          }
          users.push({ item: u, plausible: ok });
        }
      }
      return {
        resolution: f.resolution,
        items: users.map((u) => u.item),
        plausible: users.map((u) => u.plausible),
      };
    }),
  );
  return then.length ? [first, then] : [first];
}

// ---- every flaw, in every field --------------------------------------------------------------

const SWEEP_BASE = {
  email: 'sweep@example.com',
  name: 'Sweep',
  phone: '+15550100',
  passwordHash: '$argon2id$v=19$c2FsdA$aGFzaA',
  changedAt: '2026-11-26T10:00:00.123456+01:00',
};
// Where a flaw goes in each field's value: inside it (after this many characters), or at its end.
const SWEEP_INSIDE = { email: 3, name: 2, phone: 5, passwordHash: 18, changedAt: 13 };
const SWEEP_FLAWS = [
  ...CONTROLS,
  ...['\ud800', '\udbff', '\udc00', '\udfff', '\udc00\ud800', '\ud83d\ude00'],
  ...[' ', '\u00a0', '\u2028', '\u2029', '\u3000', '\ufeff', '\u1680', '\u2000', '\u205f'],
  ...SYNTAX,
  ...WORDS,
  ...NON_ASCII_DIGITS,
  ...CASE_CHANGERS,
  ...INVISIBLE,
  ...ODD,
];

/**
 * Every flaw of the lists above in every field of an otherwise plain user, not left to chance: a
 * request for each flaw and field, of two users, one with the flaw inside the value and one with it
 * at the end, all sent together.
 * @returns {FuzzCase}
 */
export function everyFlawInEveryField() {
  /** @type {FuzzRequest[]} */
  const requests = [];
  let n = 0;
  for (const flawText of SWEEP_FLAWS) {
    for (const key of /** @type {const} */ ([
      'email',
      'name',
      'phone',
      'passwordHash',
      'changedAt',
    ])) {
      const items = [SWEEP_INSIDE[key], Infinity].map((at) => {
        const u = { ...SWEEP_BASE, email: `sweep-${n++}@example.com` };
        u[key] = u[key].slice(0, at) + flawText + u[key].slice(at);
        return u;
      });
      requests.push({
        resolution: n % 4 === 0 ? 'merge' : 'ignore',
        items,
        plausible: [false, false],
      });
    }
  }
  return Array.from({ length: Math.ceil(requests.length / 64) }, (_, i) =>
    requests.slice(i * 64, (i + 1) * 64),
  );
}

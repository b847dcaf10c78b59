// The users table's columns, declared once: the validator and its messages, every statement, COPY's
// CSV, the representation, `?columns`, a CSV body's header and the OpenAPI document are built from
// this list. A new column is one entry here, a migration (db/migrations/), and a line in each row
// function of the hot path (user-schema.js, user-sql.js), written out a column: tsc holds them to the
// row types below and row-functions.test.js to this list. A leaf: it imports nothing.

// Control characters (C0, DEL, C1): invisible in logs and UIs, and NUL cannot be stored in text.
const NO_CONTROL = '^[^\\u0000-\\u001f\\u007f-\\u009f]*$';
// One character of an address: no whitespace, no @, no control character.
const EMAIL_CHAR = '[^\\s@\\u0000-\\u001f\\u007f-\\u009f]';
// local@domain.tld, with a dot inside the domain found by a lookahead: the same addresses as
// `X+@X+\.X+`, whose backtracking takes time quadratic in the length of a domain of dots that is
// wrong only at its end (one 100,000-character email held the event loop for 22 s; ajv runs the
// pattern even when the length is already over). This form is linear.
const EMAIL = `^${EMAIL_CHAR}+@${EMAIL_CHAR}(?=${EMAIL_CHAR}*\\.${EMAIL_CHAR})${EMAIL_CHAR}*$`;
// PHC strings and modular crypt: `$id$`, then base64 (standard or crypt's), parameters and separators.
// Nothing else, so no quote, backslash, space, control character or NUL ever reaches a statement.
const PASSWORD_HASH = '^\\$[a-z0-9-]+\\$[A-Za-z0-9./+=,$-]*$';
// When the change happened at its source, merge mode's ordering value: RFC 3339's date-time with an
// offset (Z or ±hh:mm), to the microsecond at most. PostgreSQL's timestamptz keeps microseconds, so
// a seventh digit could not be stored as sent: refused, not rounded. Whether the date exists (a
// 30 February, an hour 24) is checked after the schema (user-schema.js isRealDateTime).
const CHANGED_AT = '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$';

/**
 * One column of users, as every part of the service sees it.
 * @typedef {object} UserColumn
 * @property {string} field  its name in the API: a user object's key, a CSV header's name, `?columns`
 * @property {string} column  its name in SQL
 * @property {'text' | 'timestamptz'} type  its SQL type (unnest's casts, the staging tables). A text
 *   value must be well-formed UTF-16 to be stored as sent; a timestamptz one a date and time that exist
 * @property {boolean} required  every user has it (NOT NULL); any other is null when not sent
 * @property {Readonly<Record<string, unknown>>} schema  its property in the ajv schema (and the OpenAPI document's)
 * @property {Readonly<Record<string, string>>} messages  what each rule of its schema means to a sender, by ajv keyword
 * @property {boolean} [lowerCased]  stored lower-cased (the email, the key); every other value is stored as sent
 * @property {'key' | 'newest' | 'kept' | 'order'} merge  what merge mode stores of it: `key`, the conflict
 *   target (never updated); `newest`, the newest change's value; `kept`, the newest sent, else the one
 *   stored (COALESCE); `order`, the ordering value (the newest change's: the largest)
 * @property {boolean} [sparse]  rarely sent: a chunk where no row has it sends an empty array for it,
 *   which unnest pads with NULLs (nothing to parse)
 * @property {boolean | 'never'} shown  in a representation (return=representation); 'never': a secret,
 *   which `?select` is told is never returned
 * @property {string} description  what it means to a sender (the OpenAPI User schema)
 * @property {string} [shownAs]  what it means in a representation (the OpenAPI UserRow schema)
 */

/** The columns, in the table's (and every statement's) order: the key, email, first. */
export const USER_COLUMNS = /** @type {const} @satisfies {readonly UserColumn[]} */ ([
  {
    field: 'email',
    column: 'email',
    type: 'text',
    required: true,
    schema: { type: 'string', maxLength: 254, pattern: EMAIL },
    messages: { type: 'must be a string', maxLength: 'must be at most 254 characters', pattern: 'must be a plausible email address (local@domain.tld)' },
    lowerCased: true,
    merge: 'key',
    shown: true,
    description: 'Stored lower-cased; unique: an email already stored is skipped (or, in merge mode, updated), never duplicated.',
    shownAs: 'As stored: lower-cased.',
  },
  {
    field: 'name',
    column: 'name',
    type: 'text',
    required: true,
    schema: { type: 'string', minLength: 1, maxLength: 200, pattern: NO_CONTROL },
    messages: { type: 'must be a string', minLength: 'must not be empty', maxLength: 'must be at most 200 characters', pattern: 'must not contain control characters (NUL included)' },
    merge: 'newest',
    shown: true,
    description: 'Stored exactly as sent.',
  },
  {
    field: 'phone',
    column: 'phone',
    type: 'text',
    required: false,
    schema: { type: 'string', pattern: '^\\+[0-9]{6,15}$' },
    messages: { type: 'must be a string (leave the field out when there is none)', pattern: 'must be + followed by 6 to 15 digits' },
    merge: 'kept',
    shown: true,
    description: '`+` and 6 to 15 digits.',
  },
  {
    field: 'passwordHash',
    column: 'password_hash',
    type: 'text',
    required: false,
    schema: { type: 'string', maxLength: 255, pattern: PASSWORD_HASH },
    messages: {
      type: 'must be a string (leave the field out when there is none)',
      maxLength: 'must be at most 255 characters',
      pattern: 'must be a PHC / modular-crypt hash: $id$ then only letters, digits and . / + = , $ - (e.g. $argon2id$v=19$...)',
    },
    merge: 'kept',
    shown: 'never',
    description: 'A PHC / modular-crypt hash (`$id$...`: letters, digits and `. / + = , $ -`). A `password` field is refused: plaintext is never stored.',
  },
  {
    field: 'changedAt',
    column: 'changed_at',
    type: 'timestamptz',
    required: false,
    schema: { type: 'string', pattern: CHANGED_AT },
    messages: { type: 'must be a string', pattern: 'must be an RFC 3339 date-time with an offset, to the microsecond at most (e.g. 2026-11-26T09:30:00.123456Z or 2026-11-26T10:30:00+01:00)' },
    merge: 'order',
    sparse: true,
    // Not in a representation (yet): it was not when changedAt came, and an answer keeps its columns.
    shown: false,
    description:
      'When the change happened at its source: RFC 3339 with an offset (`Z` or `±hh:mm`), at most 6 fractional digits (PostgreSQL keeps microseconds; more are refused, not rounded). ' +
      'Merge mode\'s ordering value: a stored row is replaced only by a strictly newer change; an older or equal one, or one without `changedAt` against a row that has one, writes nothing and is counted in `stale`. ' +
      'A change with `changedAt` always beats a row stored without one. Stored on insert in both modes.',
  },
]);

/** @typedef {typeof USER_COLUMNS[number]} DeclaredColumn */
/** @typedef {DeclaredColumn['field']} UserField */
/** @typedef {Extract<DeclaredColumn, { shown: true }>['field']} ShownField */
/**
 * A field's value in a row: a string, or null for a column not required.
 * @template {UserField} F
 * @typedef {Extract<DeclaredColumn, { field: F }>['required'] extends true ? string : string | null} ValueOf
 */
/**
 * A row as the table takes it, a value a column (null: not sent): the email lower-cased, the rest
 * as sent (changedAt as its RFC 3339 text). Only user-sql.js turns it into SQL.
 * @typedef {{ [F in UserField]: ValueOf<F> }} UserRow
 */
/**
 * A row as written, as a representation shows it (return=representation): the columns shown, then
 * when it was created and last updated (null: never merged, so this write inserted it), in this order.
 * @typedef {{ [F in ShownField]: ValueOf<F> } & { createdAt: string, updatedAt: string | null }} WrittenUser
 */

/** Every field, in order: the keys a user object may have, the columns one can write. */
export const USER_FIELDS = /** @type {readonly UserField[]} */ (USER_COLUMNS.map((c) => c.field));
/** The fields every user has. */
export const REQUIRED_FIELDS = USER_COLUMNS.filter((c) => c.required).map((c) => c.field);
/** The fields a representation shows, in order. */
export const SHOWN_FIELDS = /** @type {readonly ShownField[]} */ (USER_COLUMNS.filter((c) => c.shown === true).map((c) => c.field));
/** The fields of a representation, in order: those shown, then when the row was created and last updated. */
export const READ_FIELDS = /** @type {readonly (ShownField | 'createdAt' | 'updatedAt')[]} */ ([...SHOWN_FIELDS, 'createdAt', 'updatedAt']);
/** The fields never returned, which `?select` says so of. */
export const SECRET_FIELDS = USER_COLUMNS.filter((c) => c.shown === 'never').map((c) => c.field);

/**
 * The one column of a kind of merge that only one may have: the key (the conflict target, email)
 * and the ordering value (changed_at). Checked at load.
 * @param {'key' | 'order'} merge
 */
function theColumn(merge) {
  const found = USER_COLUMNS.filter((c) => c.merge === merge);
  if (found.length !== 1) throw new Error(`user-columns.js: one column must be merge: '${merge}'`);
  return found[0];
}
/** The key: the conflict target of every statement. */
export const KEY_COLUMN = theColumn('key');
/** The ordering value: merge mode applies an email's changes in its order. */
export const ORDER_COLUMN = theColumn('order');

// Every name goes into SQL text as it is: only plain identifiers.
for (const c of /** @type {readonly UserColumn[]} */ (USER_COLUMNS)) {
  if (!/^[a-z][A-Za-z0-9]*$/.test(c.field) || !/^[a-z][a-z0-9_]*$/.test(c.column)) throw new Error(`user-columns.js: ${c.field} / ${c.column} is not a plain identifier`);
}

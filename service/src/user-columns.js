// The users table's columns, declared once: the validator and its messages, the row functions,
// every statement and its decoder, the CSV, the representation, the query's columns and the
// OpenAPI document are built from it. A new column is an entry here and a migration. A leaf: it
// imports nothing.

// No control character (C0, DEL, C1): invisible in logs, and NUL cannot be stored in text.
const NO_CONTROL = '^[^\\u0000-\\u001f\\u007f-\\u009f]*$';
const EMAIL_CHAR = '[^\\s@\\u0000-\\u001f\\u007f-\\u009f]';
// local@domain.tld, the domain's dot found by a lookahead: linear, where `X+@X+\.X+` backtracks in
// quadratic time.
const EMAIL = `^${EMAIL_CHAR}+@${EMAIL_CHAR}(?=${EMAIL_CHAR}*\\.${EMAIL_CHAR})${EMAIL_CHAR}*$`;
// PHC and modular crypt strings only (`$id$`, base64, parameters): no quote, backslash, space or
// NUL.
const PASSWORD_HASH = '^\\$[a-z0-9-]+\\$[A-Za-z0-9./+=,$-]*$';
// RFC 3339 with an offset, to the microsecond (timestamptz keeps no more); whether it exists:
// changed-at.js.
const CHANGED_AT =
  '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$';

// A column's `merge`: `key` (the conflict target), `newest` (the newest change's value), `kept`
// (the newest sent, else the stored one), `order` (the ordering value). `sparse`: rarely sent;
// `shown` 'never': a secret.
/**
 * @typedef {{ field: string, column: string, type: 'text' | 'timestamptz', required: boolean,
 *   schema: Readonly<Record<string, unknown>>, messages: Readonly<Record<string, string>>,
 *   lowerCased?: boolean, merge: 'key' | 'newest' | 'kept' | 'order', sparse?: boolean,
 *   shown: boolean | 'never', description: string, shownAs?: string }} UserColumn
 */

/** The columns, in the table's (and every statement's) order: the key, email, first. */
export const USER_COLUMNS = /** @type {const} @satisfies {readonly UserColumn[]} */ ([
  {
    field: 'email',
    column: 'email',
    type: 'text',
    required: true,
    schema: { type: 'string', maxLength: 254, pattern: EMAIL },
    messages: {
      type: 'must be a string',
      maxLength: 'must be at most 254 characters',
      pattern: 'must be a plausible email address (local@domain.tld)',
    },
    lowerCased: true,
    merge: 'key',
    shown: true,
    description:
      'Stored lower-cased; unique: an email already stored is ' +
      'skipped (or, in merge mode, updated), never duplicated.',
    shownAs: 'As stored: lower-cased.',
  },
  {
    field: 'name',
    column: 'name',
    type: 'text',
    required: true,
    schema: { type: 'string', minLength: 1, maxLength: 200, pattern: NO_CONTROL },
    messages: {
      type: 'must be a string',
      minLength: 'must not be empty',
      maxLength: 'must be at most 200 characters',
      pattern: 'must not contain control characters (NUL included)',
    },
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
    messages: {
      type: 'must be a string (leave the field out when there is none)',
      pattern: 'must be + followed by 6 to 15 digits',
    },
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
      pattern:
        'must be a PHC / modular-crypt hash: $id$ then only ' +
        'letters, digits and . / + = , $ - (e.g. $argon2id$v=19$...)',
    },
    merge: 'kept',
    shown: 'never',
    description:
      'A PHC / modular-crypt hash (`$id$...`: letters, digits and `. / + = ' +
      ', $ -`). A `password` field is refused: plaintext is never stored.',
  },
  {
    field: 'changedAt',
    column: 'changed_at',
    type: 'timestamptz',
    required: false,
    schema: { type: 'string', pattern: CHANGED_AT },
    messages: {
      type: 'must be a string',
      pattern:
        'must be an RFC 3339 date-time with an offset, to the microsecond at ' +
        'most (e.g. 2026-11-26T09:30:00.123456Z or 2026-11-26T10:30:00+01:00)',
    },
    merge: 'order',
    sparse: true,
    // Not shown: a representation keeps the columns it had before changedAt came.
    shown: false,
    description:
      'When the change happened at its source: RFC 3339 with an offset ' +
      '(`Z` or `±hh:mm`), at most 6 fractional digits (PostgreSQL ' +
      'keeps microseconds; more are refused, not rounded). ' +
      "Merge mode's ordering value: a stored row is replaced only by a strictly " +
      'newer change; an older or equal one, or one without `changedAt` against ' +
      'a row that has one, writes nothing and is counted in `stale`. ' +
      'A change with `changedAt` always beats a row ' +
      'stored without one. Stored on insert in both modes.',
  },
]);

/** @typedef {typeof USER_COLUMNS[number]} DeclaredColumn */
/** @typedef {DeclaredColumn['field']} UserField */
/** @typedef {Extract<DeclaredColumn, { shown: true }>['field']} ShownField */
/**
 * @template {UserField} F
 * @typedef {Extract<DeclaredColumn,
 *   { field: F }>['required'] extends true ? string : string | null} ValueOf
 */
/**
 * A row as the table takes it (null: not sent; the email lower-cased).
 * @typedef {{ [F in UserField]: ValueOf<F> }} UserRow
 */
/**
 * A row in a representation (updatedAt null: inserted).
 * @typedef {{ [F in ShownField]: ValueOf<F> } & { createdAt: string,
 *   updatedAt: string | null }} WrittenUser
 */

/** The columns the table fills itself: when a row was inserted, when a merge last changed it. */
export const CREATED_AT = /** @type {const} */ ({ field: 'createdAt', column: 'created_at' });
export const UPDATED_AT = /** @type {const} */ ({ field: 'updatedAt', column: 'updated_at' });

export const USER_FIELDS = /** @type {readonly UserField[]} */ (USER_COLUMNS.map((c) => c.field));
/**
 * Whether a name is one of a list's, and so of the list's type.
 * @template {string} T
 * @param {readonly T[]} list
 * @param {string} name
 * @returns {name is T}
 */
export const isOneOf = (list, name) => list.some((item) => item === name);

export const REQUIRED_FIELDS = USER_COLUMNS.filter((c) => c.required).map((c) => c.field);
/** @type {readonly ShownField[]} */
export const SHOWN_FIELDS = USER_COLUMNS.filter((c) => c.shown === true).map((c) => c.field);
/** @type {readonly (ShownField | 'createdAt' | 'updatedAt')[]} */
export const READ_FIELDS = [...SHOWN_FIELDS, CREATED_AT.field, UPDATED_AT.field];
/** The fields a merge keeps from the stored row, or an earlier change, when a change has none. */
export const KEPT_FIELDS = USER_COLUMNS.filter((c) => c.merge === 'kept').map((c) => c.field);
export const SECRET_FIELDS = USER_COLUMNS.filter((c) => c.shown === 'never').map((c) => c.field);

/**
 * The one column of this kind of merge, checked at load.
 * @template {'key' | 'order'} M
 * @param {M} merge
 * @returns {Extract<DeclaredColumn, { merge: M }>}
 */
function theColumn(merge) {
  const found = USER_COLUMNS.filter((c) => c.merge === merge);
  if (found.length !== 1) throw new Error(`user-columns.js: one column must be merge: '${merge}'`);
  return /** @type {Extract<DeclaredColumn, { merge: M }>} */ (found[0]);
}
export const KEY_COLUMN = theColumn('key');
export const ORDER_COLUMN = theColumn('order');

/** A row's key (its email), whatever the declaration calls it. @param {{ email: string }} row */
export const keyOf = (row) => row[KEY_COLUMN.field];
/** Whether a row as written was inserted (never updated). @param {WrittenUser} user */
export const wasInserted = (user) => user[UPDATED_AT.field] === null;

const secrets = USER_COLUMNS.filter((c) => c.shown === 'never');
if (secrets.length !== 1) throw new Error("user-columns.js: one column must be shown: 'never'");
/** The one column never shown: the password's hash. */
export const SECRET_COLUMN = secrets[0];

// Every name goes into SQL text as it is: only plain identifiers.
for (const c of /** @type {readonly UserColumn[]} */ (USER_COLUMNS)) {
  if (!/^[a-z][A-Za-z0-9]*$/.test(c.field) || !/^[a-z][a-z0-9_]*$/.test(c.column))
    throw new Error(`user-columns.js: ${c.field} / ${c.column} is not a plain identifier`);
}

// Every text that names the users' fields is built from their declaration (user-columns.js): the
// error catalogue, the OpenAPI document, the validator's and the query's refusals. Each is checked
// here against the declaration, so a column added or hidden is named everywhere it must be.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { API_ERRORS, ApiError } from '../../service/src/errors.js';
import { parseWriteQuery } from '../../service/src/http/write-query.js';
import { createOpenApiDocument } from '../../service/src/openapi.js';
import {
  KEY_COLUMN,
  ORDER_COLUMN,
  READ_FIELDS,
  REQUIRED_FIELDS,
  SECRET_FIELDS,
  USER_COLUMNS,
  USER_FIELDS,
} from '../../service/src/user-columns.js';
import { checkUser } from '../../service/src/users/user-schema.js';

const KEY = KEY_COLUMN.field;
/** Every field but the key: those a merge writes. */
const MERGED = USER_FIELDS.filter((f) => f !== KEY);
const EVERY_NAME = /** @type {string[]} */ ([...new Set([...USER_FIELDS, ...READ_FIELDS])]);
/** The declared names a text names, as words. @param {string} text */
const namedIn = (text) => EVERY_NAME.filter((f) => new RegExp(`\\b${f}\\b`).test(text));
/** @param {string} text @param {readonly string[]} fields @param {string} what */
function namesAll(text, fields, what) {
  const missing = fields.filter((f) => !namedIn(text).includes(f));
  assert.deepEqual(missing, [], `${what} does not name ${missing.join(', ')}: ${text}`);
}

const document = createOpenApiDocument({ maxBatchItems: 1000, maxBodyBytes: 1024 ** 2 });
const post = /** @type {any} */ (document).paths['/users'].post;
/** @param {string} name */
const parameter = (name) =>
  /** @type {{ name: string, description: string }[]} */ (post.parameters).find(
    (p) => p.name === name,
  )?.description ?? '';

/** Every text of the OpenAPI document but its examples, with where it is. @param {unknown} v @param {string} at @returns {[string, string][]} */
const textsOf = (v, at = '') =>
  typeof v === 'string'
    ? [[at, v]]
    : v && typeof v === 'object'
      ? Object.entries(v).flatMap(([k, x]) =>
          k === 'example' || k === 'examples' ? [] : textsOf(x, `${at}.${k}`),
        )
      : [];

/** The message of the refusal a query gets. @param {string} query */
function refusal(query) {
  try {
    parseWriteQuery(query);
  } catch (e) {
    assert.ok(e instanceof ApiError);
    return e.message;
  }
  assert.fail(`${query} is not refused`);
}

describe('the texts naming the fields follow the declaration (unit)', () => {
  test('the catalogue: unknown_column names every column, those of a representation and the secret ones; the conflict target is the key', () => {
    namesAll(API_ERRORS.unknown_column.when, USER_FIELDS, 'unknown_column');
    namesAll(
      API_ERRORS.unknown_column.when,
      [...READ_FIELDS, ...SECRET_FIELDS],
      'unknown_column (select)',
    );
    for (const text of [
      API_ERRORS.unsupported_conflict_target.message,
      API_ERRORS.unsupported_conflict_target.hint,
      API_ERRORS.unsupported_conflict_target.when,
    ]) {
      assert.deepEqual(namedIn(text), [KEY], text);
    }
  });

  test("the validator's and the query's refusals name what may be sent instead", () => {
    const unknown = checkUser({ email: 'a@x.io', name: 'A', nickname: 'B' }, 0);
    assert.ok(Array.isArray(unknown) && unknown.length === 1);
    namesAll(unknown[0].message, USER_FIELDS, 'an unknown field');
    namesAll(refusal('columns=nickname'), USER_FIELDS, '?columns');
    namesAll(refusal('on_conflict=nickname'), USER_FIELDS, '?on_conflict');
    namesAll(refusal('select=nickname'), READ_FIELDS, '?select');
    for (const secret of SECRET_FIELDS)
      namesAll(refusal(`select=${secret}`), READ_FIELDS, `?select=${secret}`);
  });

  test('the OpenAPI document: the schemas, the parameters and the CSV header', () => {
    const schemas = /** @type {any} */ (document).components.schemas;
    assert.deepEqual(Object.keys(schemas.User.properties), USER_FIELDS);
    assert.deepEqual(schemas.User.required, REQUIRED_FIELDS);
    assert.deepEqual(
      Object.keys(schemas.UserRow.properties).slice(0, READ_FIELDS.length),
      READ_FIELDS,
    );
    namesAll(parameter('columns'), USER_FIELDS, '?columns');
    namesAll(parameter('select'), [...READ_FIELDS, ...SECRET_FIELDS], '?select');
    assert.deepEqual(namedIn(parameter('on_conflict')), [KEY]);
    namesAll(parameter('Prefer'), MERGED, 'Prefer (what a merge writes)');
    for (const kind of ['newest', 'kept']) {
      const fields = USER_COLUMNS.filter((c) => c.merge === kind).map((c) => c.field);
      assert.ok(
        parameter('Prefer').includes(
          `the sent ${fields.map((f) => `\`${f}\``).join(fields.length === 2 ? ' and ' : ', ')}`,
        ),
        `Prefer names ${kind}: ${fields}`,
      );
    }
    assert.ok(parameter('Prefer').includes(`stored \`${ORDER_COLUMN.field}\``));
    namesAll(
      post.requestBody.content['text/csv'].schema.description,
      USER_FIELDS,
      'the CSV header',
    );
  });

  test('any other text that lists fields lists all of them, or those a representation holds', () => {
    const texts = [
      ...textsOf(document),
      ...Object.entries(API_ERRORS).flatMap(([code, spec]) => textsOf(spec, code)),
    ];
    assert.ok(texts.length > 100, `${texts.length} texts read`);
    const partial = texts.filter(([, text]) => {
      const named = namedIn(text);
      if (named.length < 3) return false;
      const all = (/** @type {readonly string[]} */ fields) =>
        fields.every((f) => named.includes(f));
      return !all(USER_FIELDS) && !all([...READ_FIELDS, ...SECRET_FIELDS]) && !all(MERGED);
    });
    assert.deepEqual(partial, []);
  });
});

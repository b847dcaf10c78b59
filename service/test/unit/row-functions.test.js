// The row functions of the hot path (user-schema.js, user-sql.js) loop over the declaration
// (user-columns.js); each is checked here against what the declaration says it must give, by an
// oracle of its own, so a column added, or one whose merge or representation changes, is checked
// too.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { USER_COLUMNS } from '../../src/user-columns.js';
import { checkUser, oncePerEmail } from '../../src/users/user-schema.js';
import {
  csvField,
  csvLine,
  insertedUser,
  mergedUser,
  timestampAsJson,
  writeStatement,
} from '../../src/users/user-sql.js';

/** @typedef {import('../../src/user-columns.js').UserRow} UserRow */
/** @typedef {Record<string, string | null>} Values */

const maybe = (/** @type {fc.Arbitrary<string>} */ a) => fc.option(a, { nil: null });
/** A valid user, every optional field sent or not. */
const user = fc.record({
  email: fc.constantFrom('a@x.io', 'A@X.io', 'Ab@x.io'),
  name: fc.stringMatching(/^[A-Za-z ,"'-]{1,8}$/),
  phone: maybe(fc.constantFrom('+4412345678', '+33123456789')),
  passwordHash: maybe(fc.constantFrom('$2b$12$x', '$argon2id$v=19$y')),
  changedAt: maybe(fc.constantFrom('2026-11-26T10:00:00Z', '2026-11-26T10:30:00.5+01:00')),
});
/** @param {Values} u  the item as sent, optional fields left out where null */
const sent = (u) => Object.fromEntries(Object.entries(u).filter(([, v]) => v !== null));
/** @param {Values} u */
const rowOf = (u) => /** @type {UserRow} */ (checkUser(sent(u), 0));
const valuesOf = (/** @type {UserRow} */ r) => /** @type {Values} */ (/** @type {unknown} */ (r));

describe('the row functions follow the declaration (unit)', () => {
  test('an item becomes its row: each column as sent (null: not sent), lower-cased where declared', () => {
    fc.assert(
      fc.property(user, (u) => {
        const expected = Object.fromEntries(
          USER_COLUMNS.map((c) => [
            c.field,
            u[c.field] !== null && 'lowerCased' in c ? u[c.field]?.toLowerCase() : u[c.field],
          ]),
        );
        assert.equal(JSON.stringify(rowOf(u)), JSON.stringify(expected));
      }),
    );
  });

  test('an email sent twice in merge mode: each column the later one, or the earlier where kept and not sent again', () => {
    fc.assert(
      fc.property(user, user, (a, b) => {
        const earlier = { ...a, email: 'a@x.io', changedAt: null };
        const later = { ...b, email: 'a@x.io' };
        const [merged] = oncePerEmail([rowOf(earlier), rowOf(later)], 'merge');
        const expected = Object.fromEntries(
          USER_COLUMNS.map((c) => [
            c.field,
            c.merge === 'kept' ? (later[c.field] ?? earlier[c.field]) : later[c.field],
          ]),
        );
        assert.equal(JSON.stringify(merged), JSON.stringify(expected));
      }),
    );
  });

  test("a CSV line for COPY: every column's field, in the declaration's order", () => {
    fc.assert(
      fc.property(user, (u) => {
        const row = rowOf(u);
        assert.equal(
          csvLine(row),
          `${USER_COLUMNS.map((c) => csvField(valuesOf(row)[c.field])).join(',')}\n`,
        );
      }),
    );
  });

  test('a representation: the columns shown, as sent or as a merge returned them, then createdAt and updatedAt', () => {
    const shown = USER_COLUMNS.filter((c) => c.shown === true);
    const returned = writeStatement('SELECT 1', 'merge', 'rows')
      .split(' RETURNING ')[1]
      .split(', ');
    const at = (/** @type {string} */ column) => returned.indexOf(column);
    fc.assert(
      fc.property(
        user,
        maybe(fc.constant('+4499999999')),
        fc.boolean(),
        (u, storedPhone, updated) => {
          const row = rowOf(u);
          const inserted = {
            ...Object.fromEntries(shown.map((c) => [c.field, valuesOf(row)[c.field]])),
            createdAt: 'now',
            updatedAt: null,
          };
          assert.equal(JSON.stringify(insertedUser(row, 'now')), JSON.stringify(inserted));

          const stored = {
            email: row.email,
            created_at: '2026-11-25 04:15:04.123456+00',
            phone: storedPhone,
            updated_at: updated ? '2026-11-26 10:00:00+01' : null,
          };
          const r = returned.map(
            (column) => /** @type {Record<string, string | null>} */ (stored)[column],
          );
          const asJson = (/** @type {string | null} */ v) =>
            v === null ? null : timestampAsJson(v);
          const merged = {
            ...Object.fromEntries(
              shown.map((c) => [
                c.field,
                c.merge === 'kept' ? r[at(c.column)] : valuesOf(row)[c.field],
              ]),
            ),
            createdAt: asJson(r[at('created_at')]),
            updatedAt: asJson(r[at('updated_at')]),
          };
          assert.equal(JSON.stringify(mergedUser(row, r)), JSON.stringify(merged));
        },
      ),
    );
  });
});

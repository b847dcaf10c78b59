import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { InvalidBatchError } from '../../src/errors.js';
import { emailsOfFilter } from '../../src/http/email-filter.js';
import { checkErasures } from '../../src/users/erasure-items.js';
import { KnownTombstones } from '../../src/users/known-tombstones.js';

// The pure parts of erasure: the tags a process has read, DELETE's filter as postgrest-js writes
// it, and the items of POST /erasures.

describe('KnownTombstones (unit)', () => {
  test('has(tag) is true exactly for the tags absorbed, however they came', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 50 }), {
          maxLength: 5,
        }),
        fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 50 }),
        (batches, probes) => {
          const known = new KnownTombstones();
          batches.forEach((tags, i) => known.absorb(i + 1, tags));
          const all = new Set(batches.flat());
          for (const tag of [...probes, ...all]) assert.equal(known.has(tag), all.has(tag));
          assert.equal(known.generation, batches.length);
        },
      ),
    );
  });

  test('an older generation never moves it back', () => {
    const known = new KnownTombstones();
    known.absorb(5, [1]);
    known.absorb(3, []);
    assert.equal(known.generation, 5);
  });
});

/** As postgrest-js's .in() writes a list: values with , ( ) in double quotes. @param {string[]} values */
const inList = (values) => `in.(${values.map((v) => (/[,()]/.test(v) ? `"${v}"` : v)).join(',')})`;

describe("DELETE /users's filter (unit)", () => {
  test('eq and in, as postgrest-js writes them, give the emails lower-cased, in order', () => {
    const email = fc
      .tuple(fc.stringMatching(/^[a-z0-9.,()+_-]{1,20}$/), fc.stringMatching(/^[a-z]{1,10}$/))
      .map(([local, domain]) => `${local}@${domain}.com`);
    fc.assert(
      fc.property(fc.array(email, { minLength: 1, maxLength: 10 }), (emails) => {
        const query = new URLSearchParams({ email: inList(emails) }).toString();
        assert.deepEqual(emailsOfFilter(query), emails);
        const one = new URLSearchParams({ email: `eq.${emails[0].toUpperCase()}` }).toString();
        assert.deepEqual(emailsOfFilter(one), [emails[0]]);
      }),
    );
  });

  test('no filter, another column, another operator, twice, an unclosed quote, a bad email: refused', () => {
    const refused = {
      '': 'missing_filter',
      'select=*': 'missing_filter',
      'name=eq.x': 'unsupported_filter',
      'email=like.a%40b.co': 'unsupported_filter',
      'email=neq.a%40b.co': 'unsupported_filter',
      'email=eq.a%40b.co&email=eq.c%40d.co': 'unsupported_filter',
      'email=in.(%22a%40b.co)': 'unsupported_filter',
      'email=in.(a%40b.co': 'unsupported_filter',
      'email=eq.nobody': 'unsupported_filter',
      'email=in.()': 'unsupported_filter',
    };
    for (const [query, code] of Object.entries(refused))
      assert.throws(() => emailsOfFilter(query), { code }, query);
  });
});

describe('the items of POST /erasures (unit)', () => {
  test('{email, changedAt?}: the email lower-cased, the change kept; anything else named', () => {
    assert.deepEqual(
      checkErasures([{ email: 'A@B.CO' }, { email: 'c@d.co', changedAt: '2026-01-01T00:00:00Z' }]),
      [
        { email: 'a@b.co', changedAt: null },
        { email: 'c@d.co', changedAt: '2026-01-01T00:00:00Z' },
      ],
    );
    try {
      checkErasures([
        'a@b.co',
        { email: 'a@b.co', name: 'x' },
        { email: 'nope' },
        { email: 'a@b.co', changedAt: '2026-02-30T00:00:00Z' },
        {},
      ]);
      assert.fail('refused');
    } catch (err) {
      assert.ok(err instanceof InvalidBatchError);
      assert.deepEqual(
        err.errors.map((e) => [e.index, e.field]),
        [
          [0, null],
          [1, 'name'],
          [2, 'email'],
          [3, 'changedAt'],
          [4, 'email'],
        ],
      );
    }
  });
});

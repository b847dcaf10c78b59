import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { makeUsers, uniqueTag } from '../../../test/support/users.js';

const TOKEN = 'test-ingest-token-0123456789';

describe('every bad input gets its status and message, and writes nothing', () => {
  // A small body limit keeps the over-the-limit case quick; 10,001 items still fit under it.
  const ctx = useAppAndDatabase({ INGEST_TOKEN: TOKEN, MAX_BODY_BYTES: String(2 * 1024 * 1024) });

  /**
   * Posts, checks status and error code, and that the table did not change.
   * @param {unknown} body
   * @param {number} status
   * @param {string} error
   * @param {Parameters<typeof ctx.app.postUsers>[1]} [options]
   */
  async function expectRefused(body, status, error, options = { token: TOKEN }) {
    const before = await ctx.db.countUsers();
    const res = await ctx.app.postUsers(body, options);
    assert.equal(res.status, status, res.text);
    assert.equal(res.body?.error, error, res.text);
    assert.equal(typeof res.body?.message, 'string');
    assert.equal(await ctx.db.countUsers(), before, 'nothing written');
    return res;
  }

  /**
   * One user with one field changed (or removed with undefined): 400 naming index 0 and the field.
   * @param {Record<string, unknown>} change
   * @param {string | null} field
   * @param {RegExp} message
   */
  async function expectInvalidUser(change, field, message) {
    const user = { ...makeUsers(1)[0], ...change };
    for (const [k, v] of Object.entries(change))
      if (v === undefined) delete (/** @type {any} */ (user)[k]);
    const res = await expectRefused([user], 400, 'invalid_batch');
    assert.deepEqual(
      res.body.errors.map((/** @type {any} */ e) => [e.index, e.field]),
      [[0, field]],
    );
    assert.match(res.body.errors[0].message, message);
  }

  test('malformed JSON: 400', () =>
    expectRefused('[{"email": "a@b.co", "name": ', 400, 'malformed_json'));
  test('an object instead of an array: 400', () =>
    expectRefused(makeUsers(1)[0], 400, 'not_an_array'));
  test('a JSON string instead of an array: 400', () =>
    expectRefused('"users"', 400, 'not_an_array'));
  test('an empty body: 400', () => expectRefused('', 400, 'not_an_array'));
  test('an empty array: 400', () => expectRefused([], 400, 'empty_batch'));
  test('10,001 items: 413', async () => {
    const res = await expectRefused(
      makeUsers(10_001).map(({ email, name }) => ({ email, name })),
      413,
      'too_many_items',
    );
    assert.match(res.body.message, /MAX_BATCH_ITEMS/);
  });
  test('a body over MAX_BODY_BYTES: 413', () =>
    expectRefused(`[${'"x",'.repeat(600_000)}"x"]`, 413, 'payload_too_large'));
  test('a wrong content type: 415', () =>
    expectRefused(JSON.stringify(makeUsers(1)), 415, 'unsupported_media_type', {
      token: TOKEN,
      contentType: 'text/plain',
    }));
  test('a missing token: 401', async () => {
    const res = await expectRefused(makeUsers(1), 401, 'unauthorized', {});
    assert.equal(res.headers.get('www-authenticate'), 'Bearer');
  });
  test("a wrong token: 401, WWW-Authenticate's error invalid_token", async () => {
    const res = await expectRefused(makeUsers(1), 401, 'unauthorized', { token: `${TOKEN}x` });
    assert.equal(res.headers.get('www-authenticate'), 'Bearer error="invalid_token"');
  });
  test('a token that is a prefix of the right one: 401', () =>
    expectRefused(makeUsers(1), 401, 'unauthorized', { token: TOKEN.slice(0, 8) }));

  test('a missing email', () => expectInvalidUser({ email: undefined }, 'email', /required/));
  test('an invalid email', () =>
    expectInvalidUser({ email: 'not-an-email' }, 'email', /plausible email/));
  test('an email with a space', () =>
    expectInvalidUser({ email: 'a b@example.com' }, 'email', /plausible email/));
  test('a 255-character email', () =>
    expectInvalidUser({ email: `${'a'.repeat(243)}@example.com` }, 'email', /254/));
  test('a missing name', () => expectInvalidUser({ name: undefined }, 'name', /required/));
  test('an empty name', () => expectInvalidUser({ name: '' }, 'name', /empty/));
  test('a 201-character name', () => expectInvalidUser({ name: 'n'.repeat(201) }, 'name', /200/));
  test('a name with a NUL byte', () =>
    expectInvalidUser({ name: 'Ada\u0000Lovelace' }, 'name', /control characters/));
  test('a name with a newline', () =>
    expectInvalidUser({ name: 'Ada\nLovelace' }, 'name', /control characters/));
  test('a non-string name', () => expectInvalidUser({ name: 42 }, 'name', /string/));
  test('a nested name', () => expectInvalidUser({ name: { first: 'Ada' } }, 'name', /string/));
  test('an unknown field (nome)', () =>
    expectInvalidUser({ nome: 'Ada' }, 'nome', /not a known field/));
  test('a password field', () =>
    expectInvalidUser({ password: 'hunter2' }, 'password', /passwordHash/));
  test('a passwordHash that is no hash', () =>
    expectInvalidUser({ passwordHash: 'hunter2' }, 'passwordHash', /\$id\$/));
  // The old pattern checked only the `$id$` prefix. A NUL after it reached PostgreSQL,
  // which refused the statement as a protocol error (08P01), and the service answered 503 to the
  // request and to its whole group; a newline was stored.
  for (const [what, tail] of [
    ['a NUL', '\u0000'],
    ['a newline', '\n'],
    ['a quote', "'"],
    ['a backslash', '\\'],
    ['a space', ' '],
    ['a non-ASCII letter', 'é'],
  ]) {
    test(`a passwordHash with ${what} after its $id$: 400 naming passwordHash`, () =>
      expectInvalidUser(
        { passwordHash: `$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA${tail}` },
        'passwordHash',
        /only letters, digits/,
      ));
  }
  test('a phone without +', () =>
    expectInvalidUser({ phone: '5551234567' }, 'phone', /6 to 15 digits/));
  test('a phone with 16 digits', () =>
    expectInvalidUser({ phone: `+${'1'.repeat(16)}` }, 'phone', /6 to 15 digits/));
  test('a number, a boolean, null or an array where a string goes', async () => {
    await expectInvalidUser({ email: 42 }, 'email', /string/);
    await expectInvalidUser({ email: true }, 'email', /string/);
    await expectInvalidUser({ email: ['a@example.com'] }, 'email', /string/);
    await expectInvalidUser({ name: null }, 'name', /string/);
    await expectInvalidUser({ phone: 5551234567 }, 'phone', /string/);
    await expectInvalidUser({ phone: null }, 'phone', /leave the field out/);
    await expectInvalidUser({ passwordHash: null }, 'passwordHash', /leave the field out/);
  });

  // 'İ' (U+0130) lower-cases to 'i' and U+0307: two characters where one was sent.
  test('an email of 254 characters that lower-cases to 255 (İ): 400 naming email, not 500', async () => {
    const email = `İ${'a'.repeat(241)}@example.com`;
    assert.equal([...email].length, 254);
    assert.equal([...email.toLowerCase()].length, 255);
    await expectInvalidUser({ email }, 'email', /lower-cased/);
  });
  test('an email with İ that still fits once lower-cased is stored lower-cased', async () => {
    const email = `İnci-${uniqueTag()}@Example.com`;
    const res = await ctx.app.postUsers([{ email, name: 'İnci' }], { token: TOKEN });
    assert.equal(res.status, 201, res.text);
    const stored = await ctx.db.usersByEmail([email.toLowerCase()]);
    assert.equal(stored.get(email.toLowerCase())?.name, 'İnci');
  });

  // JSON.stringify writes a lone surrogate as the escape "\ud800", which JSON.parse turns back into
  // one; PostgreSQL would store U+FFFD in its place.
  for (const field of ['email', 'name']) {
    test(`a lone UTF-16 surrogate in ${field}: 400 naming ${field}`, async () => {
      const value = { email: 'a\ud800b@example.com', name: 'a\ud800b' }[field];
      await expectInvalidUser({ [field]: value }, field, /lone UTF-16 surrogate/);
    });
  }
  test('a lone surrogate in phone: 400 naming phone, once (its pattern already says digits)', () =>
    expectInvalidUser({ phone: '+1555\udc001234' }, 'phone', /6 to 15 digits/));
  test('a lone surrogate in passwordHash: 400 naming passwordHash, once (its pattern already says which characters)', () =>
    expectInvalidUser(
      { passwordHash: '$argon2id$\udc00' },
      'passwordHash',
      /only letters, digits/,
    ));
  test('a surrogate pair (an emoji written as two escapes) is a character, stored as sent', async () => {
    const email = `pair-${uniqueTag()}@example.com`;
    const res = await ctx.app.postUsers(`[{"email": "${email}", "name": "smile \\ud83d\\ude00"}]`, {
      token: TOKEN,
    });
    assert.equal(res.status, 201, res.text);
    assert.equal((await ctx.db.usersByEmail([email])).get(email)?.name, 'smile 😀');
  });

  test('__proto__ and constructor keys are unknown fields, and pollute nothing', async () => {
    const [user] = makeUsers(1);
    const body = `[${JSON.stringify(user).slice(0, -1)}, "__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}}]`;
    const res = await expectRefused(body, 400, 'invalid_batch');
    assert.deepEqual(res.body.errors.map((/** @type {any} */ e) => e.field).sort(), [
      '__proto__',
      'constructor',
    ]);
    assert.equal(/** @type {any} */ ({}).polluted, undefined);
  });

  test('a null item', async () => {
    const res = await expectRefused([makeUsers(1)[0], null], 400, 'invalid_batch');
    assert.deepEqual(res.body.errors, [
      { index: 1, field: null, message: 'each item must be a user object' },
    ]);
  });

  test('one bad item at index 999 of 1000: nothing written, the error names index 999', async () => {
    const users = makeUsers(1000);
    users[999].email = 'broken';
    const res = await expectRefused(users, 400, 'invalid_batch');
    assert.equal(res.body.errors.length, 1);
    assert.equal(res.body.errors[0].index, 999);
    assert.equal(res.body.errors[0].field, 'email');
    assert.match(res.body.message, /1 of 1000/);
  });

  test('many bad items: at most 100 errors, in index order', async () => {
    const users = makeUsers(300).map((u) => ({ ...u, email: 'nope' }));
    const res = await expectRefused(users, 400, 'invalid_batch');
    assert.equal(res.body.errors.length, 100);
    assert.deepEqual(
      res.body.errors.map((/** @type {any} */ e) => e.index),
      [...Array(100).keys()],
    );
    assert.match(res.body.message, /300 of 300/);
  });

  test('the same batch, fixed, is then accepted', async () => {
    const users = makeUsers(5, uniqueTag());
    const res = await ctx.app.postUsers(users, { token: TOKEN });
    assert.equal(res.status, 201);
  });

  test('an unknown route: 404 in JSON', async () => {
    const res = await fetch(`${ctx.app.baseUrl}/nope`);
    assert.equal(res.status, 404);
    assert.equal((await res.json()).error, 'not_found');
  });
});

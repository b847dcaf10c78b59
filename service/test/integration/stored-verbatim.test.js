import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { WRITE_VARIANTS } from '../../../test/support/write-variants.js';
import { uniqueTag } from '../../../test/support/users.js';

// Names that would break naive quoting, or a format string, or a client encoding.
const TRICKY_NAMES = [
  "'); DROP TABLE users;--",
  "O'Brien \"the\" ''quoted''",
  'back\\slash \\\\ \\x00 \\n',
  '$1 $2::text %L %I %s %% E\'\\\'',
  '😀 emoji 👩‍👩‍👧‍👦 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  'مرحبا بالعالم שלום',
  '‮right-to-left override‬ and zero​width',
  'ñandú Ωmega 漢字 ひらがな',
];

for (const { label, env } of WRITE_VARIANTS) {

  describe(`strings are stored byte for byte (${label})`, () => {
    const ctx = useAppAndDatabase({ ...env });

    for (const strategyChunk of [1000, 3]) {
      test(`SQL-looking, escaped and non-Latin names survive (chunks of ${strategyChunk})`, async () => {
        const tag = uniqueTag();
        const users = TRICKY_NAMES.map((name, i) => ({ email: `tricky-${tag}-${i}@example.com`, name, passwordHash: '$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo' }));
        const res = await ctx.app.postUsers(users);
        assert.equal(res.status, 201, res.text);
        assert.equal(res.body.inserted, users.length);
        const stored = await ctx.db.usersByEmail(users.map((u) => u.email));
        for (const u of users) {
          const row = stored.get(u.email);
          assert.equal(Buffer.compare(Buffer.from(row.name), Buffer.from(u.name)), 0, `name ${JSON.stringify(u.name)}`);
          assert.equal(row.password_hash, u.passwordHash);
        }
        const { rows } = await ctx.db.pool.query("SELECT to_regclass('public.users') IS NOT NULL AS still_there");
        assert.equal(rows[0].still_there, true);
      });
    }

    test('an email with a quote and a plus is stored lower-cased and intact', async () => {
      const email = `O'Neil+${uniqueTag()}@Example.COM`;
      const res = await ctx.app.postUsers([{ email, name: 'Q' }]);
      assert.equal(res.status, 201);
      assert.ok((await ctx.db.usersByEmail([email.toLowerCase()])).has(email.toLowerCase()));
    });
  });
}

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase } from '../../../test/support/database.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { uniqueTag } from '../../../test/support/users.js';

// PostgreSQL's refusal of a row quotes it: `Failing row contains (email, name, phone, $2b$12$...)`.
// A rule the validator does not know (a CHECK a DBA added) makes the service answer 500, rightly;
// the log line must still name the rule, never the row. Run at debug, the most a log ever says.
const REFUSED_NAME = 'Refused by the DBA';
const DBA_CHECK = `ALTER TABLE users ADD CONSTRAINT dba_names CHECK (name NOT LIKE 'Refused%')`;

/** A bcrypt hash of its own for each user, so any one found in the log is a leak. */
const bcrypt = () =>
  `$2b$12$${randomBytes(40)
    .toString('base64')
    .replace(/[^A-Za-z0-9]/g, 'x')
    .slice(0, 53)}`;

describe('no secret in the log: every refusal path at LOG_LEVEL=debug', () => {
  const token = `tok-${randomBytes(16).toString('hex')}`;
  const wrongToken = `wrong-${randomBytes(16).toString('hex')}`;
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Record<string, Awaited<ReturnType<typeof startServerProcess>>>} */ const services = {};
  /** Everything sent that must not be logged or echoed. @type {Set<string>} */
  const secrets = new Set([token, wrongToken]);
  /** @type {string[]} */ const answers = [];

  before(async () => {
    db = await createTestDatabase();
    await db.pool.query(DBA_CHECK);
    for (const strategy of ['format', 'copy']) {
      services[strategy] = await startServerProcess({
        DATABASE_URL: db.url,
        LOG_LEVEL: 'debug',
        INGEST_TOKEN: token,
        INSERT_STRATEGY: strategy,
      });
    }
  });
  after(async () => {
    for (const s of Object.values(services)) await s.stop();
    await db?.drop();
  });

  /** @param {string} tag @param {number} i @param {boolean} [refused] */
  const user = (tag, i, refused = false) => {
    const u = {
      email: `${tag}-${i}@secret.example`,
      name: refused ? REFUSED_NAME : `User ${i}`,
      passwordHash: bcrypt(),
    };
    secrets.add(u.email);
    secrets.add(u.passwordHash);
    return u;
  };

  /**
   * @param {string} strategy @param {unknown} body
   * @param {{ auth?: string, headers?: Record<string, string> }} [options]
   */
  async function post(strategy, body, { auth = token, headers = {} } = {}) {
    const res = await fetch(`${services[strategy].baseUrl}/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${auth}`, ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    answers.push(text);
    return { status: res.status, body: JSON.parse(text) };
  }

  test('a single user, a group, item 77 of 150, a merge, one of 10 concurrent requests: 500 for the refused, the log names the constraint', async () => {
    const t = uniqueTag();
    assert.equal(
      (await post('format', [user(`${t}-single`, 0, true)])).status,
      500,
      'a single user',
    );

    const group = await Promise.all(
      Array.from({ length: 12 }, (_, i) => post('format', [user(`${t}-group`, i, i === 5)])),
    );
    assert.deepEqual(
      group.map((r) => r.status),
      group.map((_, i) => (i === 5 ? 500 : 201)),
      'one of a group',
    );

    for (const strategy of ['format', 'copy']) {
      assert.equal(
        (await post(strategy, [user(`${t}-fine-${strategy}`, 0)])).status,
        201,
        'a success, logged at debug',
      );
      const batch = Array.from({ length: 150 }, (_, i) =>
        user(`${t}-batch-${strategy}`, i, i === 77),
      );
      assert.equal((await post(strategy, batch)).status, 500, `item 77 of 150 (${strategy})`);
      assert.equal(
        (await db.usersByEmail(batch.map((u) => u.email))).size,
        0,
        'nothing half-written',
      );
    }

    const merged = user(`${t}-merge`, 0);
    assert.equal((await post('format', [merged])).status, 201);
    const merge = { Prefer: 'resolution=merge-duplicates' };
    assert.equal(
      (
        await post('format', [{ ...merged, name: REFUSED_NAME, passwordHash: bcrypt() }], {
          headers: merge,
        })
      ).status,
      500,
      'a merge',
    );
    assert.equal(
      (
        await post('copy', [{ ...merged, name: REFUSED_NAME, passwordHash: bcrypt() }], {
          headers: merge,
        })
      ).status,
      500,
      'a merge (copy)',
    );

    const concurrent = await Promise.all(
      Array.from({ length: 10 }, (_, r) =>
        post(
          'format',
          Array.from({ length: 20 }, (_, i) => user(`${t}-c${r}`, i, r === 3 && i === 7)),
        ),
      ),
    );
    assert.deepEqual(
      concurrent.map((r) => r.status),
      concurrent.map((_, r) => (r === 3 ? 500 : 201)),
      'one of 10 concurrent requests',
    );

    for (const s of Object.values(services)) {
      const failures = s.logs.filter((l) => l.msg === 'unexpected error');
      assert.ok(failures.length > 0, 'each failure is logged');
      for (const l of failures) {
        assert.equal(l.err.code, '23514');
        assert.equal(l.err.constraint, 'dba_names', 'by the rule that refused it');
        assert.equal(l.err.table, 'users');
        assert.equal(l.err.detail, undefined, 'never the failing row');
      }
    }
  });

  test('a wrong or missing token, a refused hash, malformed JSON: 4xx, and nothing of it logged', async () => {
    const t = uniqueTag();
    assert.equal((await post('format', [user(t, 1)], { auth: wrongToken })).status, 401);
    assert.equal((await post('format', [user(t, 2)], { auth: '' })).status, 401);
    const badHash = `${bcrypt()} not a hash`;
    secrets.add(badHash);
    assert.equal((await post('format', [{ ...user(t, 3), passwordHash: badHash }])).status, 400);
    assert.equal((await post('format', `[${JSON.stringify(user(t, 4))},`)).status, 400);
  });

  test('the log and every answer hold no token, email or password hash', () => {
    for (const [strategy, s] of Object.entries(services)) {
      const lines = s.logs.map((l) => JSON.stringify(l));
      assert.ok(
        s.logs.some((l) => l.level === 20),
        'debug logging was on',
      );
      for (const secret of secrets) {
        const leak = lines.find(
          (line) => line.includes(secret) || line.includes(secret.slice(0, 24)),
        );
        assert.equal(leak, undefined, `${strategy}: a secret in the log: ${secret}`);
      }
    }
    for (const secret of secrets)
      assert.ok(!answers.some((a) => a.includes(secret)), 'a secret in an answer');
  });
});

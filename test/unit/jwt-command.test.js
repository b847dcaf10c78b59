import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, test } from 'node:test';
import { jwtVerify } from 'jose';

// `npm run jwt` mints what the service accepts, from the shell's environment; a secret it cannot
// sign with is one line saying what to export, never jose's stack trace.

const JWT = fileURLToPath(new URL('../../scripts/jwt.js', import.meta.url));
const SECRET = 'jwt-command-test-secret-0123456789abcdef';

/** @param {Record<string, string>} env @param {string[]} [args] */
async function mint(env, args = []) {
  const { JWT_SECRET, JWT_AUDIENCE, JWT_ISSUER, ...rest } = process.env;
  try {
    const run = await promisify(execFile)(process.execPath, [JWT, ...args], {
      env: { ...rest, ...env },
      encoding: 'utf8',
    });
    return { code: 0, ...run };
  } catch (err) {
    const { code, stdout, stderr } = /** @type {any} */ (err);
    return { code, stdout, stderr };
  }
}

describe('npm run jwt', () => {
  for (const [what, env] of /** @type {const} */ ([
    ['unset', {}],
    ['empty', { JWT_SECRET: '' }],
    ['blank', { JWT_SECRET: '   ' }],
  ])) {
    test(`JWT_SECRET ${what}: one line saying what to export, exit 1, no token`, async () => {
      const run = await mint(env);
      assert.equal(run.code, 1);
      assert.equal(run.stdout, '');
      assert.match(run.stderr, /^jwt: JWT_SECRET is not set in this shell: export .*\n$/);
    });
  }

  test('a secret shorter than the service takes: one line, exit 1', async () => {
    const run = await mint({ JWT_SECRET: 'short' });
    assert.equal(run.code, 1);
    assert.equal(run.stdout, '');
    assert.match(
      run.stderr,
      /^jwt: JWT_SECRET is 5 characters: the service takes at least 32.*\n$/,
    );
  });

  test('a token the secret verifies, with the role, client, audience, issuer and expiry asked', async () => {
    const env = { JWT_SECRET: SECRET, JWT_AUDIENCE: 'sluice', JWT_ISSUER: 'https://id.example' };
    const run = await mint(env, ['--sub', 'crm', '--role', 'loader', '--expires', '10m']);
    assert.equal(run.code, 0, run.stderr);
    const { payload } = await jwtVerify(run.stdout.trim(), new TextEncoder().encode(SECRET), {
      audience: 'sluice',
      issuer: 'https://id.example',
      algorithms: ['HS256'],
    });
    assert.equal(payload.sub, 'crm');
    assert.equal(payload.role, 'loader');
    assert.equal(/** @type {number} */ (payload.exp) - /** @type {number} */ (payload.iat), 600);
  });
});

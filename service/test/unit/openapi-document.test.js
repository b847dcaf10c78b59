import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { createOpenApiDocument } from '../../src/openapi.js';
import { userSchema } from '../../src/users/user-schema.js';

describe('the OpenAPI document', () => {
  const doc = createOpenApiDocument({ maxBatchItems: 10_000, maxBodyBytes: 10 * 1024 * 1024 });

  test('lints clean with Redocly (recommended-strict rules, offline)', async () => {
    const config = await createConfig({
      extends: ['recommended-strict'],
      // Health, readiness, metrics and this document have no client error to describe.
      rules: { 'operation-4xx-response': 'off' },
    });
    const problems = await lintFromString({ source: JSON.stringify(doc, null, 2), absoluteRef: '/openapi.json', config });
    assert.deepEqual(problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`), []);
  });

  test('describes users with the very schema ajv validates with', () => {
    const user = /** @type {any} */ (doc.components.schemas.User);
    const withoutNotes = { ...user, properties: Object.fromEntries(Object.entries(user.properties).map(([k, { description, ...rule }]) => [k, rule])) };
    assert.deepEqual(withoutNotes, userSchema);
    assert.equal(/** @type {any} */ (doc.paths['/users'].post.requestBody.content['application/json'].schema).maxItems, 10_000);
  });

  test('every route the service answers is in it', () => {
    assert.deepEqual(Object.keys(doc.paths).sort(), ['/healthz', '/metrics', '/openapi.json', '/readyz', '/users']);
    assert.deepEqual(Object.keys(doc.paths['/users'].post.responses).sort(), ['200', '201', '400', '401', '413', '415', '500', '503']);
  });
});

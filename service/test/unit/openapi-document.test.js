import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { API_ERRORS } from '../../src/errors.js';
import { createOpenApiDocument } from '../../src/openapi.js';
import { userSchema } from '../../src/users/user-schema.js';

describe('the OpenAPI document', () => {
  const doc = createOpenApiDocument({ maxBatchItems: 10_000, maxBodyBytes: 10 * 1024 * 1024 });

  test('lints clean with Redocly (recommended-strict rules, offline)', async () => {
    const config = await createConfig({
      extends: ['recommended-strict'],
      // Health, readiness, metrics and this document have no client error to describe.
      // Health, readiness, metrics and this document have no client error of their own to describe;
      // NotFound and MethodNotAllowed answer requests outside every operation, which none can reference.
      rules: { 'operation-4xx-response': 'off', 'no-unused-components': 'off' },
    });
    const problems = await lintFromString({
      source: JSON.stringify(doc, null, 2),
      absoluteRef: '/openapi.json',
      config,
    });
    assert.deepEqual(
      problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`),
      [],
    );
  });

  test('describes users with the very schema ajv validates with', () => {
    const user = /** @type {any} */ (doc.components.schemas.User);
    const withoutNotes = {
      ...user,
      properties: Object.fromEntries(
        Object.entries(user.properties).map(([k, { description, ...rule }]) => [k, rule]),
      ),
    };
    assert.deepEqual(withoutNotes, userSchema);
    assert.equal(
      /** @type {any} */ (doc.paths['/users'].post.requestBody.content['application/json'].schema)
        .maxItems,
      10_000,
    );
  });

  test('every route the service answers is in it', () => {
    assert.deepEqual(Object.keys(doc.paths).sort(), [
      '/healthz',
      '/metrics',
      '/openapi.json',
      '/readyz',
      '/users',
    ]);
    assert.deepEqual(Object.keys(doc.paths['/users'].post.responses).sort(), [
      '200',
      '201',
      '400',
      '401',
      '408',
      '409',
      '413',
      '415',
      '417',
      '422',
      '429',
      '431',
      '500',
      '501',
      '503',
    ]);
  });

  test('every code of the error catalogue is documented where it can be answered, with its headers', () => {
    /** @type {(responses: any, status: number) => string[]} */
    const codesAt = (responses, status) => {
      const content = responses?.[status]?.content?.['application/json'];
      const schemas = content?.schema?.oneOf ?? [content?.schema];
      return schemas.flatMap((/** @type {any} */ s) =>
        s?.$ref ? ['invalid_batch'] : (s?.properties?.error?.enum ?? []),
      );
    };
    for (const [code, spec] of Object.entries(API_ERRORS)) {
      // The routes that erase, by the names the contract fixes, wherever the document has them.
      const erasing = [doc.paths['/users']?.delete, doc.paths['/erasures']?.post].filter(Boolean);
      const operations =
        spec.scope === 'users'
          ? [doc.paths['/users'].post]
          : spec.scope === 'any'
            ? Object.values(doc.paths).map((p) => Object.values(p)[0])
            : spec.scope === 'erase'
              ? erasing
              : [];
      const places =
        spec.scope === 'unrouted' ? [doc.components.responses] : operations.map((o) => o.responses);
      const unrouted =
        spec.scope === 'unrouted'
          ? spec.status === 405
            ? doc.components.responses.MethodNotAllowed
            : doc.components.responses.NotFound
          : undefined;
      for (const responses of places) {
        const documented = unrouted
          ? codesAt({ [spec.status]: unrouted }, spec.status)
          : codesAt(responses, spec.status);
        assert.ok(documented.includes(code), `${code} (${spec.status}) is documented`);
      }
      for (const header of Object.keys('headers' in spec ? spec.headers : {})) {
        assert.equal(
          doc.paths['/users'].post.responses[spec.status].headers?.[header]?.required,
          true,
          `${code} documents ${header}`,
        );
      }
    }
  });
});

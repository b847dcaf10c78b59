import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { API_ERRORS } from '../../src/errors.js';
import { createOpenApiDocument } from '../../src/openapi.js';
import { DELETE_USERS_ERRORS, POST_ERASURES_ERRORS } from '../../src/openapi-erasures.js';
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
      '/erasures',
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
    assert.deepEqual(Object.keys(doc.paths['/users']).sort(), ['delete', 'post']);
  });

  test("the routes that erase: PostgREST's answers to a delete, the bulk form's counts", () => {
    const del = /** @type {any} */ (doc.paths['/users'].delete);
    assert.equal(del.responses[204].content, undefined, '204: no body');
    assert.deepEqual(del.responses[200].content['application/json'].schema, {
      type: 'array',
      items: { $ref: '#/components/schemas/UserRow' },
    });
    assert.ok(del.responses[204].headers['Content-Range']);
    assert.equal(del.parameters.find((/** @type {any} */ p) => p.name === 'email').required, true);
    const post = /** @type {any} */ (doc.paths['/erasures'].post);
    const body = post.requestBody.content['application/json'].schema;
    assert.equal(body.maxItems, 10_000);
    const erasure = /** @type {any} */ (doc.components.schemas.Erasure);
    assert.deepEqual(Object.keys(erasure.properties), ['email', 'changedAt']);
    assert.equal(erasure.properties.email.pattern, userSchema.properties.email.pattern);
    assert.deepEqual(/** @type {any} */ (doc.components.schemas.ErasureResult).required, [
      'received',
      'erased',
      'absent',
    ]);
    const allow = /** @type {any} */ (doc.components.responses.MethodNotAllowed).headers.Allow;
    assert.equal(allow.required, true);
    assert.ok(allow.schema.enum.includes('POST, DELETE'));
    assert.ok(doc.paths['/users'].post.responses[200].headers['Users-Erased']);
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
      // The routes that erase document what each can answer: the filter's codes on DELETE only.
      const erasing = [
        ...(DELETE_USERS_ERRORS.includes(/** @type {any} */ (code))
          ? [doc.paths['/users'].delete]
          : []),
        ...(POST_ERASURES_ERRORS.includes(/** @type {any} */ (code))
          ? [doc.paths['/erasures'].post]
          : []),
      ];
      if (spec.scope === 'erase')
        assert.ok(erasing.length > 0, `${code} is on a route that erases`);
      const operations =
        spec.scope === 'users'
          ? [doc.paths['/users'].post, ...erasing]
          : spec.scope === 'any'
            ? Object.values(doc.paths).flatMap((p) => Object.values(p))
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
        for (const responses of places)
          assert.equal(
            responses[spec.status].headers?.[header]?.required,
            true,
            `${code} documents ${header}`,
          );
      }
    }
  });
});

import assert from 'node:assert/strict';
import { Ajv2020 } from 'ajv/dist/2020.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** @param {string} s  a JSON pointer token */
const pointer = (s) => s.replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * @typedef {object} Answer
 * @property {number} status
 * @property {Headers | Record<string, string>} headers  fetch's Headers, or lower-cased names (a raw exchange)
 * @property {unknown} body  the parsed JSON body (undefined or '' when there is none)
 */

/**
 * Checks answers against the document's own response schemas, compiled by ajv (JSON Schema
 * 2020-12, the dialect of OpenAPI 3.1), $refs into components included: the status must be listed
 * for the operation (a method and path the document does not have: components.responses.NotFound, or MethodNotAllowed for a 405), the
 * required headers present, and the body valid (or absent, where the document gives it no content).
 * @param {any} doc  the OpenAPI document
 */
export function responseChecker(doc) {
  const ajv = new Ajv2020({ strict: false, allErrors: true, formats: { uuid: UUID } });
  const id = 'https://sluice.test/openapi.json';
  ajv.addSchema({ $id: id, paths: doc.paths, components: doc.components });
  /**
   * @param {string} method  lower case
   * @param {string} path
   * @param {Answer} res
   */
  return (method, path, res) => {
    const operation = doc.paths[path]?.[method];
    const unrouted = res.status === 405 ? 'MethodNotAllowed' : 'NotFound';
    const where = operation
      ? `#/paths/${pointer(path)}/${method}/responses/${res.status}`
      : `#/components/responses/${unrouted}`;
    const documented = operation
      ? operation.responses[res.status]
      : (res.status === 404 || res.status === 405) && doc.components.responses[unrouted];
    assert.ok(
      documented,
      `${method.toUpperCase()} ${path} answered ${res.status}, which the document does not list`,
    );
    const header = (/** @type {string} */ name) =>
      res.headers instanceof Headers ? res.headers.get(name) : res.headers[name.toLowerCase()];
    for (const [name, spec] of Object.entries(documented.headers ?? {})) {
      const { required, schema } = /** @type {any} */ (spec);
      const value = header(name);
      if (required) assert.ok(value, `${res.status} carries ${name}`);
      // A header's value is text: a string schema (a pattern, an enum) is checked as it stands.
      if (value && schema?.type === 'string')
        assert.ok(ajv.validate(schema, value), `${name}: ${value} matches the document`);
    }
    // An answer documented without content (a 204) has none.
    if (!documented.content) {
      assert.ok(res.body === undefined || res.body === '', `${res.status} has no body`);
      return;
    }
    assert.match(header('content-type') ?? '', /^application\/json/);
    const validate = ajv.getSchema(`${id}${where}/content/application~1json/schema`);
    assert.ok(validate, `a schema for ${method.toUpperCase()} ${path} ${res.status}`);
    assert.ok(
      validate(res.body),
      `${res.status} ${JSON.stringify(res.body)} matches the document: ${ajv.errorsText(validate.errors)}`,
    );
  };
}

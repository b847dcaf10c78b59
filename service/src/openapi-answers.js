import { API_ERRORS } from './errors.js';

// The parts every operation of the OpenAPI document answers with: JSON media types with their
// examples, and the error answers of a set of codes, from the catalogue (errors.js).

/** @typedef {import('./errors.js').ApiErrorCode} ApiErrorCode */

/** @param {string} code */
const specOf = (code) =>
  /** @type {import('./errors.js').ApiErrorSpec} */ (
    API_ERRORS[/** @type {keyof typeof API_ERRORS} */ (code)]
  );

/**
 * An error body whose `error` is one of `codes`, with PostgREST's `code`, `details` and `hint`
 * beside sluice's fields; `extra`: more required properties.
 */
export const errorBody = (/** @type {string[]} */ codes, extra = {}) => ({
  type: 'object',
  required: ['error', 'message', 'code', 'details', 'hint', ...Object.keys(extra)],
  additionalProperties: false,
  properties: {
    error: { type: 'string', enum: codes, description: "sluice's code." },
    message: { type: 'string' },
    code: {
      type: 'string',
      enum: [...new Set(codes.map((c) => specOf(c).pgrst))],
      description:
        "PostgREST's code for the same refusal: PGRST... for its " +
        "own, a SQLSTATE for the database's (docs/api.md maps each).",
    },
    details: {
      type: ['string', 'null'],
      description: "More about this case (PostgREST's `details`), or null.",
    },
    hint: {
      type: ['string', 'null'],
      description: "What to do about it (PostgREST's `hint`), or null.",
    },
    ...extra,
  },
});

/**
 * The body of an error code as the error handler sends it with the catalogue's message.
 * @param {string} code
 * @param {Record<string, unknown>} [fields] the message, details and more of a case
 */
export const errorExample = (code, fields = {}) => ({
  error: code,
  message: specOf(code).message,
  code: specOf(code).pgrst,
  details: null,
  hint: specOf(code).hint ?? null,
  ...fields,
});

/**
 * A JSON media type with named examples, each a plain value or an OpenAPI Example Object ({ value,
 * description }) when it says which request it answers.
 * @param {object} schema
 * @param {Record<string, unknown>} examples
 */
export const json = (schema, examples) => ({
  'application/json': {
    schema,
    examples: Object.fromEntries(
      Object.entries(examples).map(([name, e]) => [
        name,
        e instanceof Example ? { description: e.description, value: e.value } : { value: e },
      ]),
    ),
  },
});

export class Example {
  /** @param {unknown} value @param {string} description */
  constructor(value, description) {
    this.value = value;
    this.description = description;
  }
}

const HEADER_SCHEMAS = {
  'Retry-After': {
    description: 'Seconds to wait before retrying.',
    schema: { type: 'integer', minimum: 1 },
  },
  'RateLimit-Policy': {
    description:
      "The client's rate (IETF httpapi RateLimit header fields): a " +
      'quota of `q` users refilled over `w` seconds, its burst and rate.',
    schema: { type: 'string', examples: ['"users";q=5000;w=1'] },
  },
  RateLimit: {
    description:
      "The client's quota now (IETF httpapi RateLimit header " +
      'fields): `r` users left, `t` seconds until it is full again.',
    schema: { type: 'string', examples: ['"users";r=0;t=1'] },
  },
  'WWW-Authenticate': {
    description:
      'The scheme, and the RFC 6750 error code when credentials ' +
      'were sent: `invalid_request` for a malformed header, ' +
      '`invalid_token` for a token that is not valid.',
    schema: {
      type: 'string',
      enum: ['Bearer', 'Bearer error="invalid_request"', 'Bearer error="invalid_token"'],
    },
  },
};

/**
 * The codes of the catalogue in these scopes, in its order.
 * @param {import('./errors.js').ErrorScope[]} scopes @returns {ApiErrorCode[]}
 */
export const codesIn = (scopes) =>
  /** @type {ApiErrorCode[]} */ (Object.keys(API_ERRORS)).filter((code) =>
    scopes.includes(specOf(code).scope),
  );

/**
 * The error answers of an operation, from the catalogue (errors.js): by status, every code its
 * scopes can answer, described by what gets it, with the headers the catalogue sends.
 * @param {import('./errors.js').ErrorScope[]} scopes
 * @param {Record<number, Record<string, unknown>>} [examples] more examples by status
 *   (docs/api.md's)
 */
export const errorResponses = (scopes, examples = {}) =>
  errorResponsesOf(codesIn(scopes), examples);

/**
 * The error answers of these codes (an operation that answers some codes of a scope, not all).
 * @param {readonly ApiErrorCode[]} wanted
 * @param {Record<number, Record<string, unknown>>} [examples] more examples by status
 */
export function errorResponsesOf(wanted, examples = {}) {
  /** @type {Map<number, [string, import('./errors.js').ApiErrorSpec][]>} */
  const byStatusCode = new Map();
  for (const [code, spec] of Object.entries(API_ERRORS)) {
    if (!wanted.includes(/** @type {ApiErrorCode} */ (code))) continue;
    byStatusCode.set(spec.status, [...(byStatusCode.get(spec.status) ?? []), [code, spec]]);
  }
  return Object.fromEntries(
    [...byStatusCode.entries()]
      .sort(([a], [b]) => a - b)
      .map(([status, codes]) => {
        const names = codes.map(([code]) => code);
        const headerNames = [
          ...new Set(codes.flatMap(([, spec]) => Object.keys(spec.headers ?? {}))),
        ];
        const plain = names.filter((c) => c !== 'invalid_batch' && c !== 'internal');
        /** @type {object[]} */
        const schemas = [];
        if (names.includes('invalid_batch'))
          schemas.push({ $ref: '#/components/schemas/InvalidBatch' });
        if (names.includes('internal'))
          schemas.push(errorBody(['internal'], { errorId: { type: 'string', format: 'uuid' } }));
        if (plain.length) schemas.push(errorBody(plain));
        return [
          status,
          {
            description: codes.map(([code, spec]) => `\`${code}\`: ${spec.when}`).join(' '),
            ...(headerNames.length
              ? {
                  headers: Object.fromEntries(
                    headerNames.map((h) => [
                      h,
                      {
                        required: codes.every(([, spec]) => h in (spec.headers ?? {})),
                        .../** @type {Record<string, object>} */ (HEADER_SCHEMAS)[h],
                      },
                    ]),
                  ),
                }
              : {}),
            content: json(schemas.length === 1 ? schemas[0] : { oneOf: schemas }, {
              ...Object.fromEntries(
                codes
                  .filter(([code]) => code !== 'invalid_batch')
                  .map(([code]) => [
                    code,
                    code === 'internal'
                      ? { ...errorExample(code), errorId: '0f8e4c1a-3b5d-4e2f-9a7c-6d1b2e3f4a5b' }
                      : errorExample(code),
                  ]),
              ),
              ...examples[status],
            }),
          },
        ];
      }),
  );
}

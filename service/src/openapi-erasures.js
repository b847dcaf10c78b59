import { inCode } from './errors.js';
import { READ_COLUMNS } from './http/write-query.js';
import { Example, codesIn, errorResponsesOf, json } from './openapi-answers.js';
import { KEY_COLUMN, ORDER_COLUMN, SECRET_FIELDS } from './user-columns.js';
import { userSchema } from './users/user-schema.js';

// The routes that erase, in the OpenAPI document: PostgREST's DELETE on /users and the bulk form,
// POST /erasures. Each lists the codes it can answer: those of the routes that erase, of any
// route, and the write's own that its steps share (credentials, rates, the body, the database).

/** @typedef {import('./errors.js').ApiErrorCode} ApiErrorCode */

const KEY = KEY_COLUMN.field;
const ORDER = ORDER_COLUMN.field;

/** What both routes may answer of a write's: credentials, rates, the database. */
const SHARED = /** @type {ApiErrorCode[]} */ ([
  'unauthorized',
  'duplicate_header',
  'too_many_items',
  'rate_limited',
  'statement_pooling',
  'database_unavailable',
  'lock_timeout',
  'statement_timeout',
  'outcome_unknown',
  'erasure_key_missing',
]);

/** DELETE /users: its filter (the routes that erase), `?select` and `Prefer`. */
export const DELETE_USERS_ERRORS = /** @type {readonly ApiErrorCode[]} */ ([
  ...codesIn(['erase', 'any']),
  ...SHARED,
  'unknown_column',
  'unsupported_conflict_target',
  'unsupported_query',
  'unsupported_preference',
]);

/** POST /erasures: the right to erase, its key, then a body read as a JSON write's. */
export const POST_ERASURES_ERRORS = /** @type {readonly ApiErrorCode[]} */ ([
  ...codesIn(['any']),
  'forbidden',
  ...SHARED,
  'invalid_batch',
  'not_an_array',
  'empty_batch',
  'malformed_json',
  'invalid_utf8',
  'duplicate_key',
  'malformed_encoding',
  'body_timeout',
  'payload_too_large',
  'unsupported_media_type',
  'unsupported_charset',
  'unsupported_encoding',
  'unsupported_transfer_encoding',
  'overloaded',
  'malformed_idempotency_key',
  'idempotency_key_in_flight',
  'idempotency_key_reused',
]);

const WHO_MAY =
  'A client erases only when its credentials grant it (`"erase": true` beside its token in ' +
  'INGEST_TOKENS, INGEST_TOKEN, a JWT whose role is one of JWT_ERASE_ROLES), else 403 ' +
  '`forbidden`; without credentials configured anyone may. ';
const EVERY_COPY =
  'Each email is erased everywhere sluice keeps it, in one transaction, all or nothing: its ' +
  'row, the items set aside (`Prefer: invalid=quarantine`) holding it, and its rows in ' +
  'the answers stored under an `Idempotency-Key` (a replay then says `Users-Erased`). A ' +
  'tombstone of the email is kept (keyed hashes of it under ERASURE_KEY, and when ' +
  'it was erased), so that no replay of an older write brings it back: a later write of the ' +
  `email is stored only when its \`${ORDER}\` is newer than the erasure, else counted ` +
  '`stale`. An email not stored is tombstoned too. ';

const contentRange = {
  description: 'With `Prefer: count=exact` (or `planned`, `estimated`): `*/` and the users erased.',
  schema: { type: 'string', pattern: '^\\*/[0-9]+$' },
};

const ERASED_EXAMPLE = new Example(
  [
    {
      email: 'ada@example.com',
      name: 'Ada Lovelace',
      phone: null,
      createdAt: '2026-11-24T17:22:07.123456+00:00',
      updatedAt: null,
    },
  ],
  'The answer to `DELETE /users?email=eq.ada@example.com` with `Prefer: return=representation`.',
);

/** @param {{ maxBatchItems: number }} limits */
export function deleteUsersOperation({ maxBatchItems }) {
  return {
    operationId: 'deleteUsers',
    tags: ['erasure'],
    summary: 'Erase users by email, as PostgREST deletes',
    description:
      "PostgREST's delete, as postgrest-js sends it (`.delete().eq('email', x)`, " +
      "`.in('email', [...])`), for 1 to " +
      `${maxBatchItems} emails (MAX_BATCH_ITEMS). ${EVERY_COPY}` +
      `Only \`${KEY}=eq.X\` and \`${KEY}=in.(X,Y)\` are served: no filter is 400 ` +
      '`missing_filter`, any other filter 400 `unsupported_filter`; nothing is erased. ' +
      WHO_MAY,
    security: [{ bearer: [] }, {}],
    parameters: deleteUsersParameters(),
    responses: {
      200: {
        description:
          'With `Prefer: return=representation`: the rows erased, as they were stored ' +
          '(the columns of `?select`), in no particular order; an email that was not ' +
          'stored is not in it.',
        headers: { 'Content-Range': contentRange },
        content: json(
          { type: 'array', items: { $ref: '#/components/schemas/UserRow' } },
          { erased: ERASED_EXAMPLE },
        ),
      },
      204: {
        description:
          'Erased (and tombstoned, the emails that were not stored too). No body, ' +
          'as PostgREST answers a delete without `return=representation`.',
        headers: { 'Content-Range': contentRange },
      },
      ...errorResponsesOf(DELETE_USERS_ERRORS),
    },
  };
}

/** The filter, the representation's columns and PostgREST's preferences. */
function deleteUsersParameters() {
  return [
    {
      name: KEY,
      in: 'query',
      required: true,
      description:
        `The users to erase, as PostgREST filters: \`eq.X\` (one email) or \`in.(X,Y)\` ` +
        '(a list: a value holding a comma, a parenthesis or a double quote in double ' +
        'quotes, `\\` escaping within them). Each must be a plausible email; it is ' +
        'matched lower-cased, as stored. Given once.',
      schema: { type: 'string' },
      examples: {
        one: { value: 'eq.ada@example.com' },
        several: { value: 'in.(ada@example.com,grace@example.com)' },
      },
    },
    {
      name: 'select',
      in: 'query',
      required: false,
      description:
        'The columns of a `return=representation` answer, in this order: `*` (all) or a ' +
        `comma-separated list of ${READ_COLUMNS.join(', ')}; never ${inCode(SECRET_FIELDS)}. ` +
        'Without `return=representation` it changes nothing.',
      schema: { type: 'string' },
      example: 'email,name',
    },
    {
      name: 'Prefer',
      in: 'header',
      required: false,
      description:
        "RFC 7240, PostgREST's vocabulary: `return=representation` answers 200 and the " +
        'rows erased; `return=minimal`, `headers-only` or none, 204 and no body. ' +
        '`count=exact` (`planned`, `estimated`): `Content-Range: */<users erased>`. ' +
        'Others are ignored, unless `handling=strict`.',
      schema: { type: 'string' },
      examples: { postgrest: { value: 'return=representation, count=exact' } },
    },
  ];
}

/** @param {{ maxBatchItems: number, maxBodyBytes: number }} limits */
export function postErasuresOperation({ maxBatchItems, maxBodyBytes }) {
  return {
    operationId: 'postErasures',
    tags: ['erasure'],
    summary: 'Erase many users at once, each at the time it was erased at its source',
    description:
      `A JSON array, or NDJSON (an erasure a line), of 1 to ${maxBatchItems} erasures ` +
      `(MAX_BATCH_ITEMS), at most ${maxBodyBytes} bytes decoded (MAX_BODY_BYTES; gzip, ` +
      `deflate, br or zstd \`Content-Encoding\` accepted). ${EVERY_COPY}Each tombstone is ` +
      `at the item's \`${ORDER}\` (when the erasure happened at its source), or at the ` +
      'time of the request; an email erased again keeps the later time. An erasure sent ' +
      'again erases nothing more, its emails answered `absent`; with the same ' +
      '`Idempotency-Key`, it gets the first answer again. ' +
      WHO_MAY,
    security: [{ bearer: [] }, {}],
    parameters: [ERASURE_KEY_HEADER],
    requestBody: { required: true, content: erasuresBodies(maxBatchItems) },
    responses: {
      200: {
        description: 'Erased; the counts (on a replay under an `Idempotency-Key`, the first).',
        headers: {
          'Idempotent-Replayed': {
            description: "On a replay only: the first erasure's counts; nothing was erased now.",
            schema: { type: 'string', const: 'true' },
          },
        },
        content: json(
          { $ref: '#/components/schemas/ErasureResult' },
          {
            counts: new Example(
              { received: 2, erased: 1, absent: 1 },
              'The answer to the `two` example when only `ada@example.com` was stored.',
            ),
          },
        ),
      },
      ...errorResponsesOf(POST_ERASURES_ERRORS),
    },
  };
}

const ERASURE_KEY_HEADER = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    "As on `POST /users`: a retry under the key gets the first erasure's counts again " +
    '(`Idempotent-Replayed: true`) and erases nothing; another body under it is 422 ' +
    '`idempotency_key_reused`, the first still in flight 409 ' +
    "`idempotency_key_in_flight`. An erasure's key is never a write's.",
  schema: { type: 'string', maxLength: 257 },
  example: '"erasure-2026-12-03-0001"',
};

/**
 * POST /erasures's bodies: a JSON array, or NDJSON (OpenAPI 3.1 can name its media types, not type
 * their lines). @param {number} maxBatchItems
 */
function erasuresBodies(maxBatchItems) {
  const array = {
    type: 'array',
    minItems: 1,
    maxItems: maxBatchItems,
    items: { $ref: '#/components/schemas/Erasure' },
  };
  const two = [
    { [KEY]: 'ada@example.com' },
    { [KEY]: 'grace@example.com', [ORDER]: '2026-06-01T09:30:00Z' },
  ];
  const ndjson = {
    schema: { type: 'string', description: 'One Erasure object (the Erasure schema) a line.' },
    examples: {
      two: {
        value: two.map((item) => `${JSON.stringify(item)}\n`).join(''),
      },
    },
  };
  return {
    ...json(array, { two }),
    'application/x-ndjson': ndjson,
    'application/jsonl': ndjson,
  };
}

/** The schemas of the erasures: an item of POST /erasures and its answer. */
export function erasureSchemas() {
  const fields = /** @type {Record<string, object>} */ (userSchema.properties);
  return {
    Erasure: {
      type: 'object',
      required: [KEY],
      additionalProperties: false,
      description: 'One user to erase. Any other field is refused (400 `invalid_batch`).',
      properties: {
        [KEY]: {
          ...fields[KEY],
          description: 'The email to erase, matched lower-cased as stored.',
        },
        [ORDER]: {
          ...fields[ORDER],
          description:
            'When the user was erased at the source (RFC 3339 with an offset, to the ' +
            'microsecond), as a write says when its change happened: a write of the email ' +
            'is stored again only with a newer one. Without it: the time of the request.',
        },
      },
    },
    ErasureResult: {
      type: 'object',
      required: ['received', 'erased', 'absent'],
      additionalProperties: false,
      properties: {
        received: { type: 'integer', minimum: 1, description: 'Erasures in the request.' },
        erased: {
          type: 'integer',
          minimum: 0,
          description: 'Users that were stored, now erased (`sluice_users_erased_total`).',
        },
        absent: {
          type: 'integer',
          minimum: 0,
          description:
            'Emails that were not stored: tombstoned all the same, so that a late write ' +
            'does not create them. An email sent twice counts once in `erased` or `absent`.',
        },
      },
    },
  };
}

import { createRequire } from 'node:module';
import { emptyBatchMessage, inCode, inCodeSentence, itemErrorsAsDetails } from './errors.js';
import { READ_COLUMNS, WRITE_COLUMNS } from './http/write-query.js';
import { Example, errorBody, errorExample, errorResponses, json } from './openapi-answers.js';
import { deleteUsersOperation, erasureSchemas, postErasuresOperation } from './openapi-erasures.js';
import {
  KEY_COLUMN,
  ORDER_COLUMN,
  REQUIRED_FIELDS,
  SECRET_FIELDS,
  USER_COLUMNS,
  isOneOf,
} from './user-columns.js';
import { MAX_REPORTED_ERRORS, MESSAGES, UNKNOWN_FIELD, userSchema } from './users/user-schema.js';

const { version } = createRequire(import.meta.url)('../package.json');

// What a field means to a sender (its `description`) and in a representation (`shownAs`) come
// from the columns' declaration; the rules themselves from the schema ajv compiles.
const SHOWN_COLUMNS = USER_COLUMNS.filter((c) => c.shown === true);
/** A column as a representation holds it: a string, null where none was sent or stored. */
const shownProperties = () =>
  Object.fromEntries(
    SHOWN_COLUMNS.map((c) => [
      c.field,
      {
        type: c.required ? 'string' : ['string', 'null'],
        ...('shownAs' in c ? { description: c.shownAs } : {}),
      },
    ]),
  );
const preferenceApplied = {
  description:
    "The preferences of `Prefer` that were honoured, in PostgREST's " +
    'order: `resolution`, `return`, `count`, `handling`.',
  schema: {
    type: 'string',
    examples: [
      'resolution=merge-duplicates',
      'resolution=ignore-duplicates, return=representation, count=exact',
    ],
  },
};
const contentRange = {
  description:
    'With `Prefer: count=exact` (or `planned`, `estimated`: a write ' +
    'knows its exact count): `*/` and the rows inserted or updated.',
  schema: { type: 'string', pattern: '^\\*/[0-9]+$' },
};
const idempotentReplayed = {
  description:
    'On a replay only: this is the stored answer of the first request sent with ' +
    'the same `Idempotency-Key` (and the same body, content type, `Prefer` and ' +
    'query), repeated byte for byte (but for the rows of users erased since: ' +
    '`Users-Erased`); nothing was written by this request.',
  schema: { type: 'string', const: 'true' },
};
const quarantineRequestId = {
  description:
    'With `Prefer: invalid=quarantine`, when an item was set aside: the id ' +
    "(made by the service, not the client's `X-Request-Id`) its items are kept " +
    'under, to export them (`npm run quarantine -- export --request <id>`).',
  schema: { type: 'string' },
};
const usersErased = {
  description:
    'On a replay of a `return=representation` answer only, when users it held were ' +
    'erased since (`DELETE /users`, `POST /erasures`): how many. Their rows are left ' +
    'out of the body; its status and other headers are as first answered.',
  schema: { type: 'string', pattern: '^[1-9][0-9]*$' },
};
const writeHeaders = {
  'Preference-Applied': preferenceApplied,
  'Content-Range': contentRange,
  'Idempotent-Replayed': idempotentReplayed,
  'Users-Erased': usersErased,
  'Quarantine-Request-Id': quarantineRequestId,
};

const INVALID_ERRORS = [
  { index: 0, field: 'email', message: MESSAGES.email.pattern },
  { index: 1, field: 'name', message: 'is required' },
  { index: 1, field: 'nome', message: UNKNOWN_FIELD },
];

/**
 * The examples of POST /users in docs/api.md: each request with the status and body it gets on an
 * empty table, under a MAX_BATCH_ITEMS of `maxBatchItems`. The test sends every one to the real
 * service and checks the answers.
 * @param {number} maxBatchItems
 */
export const postUsersExamples = (maxBatchItems) => ({
  new: {
    request: [{ email: 'new@example.com', name: 'New' }],
    status: 201,
    response: { received: 1, inserted: 1, updated: 0, duplicates: 0 },
  },
  duplicate: {
    request: [{ email: 'NEW@example.com', name: 'New' }],
    status: 200,
    response: { received: 1, inserted: 0, updated: 0, duplicates: 1 },
  },
  merged: {
    request: [{ email: 'new@example.com', name: 'Renamed' }],
    prefer: 'resolution=merge-duplicates',
    status: 200,
    response: { received: 1, inserted: 0, updated: 1, stale: 0, duplicates: 1 },
  },
  invalid: {
    request: [
      { email: 'x', name: 'X' },
      { email: 'y@example.com', nome: 'Y' },
    ],
    status: 400,
    response: errorExample('invalid_batch', {
      message: '2 of 2 users are invalid; nothing was written',
      errors: INVALID_ERRORS,
      details: itemErrorsAsDetails(INVALID_ERRORS),
    }),
  },
  notAnArray: { request: { email: 'a@b.co' }, status: 400, response: errorExample('not_an_array') },
  empty: {
    request: [],
    status: 400,
    response: errorExample('empty_batch', { message: emptyBatchMessage(maxBatchItems) }),
  },
});

const REPRESENTATION_EXAMPLE = new Example(
  [
    {
      email: 'ada@example.com',
      name: 'Ada Lovelace',
      phone: null,
      createdAt: '2026-11-24T17:22:07.123456+00:00',
      updatedAt: null,
    },
  ],
  'The answer to `[{"email":"Ada@example.com","name":"Ada ' +
    'Lovelace"}]` with `Prefer: return=representation`.',
);

// The answers of one status, each described by the request that gets it.
const byStatus = (/** @type {number} */ status, /** @type {number} */ maxBatchItems) =>
  Object.fromEntries(
    Object.entries(postUsersExamples(maxBatchItems))
      .filter(([, e]) => e.status === status)
      .map(([name, e]) => [
        name,
        new Example(
          e.response,
          `The answer to ` +
            `\`${JSON.stringify(e.request)}\`${name === 'duplicate' ? ' after `new`' : ''}.`,
        ),
      ]),
  );
// Only the valid requests are request examples: a request example must match the request schema.
const validRequests = (/** @type {number} */ maxBatchItems) =>
  Object.fromEntries(
    Object.entries(postUsersExamples(maxBatchItems))
      .filter(([, e]) => e.status < 300)
      .map(([name, e]) => [name, e.request]),
  );

/**
 * The OpenAPI 3.1 document of the service. The user object is the schema ajv validates with, so
 * the document cannot drift from the rules; the limits are this process's configuration.
 *
 * @param {{ maxBatchItems: number, maxBodyBytes: number, maxStreamBytes?: number }} config
 */
export function createOpenApiDocument({
  maxBatchItems,
  maxBodyBytes,
  maxStreamBytes = 1024 * 1024 * 1024,
}) {
  return {
    openapi: '3.1.0',
    info: {
      title: 'sluice',
      version,
      summary: 'Batch ingestion of users over HTTP into PostgreSQL.',
      description:
        'POST /users writes a JSON array of users, or a stream of them (NDJSON, ' +
        'CSV) of any size, in one transaction, all or nothing; DELETE /users and ' +
        'POST /erasures erase users, every copy, and keep them from coming back. Every response ' +
        'carries `X-Request-Id` (a sane one sent by the client is kept).',
      license: { name: 'UNLICENSED', identifier: 'UNLICENSED' },
    },
    // Relative: the server that serves this document, wherever it is deployed.
    servers: [{ url: '/', description: 'the server that serves this document' }],
    tags: [
      { name: 'users', description: 'Ingestion.' },
      {
        name: 'erasure',
        description: 'Erasing users: every copy sluice keeps, and a tombstone against replays.',
      },
      { name: 'operations', description: 'Health, readiness, metrics and this document.' },
    ],
    paths: {
      '/users': {
        post: postUsersOperation({ maxBatchItems, maxBodyBytes, maxStreamBytes }),
        delete: deleteUsersOperation({ maxBatchItems }),
      },
      '/erasures': { post: postErasuresOperation({ maxBatchItems, maxBodyBytes }) },
      ...operationsPaths(),
    },
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description:
            "A client's static token (INGEST_TOKEN, INGEST_TOKENS: compared " +
            'in constant time), or a JWT (JWT_SECRET for HS256, JWT_JWKS_URL ' +
            'for asymmetric keys) whose role claim grants writing.',
        },
      },
      schemas: { ...schemas(), ...erasureSchemas() },
      // A method and path this API does not serve: no operation to hang it on.
      responses: {
        NotFound: errorResponses(['unrouted'])[404],
        MethodNotAllowed: methodNotAllowed(),
      },
    },
  };
}

/** The 405 of a path served, with the methods it serves. */
function methodNotAllowed() {
  return {
    ...errorResponses(['unrouted'])[405],
    headers: {
      Allow: {
        required: true,
        description:
          'The methods the path serves: `POST, DELETE` on `/users`, `POST` on `/erasures`.',
        schema: { type: 'string', enum: ['POST, DELETE', 'POST'] },
      },
    },
  };
}

/**
 * POST /users: the limits are this process's configuration.
 * @param {{ maxBatchItems: number, maxBodyBytes: number, maxStreamBytes: number }} limits
 */
function postUsersOperation({ maxBatchItems, maxBodyBytes, maxStreamBytes }) {
  return {
    operationId: 'postUsers',
    tags: ['users'],
    summary: 'Write a batch of users, all or nothing',
    description:
      `A JSON array of 1 to ${maxBatchItems} users (MAX_BATCH_ITEMS), ` +
      `at most ${maxBodyBytes} bytes decoded (MAX_BODY_BYTES); ` +
      'UTF-8 JSON only, gzip, deflate, br or zstd `Content-Encoding` accepted ' +
      '(the limits apply decoded). The whole array is written in one transaction; ' +
      'emails already stored are skipped, or updated when `Prefer: ' +
      'resolution=merge-duplicates` asks. A bearer token (a static token ' +
      'of a client, or a JWT) is required only when the service runs with ' +
      'authentication configured (INGEST_TOKEN, INGEST_TOKENS, JWT_SECRET ' +
      'or JWT_JWKS_URL); an `apikey` header (supabase-js) is ignored. ' +
      `Or a stream of users, as many as fit in ${maxStreamBytes} bytes ` +
      `decoded (MAX_STREAM_BYTES): \`application/x-ndjson\` or ` +
      `\`application/jsonl\` (one user object a line) ` +
      `or \`text/csv\` (RFC 4180, a header row naming ` +
      `the columns ${WRITE_COLUMNS.join(', ')}). A ` +
      `stream is validated and written as it arrives, ` +
      'in one transaction: all or nothing, whatever its size; each error names ' +
      "the user's `line`. An email sent twice in one body is written once " +
      '(the first occurrence, or in merge mode its newest change: by ' +
      '`changedAt`, items without one oldest, a tie going to the later line).',
    security: [{ bearer: [] }, {}],
    parameters: postUsersParameters(),
    requestBody: {
      required: true,
      content: {
        ...json(
          {
            type: 'array',
            minItems: 1,
            maxItems: maxBatchItems,
            items: { $ref: '#/components/schemas/User' },
          },
          validRequests(maxBatchItems),
        ),
        ...streamedBodies(),
      },
    },
    responses: {
      201: {
        description:
          'At least one user was inserted. The counts; with `Prefer: return=representation` ' +
          'the rows written; with `return=minimal` or `headers-only` no body.',
        headers: writeHeaders,
        content: json(
          {
            oneOf: [
              { $ref: '#/components/schemas/BatchResult' },
              { $ref: '#/components/schemas/Representation' },
            ],
          },
          { ...byStatus(201, maxBatchItems), representation: REPRESENTATION_EXAMPLE },
        ),
      },
      200: {
        description:
          'No user was inserted: every one was already stored ' +
          '(skipped, or updated in merge mode). The body as for 201.',
        headers: writeHeaders,
        content: json(
          {
            oneOf: [
              { $ref: '#/components/schemas/BatchResult' },
              { $ref: '#/components/schemas/Representation' },
            ],
          },
          byStatus(200, maxBatchItems),
        ),
      },
      ...errorResponses(['users', 'any'], { 400: byStatus(400, maxBatchItems) }),
    },
  };
}

/** The fields a merge combines as `merge` says. @param {'newest' | 'kept'} merge */
const mergedAs = (merge) => USER_COLUMNS.filter((c) => c.merge === merge).map((c) => c.field);
/** `a, b and c`. @param {readonly string[]} names */
const plainSentence = (names) => inCodeSentence(names).replaceAll('`', '');

/** POST /users's parameters: PostgREST's Prefer header and query parameters. */
function postUsersParameters() {
  return [
    {
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description:
        "The IETF httpapi draft's key: a Structured Field string (RFC 8941) of 1 to " +
        '255 visible ASCII characters, unique per request of its client (a UUID). ' +
        "The request's answer is stored with its rows, in the same transaction, under the " +
        "key and the request's fingerprint (its body, `Content-Type`, `Prefer` and query). " +
        'A request sent again with the key gets that answer again, byte ' +
        'for byte, with `Idempotent-Replayed: true`, and writes nothing; ' +
        'with another fingerprint it is `422 idempotency_key_reused`; ' +
        'while the first is still being written it waits for it (at most ' +
        'DB_LOCK_TIMEOUT_MS), then `409 idempotency_key_in_flight`. Keys are scoped by ' +
        "client (the credential's name, the JWT's client claim, or one anonymous client) " +
        'and kept IDEMPOTENCY_KEY_TTL_SECONDS (24 hours by default), then forgotten. ' +
        'A malformed key is `400 malformed_idempotency_key`. Only an answer of a ' +
        'write (200, 201) is stored: a refused request may be sent again with its key.',
      schema: { type: 'string', maxLength: 257 },
      example: '"8e03978e-40d5-43e8-bc93-6894a57f9324"',
    },
    {
      name: 'Prefer',
      in: 'header',
      required: false,
      description:
        "RFC 7240, PostgREST's vocabulary; several preferences in " +
        'one header or several headers, the first of a name counts. ' +
        `\`resolution=merge-duplicates\`: a stored email takes the ` +
        `sent ${inCodeSentence(mergedAs('newest'))}, and the ` +
        `sent ${inCodeSentence(mergedAs('kept'))} where the user has them; ` +
        `a row that would not change is not written, nor one whose stored ` +
        `\`${ORDER_COLUMN.field}\` is as new as the sent one or newer (counted ` +
        `in \`stale\`). \`resolution=ignore-duplicates\`, or none: a stored ` +
        `email is skipped; another value is 400 \`unsupported_preference\`. ` +
        '`return=representation`: the answer is the rows inserted or updated, as ' +
        'stored, in the order sent (`UserRow`; emails skipped are not in it); ' +
        '`return=minimal` or `return=headers-only`: no ' +
        'body; no `return`: the counts (`BatchResult`). ' +
        '`count=exact` (`planned`, `estimated`: the same exact ' +
        'count): `Content-Range: */<rows inserted or updated>`. ' +
        "`invalid=quarantine` (sluice's own; parameter `max-invalid=N`, 0 to " +
        '10000, default 100: `invalid=quarantine; max-invalid=500`): an invalid ' +
        'item (a user that breaks the rules, an NDJSON line that is not JSON, a ' +
        'CSV record with another number of fields) is set aside in the same ' +
        'transaction instead of failing the request, and counted in `quarantined`; ' +
        'past `max-invalid` invalid items the request is refused as ' +
        'without it (400, nothing written, nothing set aside); ' +
        'another value of `invalid` is 400 `unsupported_preference`. ' +
        'Other preferences (`missing`, `tx`, `timezone`, `max-affected`, ' +
        '...) are ignored, unless `handling=strict` is sent too: then ' +
        'they are 400 `unsupported_preference` (PGRST122).',
      schema: { type: 'string' },
      examples: {
        merge: { value: 'resolution=merge-duplicates' },
        postgrest: { value: 'resolution=ignore-duplicates, return=representation, count=exact' },
        quarantine: { value: 'invalid=quarantine; max-invalid=500' },
      },
    },
    {
      name: 'on_conflict',
      in: 'query',
      required: false,
      description:
        `The conflict target of \`resolution\`: \`${KEY_COLUMN.field}\`, the ` +
        `only unique column. Another column of users is 400 ` +
        `\`unsupported_conflict_target\`; an unknown one 400 \`unknown_column\`.`,
      schema: { type: 'string', const: KEY_COLUMN.field },
    },
    {
      name: 'columns',
      in: 'query',
      required: false,
      description:
        `Only these keys are read from each user (the others are ignored, as ` +
        `PostgREST does): a comma-separated list of ${WRITE_COLUMNS.join(', ')}, ` +
        `each optionally double-quoted. An unknown column is 400 \`unknown_column\`.`,
      schema: { type: 'string' },
      example: '"email","name","phone"',
    },
    {
      name: 'select',
      in: 'query',
      required: false,
      description:
        `The columns of a \`return=representation\` answer, in this order: \`*\` ` +
        `(all) or a comma-separated list of ${READ_COLUMNS.join(', ')}. ` +
        `Never ${inCode(SECRET_FIELDS)}. An unknown column is 400 \`unknown_column\`; ` +
        `embedding, renaming, casts and JSON paths are 400 \`unsupported_query\`. ` +
        `Without \`return=representation\` it changes nothing. ` +
        "sluice's per-item report: `outcome` in the list (never implied by `*`) makes " +
        'the answer hold every item of the request, in order, each with its `outcome` ' +
        '(`inserted`, `updated`, `skipped`: already stored or unchanged, its ' +
        'other columns null but `email`; `repeated`: its email came earlier ' +
        'in the request). It costs what `return=representation` costs.',
      schema: { type: 'string' },
      example: 'email,createdAt',
    },
  ];
}

/** The operations' routes: health, readiness, metrics and this document. */
function operationsPaths() {
  return {
    '/healthz': {
      get: {
        operationId: 'getHealth',
        tags: ['operations'],
        summary: 'Liveness',
        security: [],
        responses: {
          200: {
            description: 'The process serves.',
            content: json(
              {
                type: 'object',
                required: ['status', 'pid'],
                additionalProperties: false,
                properties: { status: { const: 'ok' }, pid: { type: 'integer' } },
              },
              { ok: { status: 'ok', pid: 4242 } },
            ),
          },
          ...errorResponses(['any']),
        },
      },
    },
    '/readyz': {
      get: {
        operationId: 'getReadiness',
        tags: ['operations'],
        summary: 'Readiness',
        security: [],
        responses: {
          200: {
            description: 'The database answers and the `users` table exists.',
            content: json(readiness('ready'), { ready: { status: 'ready' } }),
          },
          503: {
            description: 'The database does not answer, or the schema is missing.',
            content: json(readiness('not_ready'), { notReady: { status: 'not_ready' } }),
          },
          ...errorResponses(['any']),
        },
      },
    },
    '/metrics': {
      get: {
        operationId: 'getMetrics',
        tags: ['operations'],
        summary: 'Prometheus metrics',
        description:
          'Requests by route and status, durations, users received and inserted, ' +
          'batch sizes, insert time, pool connections. Under WORKERS, the whole ' +
          'cluster. Served to loopback addresses only unless METRICS_PUBLIC=true: ' +
          'to any other, the route does not exist (404 not_found).',
        security: [],
        responses: {
          200: {
            description: 'Prometheus text exposition format.',
            content: {
              'text/plain': {
                schema: { type: 'string' },
                example: 'sluice_users_inserted_total 7\n',
              },
            },
          },
          ...errorResponses(['any']),
        },
      },
    },
    '/openapi.json': {
      get: {
        operationId: 'getOpenApiDocument',
        tags: ['operations'],
        summary: 'This document',
        security: [],
        responses: {
          200: {
            description: 'The OpenAPI 3.1 document of this API.',
            content: { 'application/json': { schema: { type: 'object' } } },
          },
          ...errorResponses(['any']),
        },
      },
    },
  };
}

/**
 * The user object: the schema ajv validates with, each field described by its declaration
 * (user-columns.js), so the document cannot drift from the rules.
 */
function describedUserSchema() {
  const user = structuredClone(userSchema);
  for (const c of USER_COLUMNS)
    /** @type {Record<string, any>} */ (user.properties)[c.field].description = c.description;
  return user;
}

/** The document's schemas. */
function schemas() {
  return {
    User: describedUserSchema(),
    BatchResult: {
      type: 'object',
      required: ['received', 'inserted', 'updated', 'duplicates'],
      additionalProperties: false,
      properties: {
        received: { type: 'integer', minimum: 1, description: 'Users in the request.' },
        inserted: { type: 'integer', minimum: 0, description: 'Rows written.' },
        updated: {
          type: 'integer',
          minimum: 0,
          description: 'Stored rows changed (merge mode; always 0 otherwise).',
        },
        stale: {
          type: 'integer',
          minimum: 0,
          description:
            'Items that wrote nothing as no newer change. In merge mode (always there): ' +
            'than the row stored (an older or equal `changedAt`, none against a row that ' +
            'has one, or the same values) or than another item of their email in the ' +
            'request, so that inserted + updated + stale = received - quarantined. In ' +
            "either mode: than their email's erasure (`DELETE /users`, `POST /erasures`): " +
            'an item of an erased email without `changedAt`, or with one not newer than ' +
            'the erasure, is kept out. Ignore mode has `stale` only when an erasure kept ' +
            'an item out (absent otherwise).',
        },
        duplicates: {
          type: 'integer',
          minimum: 0,
          description:
            'Items that wrote nothing but those an erasure kept out: emails already ' +
            'stored, or repeated in the request (in merge mode: updated + the items ' +
            'stale against the row stored or their email). inserted + duplicates + ' +
            'quarantined + the items an erasure kept out = received.',
        },
        quarantined: {
          type: 'integer',
          minimum: 0,
          description:
            'With `Prefer: invalid=quarantine` only (absent otherwise): invalid ' +
            'items set aside, kept in the quarantine (`npm run quarantine`) and ' +
            'not written.',
        },
        errors: {
          type: 'array',
          maxItems: 100,
          items: { $ref: '#/components/schemas/ItemError' },
          description:
            'With `Prefer: invalid=quarantine`, when an item was set ' +
            'aside: the first 100 problems of the items set aside, ' +
            'in index order, as a 400 `invalid_batch` names them.',
        },
      },
    },
    UserRow: {
      type: 'object',
      additionalProperties: false,
      description:
        'A user as stored, in a `return=representation` answer: the ' +
        'columns of `?select` (all by default); never the password hash.',
      properties: {
        ...shownProperties(),
        createdAt: {
          type: 'string',
          format: 'date-time',
          description:
            "When the row was first written (PostgreSQL's JSON form: microseconds, `+00:00`).",
        },
        updatedAt: {
          type: ['string', 'null'],
          format: 'date-time',
          description:
            'When a merge last changed it; null for a row never ' +
            'merged (so null means this request inserted it).',
        },
        outcome: {
          type: 'string',
          enum: ['inserted', 'updated', 'skipped', 'repeated'],
          description:
            'Only when `select` names it (the per-item ' +
            'report): what this request did with the item.',
        },
      },
    },
    Representation: {
      type: 'array',
      items: { $ref: '#/components/schemas/UserRow' },
      description:
        'The rows this request inserted or updated, in the order their emails ' +
        'were first sent; emails skipped (already stored, or unchanged in merge ' +
        'mode) are not in it. With `outcome` in `select`: every item, in order.',
    },
    ItemError: {
      type: 'object',
      required: ['index', 'field', 'message'],
      additionalProperties: false,
      properties: {
        index: {
          type: 'integer',
          minimum: 0,
          description:
            'Position of the user in the array (in a streamed body, among its users, from 0).',
        },
        line: {
          type: 'integer',
          minimum: 1,
          description:
            'A streamed body (NDJSON, CSV) only: the line the ' +
            'user starts on, counted from 1 as editors count.',
        },
        field: {
          type: ['string', 'null'],
          description: 'The field at fault; null when the item is not an object.',
        },
        message: { type: 'string' },
      },
    },
    InvalidBatch: {
      ...errorBody(['invalid_batch'], {
        errors: {
          type: 'array',
          minItems: 1,
          maxItems: MAX_REPORTED_ERRORS,
          items: { $ref: '#/components/schemas/ItemError' },
          description: 'In index order.',
        },
      }),
    },
  };
}

/**
 * The streamed media types of POST /users. OpenAPI 3.1 can only name them: a schema for each item
 * (`itemSchema`) arrives in 3.2, so each says in words that its users follow the User schema.
 */
function streamedBodies() {
  const ndjson = {
    schema: {
      type: 'string',
      description: 'One User object (the User schema) a line, LF or CRLF; blank lines are skipped.',
    },
    examples: {
      twoUsers: {
        value:
          '{"email":"ada@example.com","name":"Ada ' +
          'Lovelace"}\n{"email":"alan@example.com","name":"Alan ' +
          'Turing","phone":"+441234567890"}\n',
      },
    },
  };
  return {
    'application/x-ndjson': ndjson,
    'application/jsonl': ndjson,
    'text/csv': {
      schema: {
        type: 'string',
        description:
          `RFC 4180, UTF-8: a header row naming the columns ` +
          `(${plainSentence(REQUIRED_FIELDS)}; ` +
          `${plainSentence(WRITE_COLUMNS.filter((f) => !isOneOf(REQUIRED_FIELDS, f)))} when ` +
          `sent; any order), then one user a record. ` +
          'An empty field not quoted is a field not sent; `""` is an empty ' +
          'string. A quoted field may hold commas, doubled quotes and line breaks.',
      },
      examples: {
        twoUsers: {
          value:
            'email,name,phone\r\nada@example.com,"Lovelace, ' +
            'Ada",\r\nalan@example.com,Alan Turing,+441234567890\r\n',
        },
      },
    },
  };
}

/** @param {string} status */
function readiness(status) {
  return {
    type: 'object',
    required: ['status'],
    additionalProperties: false,
    properties: { status: { const: status } },
  };
}

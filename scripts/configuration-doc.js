// docs/configuration.md, made from each component's declaration of its variables
// (`npm run docs:config` writes it; test/unit/configuration-doc.test.js fails when the file and
// this text differ).
import { markdownTable } from 'markdown-table';
import { DATABASE_VARIABLES, MIGRATION_VARIABLES } from '@sluice/db/database-url';
import { TRACING_VARIABLES, describeEnv } from '@sluice/env';
import { FEEDER_VARIABLES } from '../lambda/src/config.js';
import { ROTATION_VARIABLES } from '../lambda/src/rotate-token.js';
import {
  ELASTICMQ_VARIABLES,
  RUNNER_VARIABLES,
  SQS_VARIABLES,
} from '../lambda/local/sqs-config.js';
import { SERVICE_VARIABLES } from '../service/src/config.js';
import { START_VARIABLES } from './start-config.js';

/** @typedef {import('@sluice/env/load-env').Declarations} Declarations */

/**
 * Each component's section: its heading, who reads it, and its declarations.
 * @type {{ heading: string, intro: string, declarations: Declarations }[]}
 */
export const SECTIONS = [
  {
    heading: 'The database (`db/src/database-url.js`)',
    intro:
      'Read by the service and by `npm run migrate`: `DATABASE_URL`, or ' +
      'else a URL built from the PG* variables (how ECS injects the RDS ' +
      'secret, so no URL holding the password is written into a template).',
    declarations: DATABASE_VARIABLES,
  },
  {
    heading: 'The migrations (`db/src/database-url.js`)',
    intro:
      '`npm run migrate` and `npm start` (which migrates first) read this ' +
      'too. The migrations run in one transaction under a transaction-scoped ' +
      'lock, so they are safe through a transaction pooler; a direct URL ' +
      "still keeps them out of reach of the pooler's timeouts and pinning " +
      '([Behind a connection pooler](#behind-a-connection-pooler)).',
    declarations: MIGRATION_VARIABLES,
  },
  {
    heading: 'The service (`service/src/config.js`)',
    intro:
      '`node service/src/server.js`, the service image and ' +
      "`npm start` read these (and the database's above).",
    declarations: SERVICE_VARIABLES,
  },
  {
    heading: '`npm start` (`scripts/start-config.js`)',
    intro: 'Read by `npm start` itself; it passes every variable on to the service.',
    declarations: START_VARIABLES,
  },
  {
    heading: "The feeder's handler (`lambda/src/config.js`)",
    intro: 'The Lambda function (set by `template.yaml`), and the handler under the local runner.',
    declarations: FEEDER_VARIABLES,
  },
  {
    heading: 'The token rotation function (`lambda/src/rotate-token.js`)',
    intro:
      "Secrets Manager's rotation of the stack's ingest tokens (`template.yaml` sets it; " +
      '[operations.md](operations.md#credentials-adding-a-client-rotating-revoking)).',
    declarations: ROTATION_VARIABLES,
  },
  {
    heading: 'Tracing (`env/src/tracing.js`)',
    intro:
      "OpenTelemetry's own variables, read by the service, the feeder (its handler " +
      'and local runner) and the producer; off unless `OTEL_TRACES_EXPORTER=otlp` or ' +
      "an OTLP endpoint is set. The service, the feeder's handler, its local runner " +
      'and the producer read them once, with their own configuration, and build ' +
      'their SDK (or, in the handler, whether to load the API) from what they read; ' +
      "on AWS the ADOT layer's SDK reads them itself. The spec's variables not " +
      'listed here (`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`) are ' +
      'left to each SDK. [tracing.md](tracing.md) says what each component records.',
    declarations: TRACING_VARIABLES,
  },
  {
    heading: 'SQS, for the local runner and the producer (`lambda/local/sqs-config.js`)',
    intro: '`npm run feeder` and `npm run produce`.',
    declarations: SQS_VARIABLES,
  },
  {
    heading: 'The local runner (`lambda/local/sqs-config.js`)',
    intro:
      "`npm run feeder`: Lambda's event-source mapping played " +
      "locally, with Lambda's meaning and the SAM template's defaults.",
    declarations: RUNNER_VARIABLES,
  },
  {
    heading: 'ElasticMQ for the local walkthrough (`lambda/local/sqs-config.js`)',
    intro:
      '`npm run elasticmq` ([feeder.md](feeder.md#running-it-locally)): the SQS ' +
      'emulator on 127.0.0.1, with the queue `sluice-users` and its dead-letter queue.',
    declarations: ELASTICMQ_VARIABLES,
  },
];

// What DATABASE_URL may point at, said after the tables (written here, not generated).
const BEHIND_A_POOLER = `## Behind a connection pooler

\`DATABASE_URL\` may be a transaction-pooling PgBouncer, Amazon RDS Proxy or a managed "pooled"
connection string (Neon, Supabase's transaction pooler): the service keeps no state on a connection
from one transaction to the next. Each transaction sets its own time limits, inside it and in the
round trip that already carries its first statement: \`SET LOCAL statement_timeout = …;
SET LOCAL lock_timeout = …;\` before a statement that needs no transaction of its own (one simple
query is one implicit transaction), or after \`BEGIN\` in the same query
(\`service/src/db/transaction-settings.js\` builds both). Nothing but \`application_name\` goes in
the startup parameters; no named prepared statement, no session lock; the staging tables of
\`COPY\` are dropped with their transaction.
\`DB_STATEMENT_TIMEOUT_MS\` and \`DB_LOCK_TIMEOUT_MS\` mean what they mean direct (PostgreSQL 13 and
later start each statement's timeout anew within one query; every supported version does).
PgBouncer needs \`pool_mode = transaction\` and no \`ignore_startup_parameters\` beyond the usual
\`extra_float_digits\`; \`service/test/integration/pooler.test.js\` runs every write path through
PgBouncer 1.18 that way.

- **What it costs.** Nothing with the default \`INSERT_STRATEGY=format\`: a request written by one
  statement is still one round trip, a batch of several chunks still \`BEGIN\`, a statement a chunk,
  \`COMMIT\`. \`INSERT_STRATEGY=unnest\` sends its rows as \`$n\` parameters, and a statement with
  parameters must go alone in its query, so even one chunk is \`BEGIN\` (with the settings), the
  statement and \`COMMIT\`: three round trips instead of one.
- **Connections.** \`DB_POOL_MAX\` is then each process's connections to the pooler; PostgreSQL sees
  the pooler's pool (PgBouncer's \`default_pool_size\`) however many processes run. A transaction
  holds a server connection for as long as it lasts: a write waiting for a locked row up to
  \`DB_LOCK_TIMEOUT_MS\`, a streamed import for its whole body. Size the pool for those on top of
  the short writes.
- **Migrations.** \`npm run migrate\` applies every pending migration in one transaction under a
  transaction-scoped advisory lock, so it is safe through the pooler; \`DIRECT_DATABASE_URL\` sends
  it (and \`npm start\`'s) straight to the server instead, out of reach of the pooler's timeouts and
  of RDS Proxy's pinning.
- **Rates.** A client's \`rate\` (\`INGEST_TOKENS\`, \`JWT_CLIENT_RATE\`) holds for the whole
  deployment, every replica and worker: each process leases its share in PostgreSQL
  (\`rate_leases\`), one statement every 3 s whatever its load, a simple query with its own
  \`SET LOCAL\` limits (200 ms, a lock 100 ms), so the pooler changes nothing for it. What stays
  a process's own: the admission budget (\`ADMISSION_BUDGET_BYTES\`, \`maxInFlightBytes\`), the
  shares of it by \`weight\` and the waiting room. The rate's design:
  [architecture.md](architecture.md#a-rate-held-for-the-deployment).`.split('\n');

/** @param {Declarations} declarations */
const table = (declarations) =>
  markdownTable(
    [
      ['variable', 'default', 'values', 'meaning'],
      ...describeEnv(declarations).map((d) => [
        `\`${d.name}\``,
        /^(unset|required)$/.test(d.defaultText) || d.defaultText.includes(' ')
          ? d.defaultText
          : `\`${d.defaultText}\``,
        d.kind,
        d.description.replaceAll('|', '\\|'),
      ]),
    ],
    { alignDelimiters: false },
  );

/**
 * The whole of docs/configuration.md.
 * @param {typeof SECTIONS} [sections]
 */
export function configurationDoc(sections = SECTIONS) {
  return [
    '# Configuration',
    '',
    '<!-- Generated by `npm run docs:config` from the declarations ' +
      'named in each heading: edit those, not this file. -->',
    '',
    'Every variable is read and checked once, at start-up ' +
      '(a cold start for the feeder). A blank value is',
    'the same as an unset one. A bad value stops ' +
      'start-up with one message naming every variable at',
    'fault. `--help` of each command lists the variables ' +
      'it reads, made from the same declarations.',
    ...sections.flatMap((s) => ['', `## ${s.heading}`, '', s.intro, '', table(s.declarations)]),
    '',
    ...BEHIND_A_POOLER,
    '',
  ].join('\n');
}

import client from 'prom-client';
import { REFUSAL_REASONS } from './http/admission-budget.js';
import { AUTH_REFUSAL_REASONS } from './auth/refusals.js';
import { heldBodyCount } from './http/unread-body.js';
import { QUARANTINE_REASONS } from './users/quarantine.js';
import { frozenWords } from '@sluice/env';

/**
 * Everything /metrics exposes, on a registry of its own (tests build several apps).
 * @param {import('./db/database.js').Database} [db]
 */
export function createMetrics(db) {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry, prefix: 'sluice_' });
  const registers = [registry];

  const metrics = {
    registry,
    admission: admissionMetrics(registers),
    clients: clientMetrics(registers),
    auth: authMetrics(registers),
    rates: rateMetrics(registers),
    ...httpMetrics(registers),
    ...userMetrics(registers),
    ...groupCommitMetrics(registers),
  };
  if (db) {
    const { pool } = db;
    new client.Gauge({
      name: 'sluice_db_pool_connections',
      help: 'Pooled connections by state',
      labelNames: ['state'],
      registers,
      collect() {
        this.set({ state: 'total' }, pool.totalCount);
        this.set({ state: 'idle' }, pool.idleCount);
        this.set({ state: 'waiting' }, pool.waitingCount);
      },
    });
  }
  return metrics;
}

/**
 * Requests answered and their durations.
 * @param {client.Registry[]} registers
 */
function httpMetrics(registers) {
  return {
    httpRequests: new client.Counter({
      name: 'sluice_http_requests_total',
      help: 'HTTP requests answered',
      labelNames: ['method', 'route', 'status'],
      registers,
    }),
    httpDuration: new client.Histogram({
      name: 'sluice_http_request_duration_seconds',
      help: 'Time to answer a request',
      labelNames: ['method', 'route'],
      registers,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    }),
  };
}

/**
 * Users received, written, set aside; batch and stream sizes; the time a write takes.
 * @param {client.Registry[]} registers
 */
function userMetrics(registers) {
  return {
    usersReceived: new client.Counter({
      name: 'sluice_users_received_total',
      help: 'Users received in valid batches',
      registers,
    }),
    usersInserted: new client.Counter({
      name: 'sluice_users_inserted_total',
      help: 'Users written (new emails)',
      registers,
    }),
    usersUpdated: new client.Counter({
      name: 'sluice_users_updated_total',
      help: 'Stored users changed by merge mode',
      registers,
    }),
    usersStale: new client.Counter({
      name: 'sluice_users_stale_total',
      help:
        'Items that wrote nothing as no newer change: in merge mode than the row stored or ' +
        'another item of their email; in either mode than the erasure of their email',
      registers,
    }),
    usersErased: new client.Counter({
      name: 'sluice_users_erased_total',
      help: 'Stored users erased (DELETE /users, POST /erasures, npm run erase)',
      registers,
    }),
    usersQuarantined: quarantinedCounter(registers),
    quarantinePurged: new client.Counter({
      name: 'sluice_quarantine_purged_total',
      help:
        'Rows of quarantined_items deleted by the purge, ' +
        'once older than QUARANTINE_RETENTION_DAYS',
      registers,
    }),
    batchSize: new client.Histogram({
      name: 'sluice_batch_size_users',
      help: 'Users per POST /users with a JSON array body',
      registers,
      buckets: [1, 10, 100, 500, 1000, 2500, 5000, 10000],
    }),
    // Apart from the arrays, whose quantiles tune MAX_BATCH_ITEMS: a stream would land in their
    // last bucket.
    streamSize: new client.Histogram({
      name: 'sluice_stream_size_users',
      help: 'Users per streamed POST /users (NDJSON or CSV body), counted once committed',
      registers,
      buckets: [1, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000],
    }),
    insertDuration: new client.Histogram({
      name: 'sluice_db_insert_duration_seconds',
      help: 'Time to write one batch, transaction included',
      registers,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    }),
  };
}

/**
 * How group commit gathers small requests: requests and rows a statement, time waited.
 * @param {client.Registry[]} registers
 */
function groupCommitMetrics(registers) {
  return {
    groupRequests: new client.Histogram({
      name: 'sluice_group_commit_requests',
      help: 'Requests written together by one group-commit statement',
      registers,
      buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500],
    }),
    groupRows: new client.Histogram({
      name: 'sluice_group_commit_rows',
      help: 'Rows in one group-commit statement',
      registers,
      buckets: [1, 10, 50, 100, 250, 500, 1000],
    }),
    groupWait: new client.Histogram({
      name: 'sluice_group_commit_wait_seconds',
      help: 'Time a small request waited for its group to be written',
      registers,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    }),
  };
}

/**
 * Why a client's request was refused: over its rate (429), over its share of the waiting room, or
 * the budget full (503).
 */
export const CLIENT_REFUSAL_REASONS = frozenWords(['rate', 'share', 'budget']);

// Each client seen, by its bounded label (a configured name, `jwt`, `anonymous`): users taken,
// refusals by reason, body bytes held, time waited for admission, answers replayed from its
// Idempotency-Keys. Children kept by label.
/** @param {client.Registry[]} registers */
function clientMetrics(registers) {
  /** @type {{ heldByLabel: () => Iterable<[string, number]> } | undefined} */
  let budget;
  const heldByLabel = () => budget?.heldByLabel() ?? [];
  const { users, refused, wait, replays } = clientSeries(registers, heldByLabel);
  /** @type {Map<string, import('prom-client').Counter.Internal>} */
  const usersBy = new Map();
  // A client's series all appear with its first event, at zero: a rate misses a series' first
  // event.
  /** @param {string} label */
  const seen = (label) => {
    let child = usersBy.get(label);
    if (child) return child;
    usersBy.set(label, (child = users.labels({ client: label })));
    child.inc(0);
    for (const reason of CLIENT_REFUSAL_REASONS) refused.inc({ client: label, reason }, 0);
    wait.zero({ client: label });
    replays.inc({ client: label }, 0);
    return child;
  };
  return {
    /** @param {string} label @param {number} n */
    received: (label, n) => seen(label).inc(n),
    /** @param {string} label @param {typeof CLIENT_REFUSAL_REASONS[number]} reason */
    refused(label, reason) {
      seen(label);
      refused.inc({ client: label, reason });
    },
    /** @param {string} label @param {number} seconds */
    waited(label, seconds) {
      seen(label);
      wait.observe({ client: label }, seconds);
    },
    /** @param {string} label */
    replayed(label) {
      seen(label);
      replays.inc({ client: label });
    },
    /**
     * The admission budget whose bytes held are exported by client.
     * @param {{ heldByLabel: () => Iterable<[string, number]> }} admission
     */
    watch(admission) {
      budget = admission;
    },
  };
}

/**
 * The series by client, and the unread bodies held.
 * @param {client.Registry[]} registers
 * @param {() => Iterable<[string, number]>} heldByLabel  the bytes each client holds now
 */
function clientSeries(registers, heldByLabel) {
  const users = new client.Counter({
    name: 'sluice_client_users_received_total',
    help: 'Users of the writes answered 2xx, by client (a configured name, jwt, anonymous)',
    labelNames: ['client'],
    registers,
  });
  const refused = new client.Counter({
    name: 'sluice_client_refused_total',
    help:
      'Requests refused, by client and reason: rate (429), share (its ' +
      'share of the waiting room, 503), budget (the admission budget, 503)',
    labelNames: ['client', 'reason'],
    registers,
  });
  new client.Gauge({
    name: 'sluice_refused_bodies_held',
    help: 'Bodies of requests refused over their rate held unread before they are read and dropped',
    registers,
    collect() {
      this.set(heldBodyCount());
    },
  });
  new client.Gauge({
    name: 'sluice_client_in_flight_bytes',
    help: 'Request body bytes admitted and not yet released, by client',
    labelNames: ['client'],
    registers,
    // Read when scraped: the budget changes on every request, the scrape is rare.
    collect() {
      for (const [label, bytes] of heldByLabel()) this.set({ client: label }, bytes);
    },
  });
  const wait = new client.Histogram({
    name: 'sluice_client_admission_wait_seconds',
    help:
      'Time a request that did not fit at once waited ' +
      'for admission (admitted or not), by client',
    labelNames: ['client'],
    registers,
    buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
  });
  const replays = new client.Counter({
    name: 'sluice_idempotent_replays_total',
    help: 'Answers replayed from a stored Idempotency-Key (Idempotent-Replayed: true), by client',
    labelNames: ['client'],
    registers,
  });
  return { users, refused, wait, replays };
}

/**
 * What admission control reports: requests shed and why, bytes held, requests waiting, time waited.
 * @param {client.Registry[]} registers
 * @returns {import('./http/admission.js').AdmissionMetrics}
 */
function admissionMetrics(registers) {
  const shed = new client.Counter({
    name: 'sluice_admission_shed_total',
    help: 'Requests refused with 503 by admission control, by reason',
    labelNames: ['reason'],
    registers,
  });
  // Every label known up front is exported at zero from the start: a rate misses a series' first
  // event.
  for (const reason of REFUSAL_REASONS) shed.inc({ reason }, 0);
  const wait = new client.Histogram({
    name: 'sluice_admission_wait_seconds',
    help: 'Time a request that did not fit at once waited for admission (admitted or not)',
    registers,
    buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
  });
  const inFlight = new client.Gauge({
    name: 'sluice_admission_in_flight_bytes',
    help: 'Request body bytes admitted and not yet released, by lane',
    labelNames: ['lane'],
    registers,
  });
  const waiting = new client.Gauge({
    name: 'sluice_admission_waiting_requests',
    help: 'Requests waiting to be admitted',
    registers,
  });
  for (const lane of ['large', 'small']) inFlight.set({ lane }, 0);
  return {
    shed: (reason) => shed.inc({ reason }),
    waited: (seconds) => wait.observe(seconds),
    observe: (budget) => {
      const usage = budget.usage;
      inFlight.set({ lane: 'large' }, usage.largeBytes);
      inFlight.set({ lane: 'small' }, usage.smallBytes);
      waiting.set(usage.waiting);
    },
  };
}

// Who was let in, by client (a configured name, or `jwt`: a bounded label), and who was not, by
// reason; children kept by label, so no label object is hashed per request.
/** @param {client.Registry[]} registers @returns {import('./http/authenticate.js').AuthMetrics} */
function authMetrics(registers) {
  const accepted = new client.Counter({
    name: 'sluice_auth_accepted_total',
    help: 'Requests whose credentials were accepted, by client (a configured name, or jwt)',
    labelNames: ['client'],
    registers,
  });
  const refused = new client.Counter({
    name: 'sluice_auth_refused_total',
    help: 'Requests refused with 401, by reason',
    labelNames: ['reason'],
    registers,
  });
  for (const reason of AUTH_REFUSAL_REASONS) refused.inc({ reason }, 0);
  /** @type {Map<string, client.Counter.Internal>} */
  const acceptedBy = new Map();
  return {
    accepted(label) {
      let child = acceptedBy.get(label);
      if (!child) acceptedBy.set(label, (child = accepted.labels({ client: label })));
      child.inc();
    },
    refused: (reason) => refused.inc({ reason }),
  };
}

/** @typedef {ReturnType<typeof createMetrics>} Metrics */

/** A lease renewal's outcome (http/shared-rate.js): answered, or failed or late. */
export const LEASE_OUTCOMES = frozenWords(['ok', 'failed']);

/**
 * The rates held for the deployment (http/shared-rate.js): the processes sharing them, those on
 * their local fallback, the lease statements sent. Under WORKERS the primary adds the workers' up,
 * but the processes known, which each worker knows whole (their largest).
 * @param {client.Registry[]} registers
 * @returns {import('./http/shared-rate.js').SharedRateMetrics}
 */
function rateMetrics(registers) {
  const processes = new client.Gauge({
    name: 'sluice_rate_processes',
    help:
      "Processes leasing a share of the clients' rates, as the last renewal found them " +
      '(this one included; 0: it leases none)',
    registers,
    aggregator: 'max',
  });
  const fallback = new client.Gauge({
    name: 'sluice_rate_local_fallback',
    help:
      'Processes on their local share of every rate (the rate over the processes ' +
      'known) while the shared rates cannot be reached',
    registers,
  });
  const statements = new client.Counter({
    name: 'sluice_rate_lease_statements_total',
    help:
      'Statements of the rate leases (a renewal, a release) sent to the database, by ' +
      'outcome: ok, or failed (an error, its own time limits included)',
    labelNames: ['outcome'],
    registers,
  });
  processes.set(0);
  fallback.set(0);
  for (const outcome of LEASE_OUTCOMES) statements.inc({ outcome }, 0);
  return {
    statement: (ok) => statements.inc({ outcome: ok ? 'ok' : 'failed' }),
    fallback: (on) => fallback.set(on ? 1 : 0),
    processes: (count) => processes.set(count),
  };
}

/**
 * Items set aside by `Prefer: invalid=quarantine`, by reason, each from 0.
 * @param {client.Registry[]} registers
 */
function quarantinedCounter(registers) {
  const counter = new client.Counter({
    name: 'sluice_users_quarantined_total',
    help: 'Items set aside by Prefer: invalid=quarantine (kept in quarantined_items), by reason',
    labelNames: ['reason'],
    registers,
  });
  for (const reason of QUARANTINE_REASONS) counter.inc({ reason }, 0);
  return counter;
}

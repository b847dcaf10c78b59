import format from 'pg-format';
import { lastResult } from './transaction-settings.js';

// Each process's leases of its clients' rates. A statement is sent with its values as literals
// after its SET LOCALs in one simple query: nothing is left on the connection, so a transaction
// pooler may sit between. The database's clock says when a lease expires, so hosts' clocks never
// matter.

/** @template T @typedef {import('./db-types.js').Statement<T>} Statement */
/** @typedef {import('./db-types.js').Renewal} Renewal */
/** @typedef {import('./db-types.js').LeaseAnswer} LeaseAnswer */

/** The limiter's own time limits: a slow or locked table is a fallback, never a slow request. */
export const LEASE_LIMITS = Object.freeze({ statementTimeoutMs: 200, lockTimeoutMs: 100 });
/** Another process's renewal deletes them: one statement changes a row once. */
const FORGET_AFTER = "interval '1 minute'";
const FORGET_ROWS = 100;

/** @param {number} ms */
const ttl = (ms) => `now() + interval '${Math.max(1, Math.trunc(ms))} milliseconds'`;

/** @param {number} n */
const demandOf = (n) => (Number.isFinite(n) && n > 0 ? n : 0);

/** @param {Renewal} renewal @returns {Statement<LeaseAnswer>} */
export function renewLeases({ process, leases, released, ttlMs }) {
  const me = format.literal(process);
  const wanted = format.literal(
    JSON.stringify(leases.map(({ client, demand }) => ({ client, demand: demandOf(demand) }))),
  );
  const gone = released.length > 0 ? released.map((c) => format.literal(c)).join(', ') : 'NULL';
  return {
    text: `WITH wanted AS (
  SELECT client, demand FROM json_to_recordset(${wanted}) AS w (client text, demand float8)
), alive AS (
  INSERT INTO rate_processes (process, expires_at) VALUES (${me}, ${ttl(ttlMs)})
  ON CONFLICT (process) DO UPDATE SET expires_at = EXCLUDED.expires_at
), leased AS (
  INSERT INTO rate_leases (client, process, demand, expires_at)
  SELECT client, ${me}, demand, ${ttl(ttlMs)} FROM wanted
  ON CONFLICT (client, process) DO UPDATE
    SET demand = EXCLUDED.demand, expires_at = EXCLUDED.expires_at
), released AS (
  DELETE FROM rate_leases WHERE process = ${me} AND client IN (${gone})
), forgotten_leases AS (
  DELETE FROM rate_leases WHERE (client, process) IN (
    SELECT client, process FROM rate_leases
    WHERE expires_at < now() - ${FORGET_AFTER} AND process <> ${me}
    LIMIT ${FORGET_ROWS} FOR UPDATE SKIP LOCKED)
), forgotten_processes AS (
  DELETE FROM rate_processes WHERE process IN (
    SELECT process FROM rate_processes
    WHERE expires_at < now() - ${FORGET_AFTER} AND process <> ${me}
    LIMIT ${FORGET_ROWS} FOR UPDATE SKIP LOCKED)
)
SELECT
  (SELECT count(*)::int FROM rate_processes WHERE expires_at > now() AND process <> ${me})
    AS other_processes,
  (SELECT coalesce(json_agg(json_build_array(client, demands)), '[]'::json) FROM (
    SELECT client, json_agg(demand) AS demands FROM rate_leases
    WHERE client IN (SELECT client FROM wanted) AND process <> ${me} AND expires_at > now()
    GROUP BY client) o) AS others`,
    operation: 'RATE LEASE',
    decode: decodeLeases,
  };
}

/** @param {import('./db-types.js').Answer} answer @returns {LeaseAnswer} */
export function decodeLeases(answer) {
  const [row] = lastResult(answer).rows;
  /** @type {[string, number[]][]} */
  const others = row.others;
  return {
    processes: Number(row.other_processes) + 1,
    others: new Map(others.map(([client, demands]) => [client, demands.map(Number)])),
  };
}

/**
 * So that a stopping process's share is the others' at their next renewal, not once it expires.
 * @param {{ process: string, clients: string[] }} leases @returns {Statement<void>}
 */
export function releaseLeases({ process, clients }) {
  const me = format.literal(process);
  const held = clients.length > 0 ? clients.map((c) => format.literal(c)).join(', ') : 'NULL';
  return {
    text: `WITH released AS (
  DELETE FROM rate_leases WHERE process = ${me} AND client IN (${held})
)
DELETE FROM rate_processes WHERE process = ${me}`,
    operation: 'RATE RELEASE',
    decode: () => undefined,
  };
}

/** @param {import('./database.js').Database} db */
export function createLeaseStore(db) {
  /** @template T @param {Statement<T>} statement @returns {Promise<T>} */
  const run = (statement) =>
    db.withClient(async (client) =>
      statement.decode(
        await client.query({
          text: db.settings.statement(statement.text, LEASE_LIMITS),
          operation: statement.operation,
          query_timeout: LEASE_LIMITS.statementTimeoutMs + 1000,
        }),
      ),
    );
  return {
    /** @param {Renewal} renewal */
    renew: (renewal) => run(renewLeases(renewal)),
    /** @param {{ process: string, clients: string[] }} leases */
    release: (leases) => run(releaseLeases(leases)),
    closed: () => db.pool.ending || db.pool.ended,
  };
}

/** @typedef {ReturnType<typeof createLeaseStore>} LeaseStore */

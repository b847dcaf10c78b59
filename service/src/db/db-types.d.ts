// The database layer's values (database.js, failure.js, statement.js, transaction-settings.js,
// rate-leases.js).
import type pg from 'pg';
import type { Lending } from './lending.js';
import type { TransactionSettings } from './transaction-settings.js';

/** A query's answer: one result, or one a statement when its text holds several. */
export type Answer = pg.QueryResult | pg.QueryResult[];

/** What pg sends (text, parameters, row mode; `operation` names its span) and how it is read. */
export type Statement<T> = pg.QueryConfig & { operation?: string; decode: (answer: Answer) => T };

export interface Queryable {
  query: (statement: pg.QueryConfig) => Promise<any>;
}

/** A transaction's own time limits: one left out is not set, 0 sets none. */
export interface TimeLimits {
  statementTimeoutMs?: number;
  lockTimeoutMs?: number;
}

/**
 * What a failed write means: unavailable (no connection, or the probe failed too); a time limit;
 * transient (the database answers); own (the statement's). In doubt is failure.js's to say.
 */
export type Diagnosis = 'unavailable' | 'lock_timeout' | 'statement_timeout' | 'transient' | 'own';

/** Whether the database answers, the schema is in place and a transaction can be opened. */
export interface Readiness {
  ready: boolean;
  /** A misconfiguration found (a pooler in statement mode). */
  reason?: string;
}

/** The password refused, no such database, nothing listening at the address, a host not known. */
export type Misconfiguration = 'password' | 'database' | 'refused' | 'host';

/** What a failure means, as failure.js decides it. */
export interface FailureClass {
  /** What failed, as it came (the cause a refusal names). */
  error: unknown;
  /** Its SQLSTATE or errno. */
  code: string | undefined;
  /** No connection could be had. */
  unavailable: boolean;
  /** A pooler in statement mode refused to open a transaction. */
  statementPooling: boolean;
  /** Which of the database's own time limits ended it. */
  timeout: 'lock_timeout' | 'statement_timeout' | undefined;
  /** Passing, from the database's state rather than the statement's. */
  transient: boolean;
  /** The write may have been committed. */
  inDoubt: boolean;
  /** A stored (or repeated) key refused a row. */
  uniqueViolation: boolean;
  /** What a person may have to fix before the service can use the database. */
  misconfiguration: Misconfiguration | undefined;
}

export interface Database {
  pool: pg.Pool;
  /**
   * A connection lent to fn; its failure thrown as a DatabaseFailure when it is the database's
   * (classifyFailure reads it).
   */
  withClient: <T>(fn: (client: Lending) => Promise<T>) => Promise<T>;
  /**
   * BEGIN under the settings (limits: overrides; then: more statements in BEGIN's round trip,
   * whose answers fn gets in `begun`), fn, COMMIT; ROLLBACK when fn fails.
   */
  transaction: <T>(
    fn: (client: Lending, begun: pg.QueryResult[]) => Promise<T>,
    options?: { limits?: TimeLimits; then?: string },
  ) => Promise<T>;
  /** Each transaction's own time limits. */
  settings: TransactionSettings;
  /** /readyz's verdict, at most READINESS_HOLD_MS old. */
  readiness: () => Promise<Readiness>;
  diagnose: (err: unknown) => Promise<Diagnosis>;
  /** Another session holds a lock on users that stops every insert. */
  isTableLocked: () => Promise<boolean>;
  close: () => Promise<void>;
}

/** A lease to renew: the client's scope (`token:feeder`) and the users a second asked for. */
export interface WantedLease {
  client: string;
  demand: number;
}

/** One renewal: its leases, the clients whose leases it gives back, how long they hold. */
export interface Renewal {
  process: string;
  leases: WantedLease[];
  released: string[];
  ttlMs: number;
}

/** Each other live process's demand by client renewed; processes leasing now, this one included. */
export interface LeaseAnswer {
  processes: number;
  others: Map<string, number[]>;
}

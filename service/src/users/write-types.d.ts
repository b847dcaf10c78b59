// The write unit's values (write-unit.js), shared by every writer and by http/, which renders
// them: what a write is given, what it does and what is stored under a key; and the writers' own
// shapes (user-writer.js, chunk-writers.js, write-policy.js).
import type { Hash } from 'node:crypto';
import type { QueryResult } from 'pg';
import type { Database, Diagnosis } from '../db/database.js';
import type { Lending } from '../db/lending.js';
import type { TimeLimits } from '../db/transaction-settings.js';
import type { ItemError } from '../errors.js';
import type { UserRow, WrittenUser } from '../user-columns.js';
import type { KeyStore } from './idempotency-keys.js';
import type { InsertStrategy } from './insert-strategies.js';
import type { Quarantine } from './quarantine.js';
import type { ReplayGuess } from './replay-guess.js';
import type { OnConflict, Statement } from './sql-types.js';
import type { StreamFormat } from './stream-types.js';
import type { WritePolicy } from './write-policy.js';

export type {
  Database,
  Diagnosis,
  Hash,
  InsertStrategy,
  ItemError,
  KeyStore,
  Lending,
  OnConflict,
  Quarantine,
  QueryResult,
  Statement,
  StreamFormat,
  TimeLimits,
  UserRow,
  WritePolicy,
  WrittenUser,
};

/** What becomes of an email already stored: skipped, or updated with what was sent. */
export type Resolution = 'ignore' | 'merge';

/** An item the schema passed: every field a string, the optional ones perhaps absent. */
export type UserItem = {
  [F in keyof UserRow]: null extends UserRow[F] ? string | undefined : string;
};

/**
 * batch: a request alone; group: several in one statement; alone: a request of a failed group;
 * slow: the slow lane; stream: an import.
 */
export type WriteKind = 'batch' | 'group' | 'alone' | 'slow' | 'stream';

/** What the write policy says after a failure. */
export type Decision = { then: 'retry' } | { then: 'each_alone' } | { then: 'fail'; err: unknown };

/** A key's scope (its client's credential) and name. */
export interface KeyName {
  client: string;
  key: string;
}

/**
 * A request's key: its fingerprint once its body is read (a stream's is set by the import as it
 * reads); `rendering`, what its answer is rendered from besides the outcome, kept with it so that
 * a replay renders the same bytes (http/ gives it and reads it; users/ only stores it).
 */
export interface IdempotencyKey extends KeyName {
  fingerprint?: Buffer;
  rendering: unknown;
}

/** A stream's key: its fingerprint begun, the body's text added as the import reads it. */
export interface StreamKey extends KeyName {
  hash: Hash;
  rendering: unknown;
}

/** One request's part of a write: its rows (sorted by email, each once) and the items it sent. */
export interface Part {
  rows: UserRow[];
  received: number;
  withRows: boolean;
  key?: IdempotencyKey;
  /** The items it set aside, kept in the same transaction. */
  quarantine?: Quarantine;
}

/** What writing a part's rows did (a stream tells how many it received). */
export interface RowCounts {
  inserted: number;
  updated: number;
  tombstoned?: number;
  users?: WrittenUser[];
  received?: number;
}

/** The items a request set aside, as its answer names them. */
export interface SetAside {
  count: number;
  requestId: string;
  errors: ItemError[];
}

/**
 * A part's outcome once committed; `users`, the rows as written, when it wanted them;
 * `tombstoned`, its rows an erasure kept out (none: absent).
 */
export interface Written {
  received: number;
  inserted: number;
  updated: number;
  tombstoned?: number;
  users?: WrittenUser[];
  quarantined?: SetAside;
}

/** A key another request holds: its committed fingerprint and what it stored, or null in flight. */
export type TakenKey = { fingerprint: Buffer; stored: StoredOutcome } | null;

/**
 * What a complete key holds: the outcome and its rendering; or an answer stored whole before
 * outcomes were (status, headers, body), replayed as it is.
 */
export type StoredOutcome =
  | { written: Written; rendering: unknown }
  | { answer: { status: number; headers: Record<string, string>; body: string } };

export interface KeyTaken {
  taken: TakenKey;
}

/** A part's outcome: written, or its key taken (nothing written). */
export type Outcome = Written | KeyTaken;

/** A stream's key taken: nothing written; the body's fingerprint, to tell a replay from a reuse. */
export interface StreamTaken extends KeyTaken {
  fingerprint: Buffer;
}

export interface KeyDone {
  key: IdempotencyKey;
  written: Written;
}

/**
 * How a unit writes its parts' rows: `write` on the unit's connection (`settings`: the SET LOCALs
 * it carries when no BEGIN set them); `oneStatement`: one statement that can carry them, so the
 * unit needs no transaction when it has nothing else to do; `beginWith`: for BEGIN's round trip.
 */
export interface RowsStep {
  write: (client: Lending, parts: Part[], settings: string) => Promise<RowCounts[]>;
  oneStatement: boolean;
  beginWith?: string;
}

export interface UnitDeps {
  db: Database;
  keys: KeyStore | undefined;
}

export interface Unit {
  parts: Part[];
  rows: RowsStep;
  limits?: TimeLimits;
}

/** A request or a group for the writer: every part's rows, sorted by email, each once. */
export interface WriteRequest {
  kind: Exclude<WriteKind, 'stream'>;
  rows: UserRow[];
  resolution: Resolution;
  parts: Part[];
}

/**
 * How a chunk is written: `settings`, SET LOCALs before its statement when BEGIN set none;
 * `assertion`, what its statement asserts against erased emails (erasure-guard.js).
 */
export interface ChunkWrite {
  onConflict: OnConflict;
  settings?: string;
  assertion: (rows: readonly UserRow[]) => string;
}

/** Writes one chunk (a stored email fails it, 23505, when `onConflict` is 'fail'). */
export type ChunkWriter = {
  write: (client: Lending, rows: UserRow[], how: ChunkWrite) => Promise<RowCounts>;
  /** Its statement cannot carry the settings (parameters, COPY). */
  needsTransaction?: boolean;
  /** Statements for BEGIN's round trip. */
  beginWith?: (onConflict: OnConflict) => string;
};

/** What the user writer's steps share; `keys`, the Idempotency-Key store, for keyed requests. */
export type Writer = {
  db: Database;
  chunkRows: number;
  chunkWriter: ChunkWriter;
  replays: ReplayGuess;
  policy: WritePolicy;
  keys: KeyStore | undefined;
  erasures: import('./erasure-guard.js').ErasureGuard;
};

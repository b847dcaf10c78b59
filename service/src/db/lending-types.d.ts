// A lending's values (lending.js).
import type { Writable } from 'node:stream';
import type pg from 'pg';
import type { ConnectionState } from '../errors.js';

/** What a lending saw of one failure when it came (the rest is known at the end). */
export type Seen = Omit<ConnectionState, 'commitSent' | 'afterConnectionError'>;

/** Text, or a query config whose `operation` labels its span, or a COPY stream. */
export type Statement =
  string | (pg.QueryConfig & { operation?: string; query_timeout?: number }) | Writable;

export interface LendingOptions {
  /** The connection's own. */
  socket: { readonly destroyed: boolean };
  /** pg's query_timeout. */
  readTimeoutMs?: number;
  /** The default statement_timeout (0 or none: not set). */
  statementTimeoutMs?: number;
  /** A statement's span (tracing/pg-spans.js). */
  trace?: (operation: string | undefined, send: () => any) => any;
}

// The values of the items a request sets aside (quarantine.js) and of their table's statements
// (quarantine-sql.js, scripts/quarantine.js).
import type { Lending } from '../db/lending.js';
import type { Answer, Statement } from '../db/statement.js';
import type { ItemError } from '../errors.js';
import type { UserRow } from '../user-columns.js';
import type { ScopeUsage } from './quarantine.js';

export type { Answer, ItemError, Lending, Statement, UserRow };

/** Why an item was set aside. */
export type QuarantineReason = 'invalid_user' | 'malformed_json' | 'malformed_csv';

/** The body's format. */
export type QuarantineFormat = 'json' | 'ndjson' | 'csv';

/** An item set aside; `item` and `truncated` are kept-item.js's. */
export type QuarantinedItem = {
  position: number;
  line: number | null;
  reason: QuarantineReason;
  errors: ItemError[];
  item: string;
  truncated: boolean;
};

/**
 * Whose and which request: `client` the credential's name (shown), `scope` its kind and name (the
 * key, http/authenticate.js); `requestId` made by the service, `clientRequestId` the client's
 * X-Request-Id (kept beside, never a key); `bound` what a scope's rows may hold in all.
 */
export type QuarantineRequest = {
  client: string;
  scope: string;
  requestId: string;
  clientRequestId?: string;
  format: QuarantineFormat;
  maxInvalid: number;
  bound: ClientBound;
};

/**
 * What a scope's rows may hold in all (QUARANTINE_CLIENT_MAX_BYTES), and what each holds as this
 * process last read it (one per process, shared by its requests).
 */
export type ClientBound = {
  maxBytes: number;
  usage: ScopeUsage;
};

/** A request's items to keep, and whose they are. */
export type KeptBatch = {
  client: string;
  scope: string;
  requestId: string;
  clientRequestId: string | null;
  format: string;
  csvHeader: string | null;
  items: readonly QuarantinedItem[];
};

/** The bytes keeping a batch adds to its scope's, and those the scope holds before. */
export type ScopeBytes = {
  added: number;
  held: number;
};

/** The filters of `npm run quarantine`. */
export type ItemFilters = {
  client?: string;
  request?: string;
  since?: Date;
  until?: Date;
};

/** A line of `list`: a day (UTC), a client scope, a reason, and how many items. */
export type ItemCount = {
  day: string;
  client: string;
  reason: string;
  items: number;
};

/** A kept item as `export` reads it; `id` as PostgreSQL sent it (a bigint), the page's keyset. */
export type KeptRow = {
  id: string;
  client: string;
  clientScope: string;
  requestId: string;
  clientRequestId: string | null;
  receivedAt: Date;
  format: string;
  position: number;
  line: number | null;
  reason: string;
  errors: unknown;
  item: string;
  truncated: boolean;
  csvHeader: string | null;
};

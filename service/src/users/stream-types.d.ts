// A streamed import's values (stream-import.js, checked-body.js, stream-parse.js, copy-from.js):
// its format, its parsers' callbacks, its COPY.
import type { Lending } from '../db/lending.js';
import type { ItemError } from '../errors.js';
import type { Quarantine } from './quarantine.js';
import type { QuarantinedItem } from './quarantine-types.js';

export type { ItemError, Lending, Quarantine, QuarantinedItem };

export type StreamFormat = 'ndjson' | 'csv';

/** A record, the line it starts on, its fields given twice (NDJSON), its text. */
export type OnRecord = (item: unknown, line: number, duplicates: string[], text: string) => void;

/**
 * A record that is not one (an NDJSON line not JSON, a CSV record of another field count): its
 * line, its text, why.
 */
export type OnUnreadable = (line: number, text: string, message: string) => void;

export type RecordParser = {
  feed: (text: string, onRecord: OnRecord) => void;
  end: (onRecord: OnRecord) => void;
  /** A CSV body's header, once read. */
  columns?: readonly string[];
};

export type ParserOptions = {
  /** Told of a record that is not one, instead of refusing the body. */
  onUnreadable?: OnUnreadable;
};

/** A COPY under way; `write` waits while COPY is behind, `error` is its failure so far. */
export type CopyInto = {
  write: (bytes: Buffer) => Promise<void>;
  finish: () => Promise<{ rows: number; error: Error | undefined }>;
  /** It must write nothing. */
  abandon: () => void;
  error: () => Error | undefined;
};

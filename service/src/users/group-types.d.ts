// Group commit's values (group-commit.js): a request waiting for its group, and what a group's
// write and a request's alone share.
import type { Span } from '@opentelemetry/api';
import type { Tracing } from '../tracing/tracing-api.js';
import type { UserWriter } from './user-writer.js';
import type { WritePolicy } from './write-policy.js';
import type { Outcome, Part, Resolution } from './write-types.js';

export type { Outcome, Part, Resolution, Tracing, WritePolicy };

export type Write = UserWriter['write'];

/** What a group written is told of its size, and how long each request waited. */
export type Observe = (group: { requests: number; rows: number; waitedSeconds: number[] }) => void;

/** A request waiting for a write slot, its part of a group's write; `since`: when it came. */
export type Waiting = Part & {
  resolution: Resolution;
  resolve: (outcome: Outcome) => void;
  reject: (err: unknown) => void;
  since: number;
  span: Span | undefined;
};

/** Writes at once, up to a bound. */
export type Slots = { free: () => boolean; hold(write: Promise<unknown>): void };

/**
 * What a group's write and a request's alone share: the writer, the policy, the emails taken, the
 * line of requests to write alone first, the slow lane.
 */
export type Lanes = {
  write: Write;
  policy: WritePolicy;
  tracing: Tracing;
  busy: Set<string>;
  alone: Waiting[];
  slowSlots: Slots;
};

import type { Attributes, Span } from '@opentelemetry/api';
import type { RequestHandler } from 'express';
import type { RequestListener } from 'node:http';

/** A step of a request (admission, body read, validation), recorded as it runs and made a span when the request ends. */
export type Step = { name: string; start: number; end: number | undefined; err: unknown };

/** What the service's parts record spans through: spans.js over the SDK, or tracing.js's NO_TRACING. */
export interface Tracing {
  /** Whether spans are recorded: callers wrap a step only then. */
  enabled: boolean;
  /** The HTTP server's listener with a SERVER span around each request; as is when off. */
  tracedRequests(listener: RequestListener): RequestListener;
  /** An Express middleware as a step of its request; as is when off. */
  tracedMiddleware(name: string, middleware: RequestHandler): RequestHandler;
  /** A step begins (undefined when off or sampled out). */
  startStep(name: string): Step | undefined;
  /** A step ends, failed when err is given. */
  endStep(step: Step | undefined, err?: unknown): void;
  /** An async step in a span of its own (called only when enabled). */
  inSpan<T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T>;
  /** The span active in this async context. */
  activeSpan(): Span | undefined;
  /** Whether the active span is one the sampler kept. */
  activeSpanSampled(): boolean;
  /** A CLIENT span, child of the active one (a pg statement). */
  startClientSpan(name: string, attributes: Attributes): Span | undefined;
  /** A group commit's statement span, linked to the sampled requests it carries. */
  startGroupSpan(requestSpans: (Span | undefined)[], attributes: Attributes): Span | undefined;
  /** Runs fn with span active. */
  runInSpan<T>(span: Span, fn: () => T): T;
  /** Ends a span, failed when err is given. */
  endSpan(span: Span | undefined, err?: unknown): void;
  /** The active span's ids for a log line (pino's mixin). */
  traceFieldsOfLog(): { trace_id?: string; span_id?: string; trace_flags?: string };
  /** Exports what the SDK still holds, on the way out. */
  flush(limitMs?: number): Promise<void>;
}

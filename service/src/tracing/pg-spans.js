// pg's spans: what one says of a statement is its operation and its row count, never its text
// (pg-format inlines the users a statement writes).
import { SETTINGS_PREFIX } from '../db/transaction-settings.js';

// The transaction's SET LOCALs (SETTINGS_PREFIX: transaction-settings.js, which writes them, says
// what they look like), then the now() that user-sql.js puts before a write that returns its rows.
const OPERATION = new RegExp(`${SETTINGS_PREFIX.source}(?:SELECT now\\(\\);\\s*)?([A-Za-z]+)\\b`);

/**
 * A query config as a writer labels it: pg ignores a key it does not know, so the writer that made
 * the statement says what it is (`INSERT`), and its span need not read the text for it.
 * @typedef {import('pg').QueryConfig & { operation?: string }} LabelledQuery
 */

/**
 * The operation of a query nobody labelled (BEGIN, COMMIT, a probe, a COPY): its first keyword,
 * or the keyword after the transaction's settings and the now() before a write that returns its
 * rows (`BEGIN` for the query that opens a transaction with its settings). Nothing past it is
 * read: a literal could hold a user.
 * @param {string | undefined} text
 */
export function operationOf(text) {
  const m = OPERATION.exec(text ?? '');
  return m ? m[1].toUpperCase() : undefined;
}

/**
 * The operation a query's span is named by: its writer's label, else read from its text. A query
 * is a text, a query config (labelled or not), or a COPY stream (pg-copy-streams keeps its
 * statement as text too).
 * @param {unknown} query
 */
export function operationOfQuery(query) {
  if (typeof query === 'string') return operationOf(query);
  const { operation, text } = /** @type {{ operation?: unknown, text?: unknown }} */ (query ?? {});
  return typeof operation === 'string' ? operation : operationOf(typeof text === 'string' ? text : undefined);
}

/**
 * The rows a query affected or returned; of the last statement, when one query held several.
 * @param {unknown} result  pg's QueryResult, or an array of them
 */
export function rowCountOf(result) {
  const last = Array.isArray(result) ? result[result.length - 1] : result;
  const count = /** @type {{ rowCount?: unknown } | undefined} */ (last)?.rowCount;
  return typeof count === 'number' ? count : undefined;
}

/**
 * A pooled client whose queries, made for a traced request, are each a CLIENT span (a child of
 * the active span): OpenTelemetry's database attributes, the operation and the row count, never
 * the statement's text, its values or an error's message. Made here rather than by OpenTelemetry's
 * pg instrumentation, which records the text (then taken off again), puts an error's message on
 * the span's status, and needs an import hook for pg; a query outside a traced request, or in one
 * the sampler left out, costs one check. Called for each new connection, only when tracing is on (db.js).
 * @param {import('pg').ClientBase} client
 * @param {import('./tracing.js').Tracing} tracing
 */
export function traceQueries(client, tracing) {
  const { database = 'postgresql', host, port } = /** @type {{ connectionParameters?: { database?: string, host?: string, port?: number } }} */ (/** @type {unknown} */ (client)).connectionParameters ?? {};
  const query = /** @type {(...args: any[]) => any} */ (client.query);
  const attributes = { 'db.system.name': 'postgresql', 'db.namespace': database, 'server.address': host, 'server.port': port };
  /** @param {any[]} args */
  client.query = /** @type {any} */ (function tracedQuery(/** @type {any[]} */ ...args) {
    // Outside a request the sampler kept, nothing to name or record: the query goes as it came.
    if (!tracing.activeSpanSampled()) return query.apply(this, args);
    const [config] = args;
    const operation = operationOfQuery(config);
    const span = tracing.startClientSpan(`${operation ?? 'query'} ${database}`, operation ? { ...attributes, 'db.operation.name': operation } : attributes);
    if (!span) return query.apply(this, args);
    /** @param {unknown} err @param {unknown} [result] */
    const spanEnds = (err, result) => {
      const rows = err ? undefined : rowCountOf(result);
      if (rows !== undefined) span.setAttribute('db.response.returned_rows', rows);
      tracing.endSpan(span, err ?? undefined);
    };
    const last = args.length - 1;
    if (typeof args[last] === 'function') {
      const callback = args[last];
      args[last] = (/** @type {unknown} */ err, /** @type {unknown} */ result) => {
        spanEnds(err, result);
        callback(err, result);
      };
      return query.apply(this, args);
    }
    const answer = query.apply(this, args);
    if (typeof answer?.then === 'function') {
      answer.then((/** @type {unknown} */ result) => spanEnds(undefined, result), (/** @type {unknown} */ err) => spanEnds(err));
    } else if (typeof answer?.once === 'function') {
      // A COPY stream (pg-copy-streams): its end, or the server's refusal (which may not close it).
      let ended = false;
      const once = (/** @type {unknown} */ err) => {
        if (ended) return;
        ended = true;
        spanEnds(err, answer);
      };
      answer.once('error', once);
      answer.once('close', () => once(undefined));
      answer.once('finish', () => once(undefined));
    } else {
      spanEnds(undefined);
    }
    return answer;
  });
}

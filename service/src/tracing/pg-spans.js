// A statement's span, made by the lending that sends it (db/lending.js): a CLIENT span, a child of
// the active span, named by the operation the statement carries, with its row count; never its
// text, values or an error's message (pg-format inlines the users a statement writes).

/** Of the last statement, when one query held several. @param {unknown} result */
export function rowCountOf(result) {
  const last = Array.isArray(result) ? result[result.length - 1] : result;
  const count = /** @type {{ rowCount?: unknown } | undefined} */ (last)?.rowCount;
  return typeof count === 'number' ? count : undefined;
}

/**
 * How a connection's statements are traced: `send` runs inside a span in a request the sampler
 * kept, and alone otherwise (one check).
 * @param {{ database?: string, host?: string, port?: number }} server
 * @param {import('./tracing.js').Tracing} tracing
 * @returns {(operation: string | undefined, send: () => any) => any}
 */
export function statementTracer({ database = 'postgresql', host, port }, tracing) {
  const attributes = {
    'db.system.name': 'postgresql',
    'db.namespace': database,
    'server.address': host,
    'server.port': port,
  };
  return (operation, send) => {
    if (!tracing.activeSpanSampled()) return send();
    const span = tracing.startClientSpan(
      `${operation ?? 'query'} ${database}`,
      operation ? { ...attributes, 'db.operation.name': operation } : attributes,
    );
    if (!span) return send();
    /** @param {unknown} err @param {unknown} [result] */
    const spanEnds = (err, result) => {
      const rows = err ? undefined : rowCountOf(result);
      if (rows !== undefined) span.setAttribute('db.response.returned_rows', rows);
      tracing.endSpan(span, err ?? undefined);
    };
    let answer;
    try {
      answer = send();
    } catch (err) {
      spanEnds(err);
      throw err;
    }
    if (typeof answer?.then === 'function') {
      answer.then(
        (/** @type {unknown} */ result) => spanEnds(undefined, result),
        (/** @type {unknown} */ err) => spanEnds(err),
      );
    } else if (typeof answer?.once === 'function') {
      // A COPY stream: its end, or the server's refusal (which may not close it).
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
  };
}

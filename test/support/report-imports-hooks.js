// The module hooks of report-imports.js; they run on the loader's thread.
/** @type {import('node:worker_threads').MessagePort | undefined} */
let port;

/** @param {{ port: import('node:worker_threads').MessagePort }} data */
export function initialize(data) {
  port = data.port;
}

/**
 * @param {string} specifier @param {unknown} context
 * @param {(specifier: string, context: unknown) => Promise<unknown>} next
 */
export function resolve(specifier, context, next) {
  if (/@opentelemetry\/|import-in-the-middle/.test(specifier)) port?.postMessage(specifier);
  return next(specifier, context);
}

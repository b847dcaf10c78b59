/**
 * Keeps what the handler writes through Powertools (its log line and its CloudWatch EMF record go
 * straight to process.stdout) for assertions; everything else still reaches stdout.
 */
export function captureHandlerOutput() {
  /** @type {any[]} */ const logs = [];
  /** @type {any[]} */ const metrics = [];
  const originalWrite = process.stdout.write;
  process.stdout.write = /** @type {any} */ (function (/** @type {any} */ chunk, /** @type {any[]} */ ...rest) {
    let line;
    try {
      line = JSON.parse(String(chunk));
    } catch {
      line = undefined;
    }
    if (line?._aws) return metrics.push(line) > 0;
    if (line?.service === 'sluice-feeder') return logs.push(line) > 0;
    return originalWrite.call(process.stdout, chunk, ...rest);
  });
  return { logs, metrics, restore: () => (process.stdout.write = originalWrite) };
}

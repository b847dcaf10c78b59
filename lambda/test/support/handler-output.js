/**
 * Keeps what the handler writes through Powertools (its log lines, warnings on stderr, and its
 * CloudWatch EMF record go straight to the process's streams) for assertions; everything else
 * still reaches the terminal.
 */
export function captureHandlerOutput() {
  /** @type {any[]} */ const logs = [];
  /** @type {any[]} */ const metrics = [];
  /** @param {NodeJS.WriteStream} stream */
  const capture = (stream) => {
    const originalWrite = stream.write;
    stream.write = /** @type {any} */ (
      function (/** @type {any} */ chunk, /** @type {any[]} */ ...rest) {
        let line;
        try {
          line = JSON.parse(String(chunk));
        } catch {
          line = undefined;
        }
        if (line?._aws) return metrics.push(line) > 0;
        if (line?.service === 'sluice-feeder') return logs.push(line) > 0;
        return originalWrite.call(stream, chunk, ...rest);
      }
    );
    return () => {
      stream.write = originalWrite;
    };
  };
  const restores = [capture(process.stdout), capture(process.stderr)];
  return { logs, metrics, restore: () => restores.forEach((restore) => restore()) };
}

import net from 'node:net';

/**
 * Why a server cannot listen on HOST:PORT, in one line; undefined when not about the address.
 * @param {unknown} err @param {{ host: string, port: number }} address
 */
export function listenProblem(err, { host, port }) {
  switch (/** @type {NodeJS.ErrnoException} */ (err)?.code) {
    case 'EADDRINUSE':
      return (
        `port ${port} on ${host} is in use by another process (another \`npm ` +
        `start\`?): stop it, or set PORT to a free port (PORT=0: any free port)`
      );
    case 'EACCES':
      return `not allowed to listen on ${host}:${port}: set PORT to a port above 1023`;
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return (
        `cannot listen on ${host}: it is not an address of this machine; ` +
        `set HOST to one (127.0.0.1, or 0.0.0.0 for every interface)`
      );
    default:
      return undefined;
  }
}

/**
 * Listens on HOST:PORT a moment and lets go, before anything starts: a busy port is said at once.
 * @param {{ host: string, port: number }} address @returns {Promise<string | undefined>}
 */
export function checkCanListen({ host, port }) {
  if (port === 0) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err) => {
      const problem = listenProblem(err, { host, port });
      if (problem) resolve(problem);
      else reject(err);
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}

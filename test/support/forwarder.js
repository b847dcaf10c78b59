import net from 'node:net';

// A TCP forwarder on 127.0.0.1 between the service and PostgreSQL (or a pooler) that counts what
// crosses it: the sessions opened and the simple-protocol queries sent (a round trip each), read
// from the frontend messages; it can be pointed elsewhere, or taken down and up again.

/**
 * @typedef {object} Forwarder
 * @property {number} port
 * @property {() => { sessions: number, queries: number }} counts  since it started
 * @property {(port: number) => void} to  another target; the connections it carries are cut
 * @property {() => void} down  every connection cut, and each new one closed at once
 * @property {() => void} up  forwarding again
 * @property {() => Promise<void>} close
 */

/**
 * Counts the Query messages ('Q') of a frontend stream: the first message (startup, or an SSL
 * request) has no type byte, each after it one byte of type and four of length (its own included).
 */
function queryCounter() {
  let buffered = Buffer.alloc(0);
  let started = false;
  let queries = 0;
  return {
    queries: () => queries,
    /** @param {Buffer} chunk */
    read(chunk) {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const head = started ? 5 : 4;
        if (buffered.length < head) return;
        const length = buffered.readInt32BE(head - 4) + (started ? 1 : 0);
        if (buffered.length < length) return;
        // An SSL request (80877103) is followed by a startup message, also without a type.
        const sslRequest = !started && length === 8 && buffered.readInt32BE(4) === 80877103;
        if (started && buffered[0] === 0x51) queries++;
        if (!sslRequest) started = true;
        buffered = buffered.subarray(length);
      }
    },
  };
}

/** @param {number} target @returns {Promise<Forwarder>} */
export async function startForwarder(target) {
  /** @type {Set<net.Socket>} */ const sockets = new Set();
  /** @type {ReturnType<typeof queryCounter>[]} */ const counters = [];
  let up = true;
  const server = net.createServer((inbound) => {
    if (!up) return inbound.destroy();
    const counter = queryCounter();
    counters.push(counter);
    const outbound = net.connect(target, '127.0.0.1');
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        sockets.delete(s);
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.on('data', (chunk) => counter.read(chunk));
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const cut = () => {
    for (const s of sockets) s.destroy();
  };
  return {
    port: /** @type {net.AddressInfo} */ (server.address()).port,
    counts: () => ({
      sessions: counters.length,
      queries: counters.reduce((sum, c) => sum + c.queries(), 0),
    }),
    to(port) {
      target = port;
      cut();
    },
    down() {
      up = false;
      cut();
    },
    up() {
      up = true;
    },
    close() {
      cut();
      return new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}

/** `url` with its host and port those of `forwarder`. @param {string} url @param {Forwarder} forwarder */
export function throughForwarder(url, forwarder) {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(forwarder.port);
  return String(u);
}

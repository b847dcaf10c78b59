import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';

// Toxiproxy, Shopify's TCP proxy for network faults, between the service and PostgreSQL. Built from
// the Go module proxy once per machine, outside the repository, like ElasticMQ's jars.
export const TOXIPROXY_VERSION = '2.12.0';
const BIN_DIR = path.join(
  process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'),
  'sluice',
  `toxiproxy-${TOXIPROXY_VERSION}`,
);
const BIN = path.join(BIN_DIR, 'server');

/** The toxiproxy server binary, built with `go install` the first time. */
export function ensureToxiproxy({ log = (/** @type {string} */ m) => console.error(m) } = {}) {
  if (existsSync(BIN)) return BIN;
  log(`building Toxiproxy ${TOXIPROXY_VERSION} with go install into ${BIN_DIR} (once)...`);
  const go = spawnSync(
    'go',
    ['install', `github.com/Shopify/toxiproxy/v2/cmd/server@v${TOXIPROXY_VERSION}`],
    {
      env: { ...process.env, GOBIN: BIN_DIR },
      stdio: 'inherit',
    },
  );
  if (go.error || go.status !== 0 || !existsSync(BIN)) {
    // Loud, never skipped: the network-fault tests are part of the suite.
    throw new Error(
      `could not build Toxiproxy with Go (${go.error?.message ?? `exit ${go.status}`}): the network-fault tests need Go and the Go module proxy`,
    );
  }
  return BIN;
}

/** A free port on 127.0.0.1. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts Toxiproxy on 127.0.0.1 and returns its API.
 * @returns {Promise<{ proxy: (name: string, upstream: string) => Promise<Proxy>, stop: () => Promise<void> }>}
 */
export async function startToxiproxy() {
  const bin = ensureToxiproxy();
  const port = await freePort();
  const child = spawn(bin, ['-host', '127.0.0.1', '-port', String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d) => {
    stderr = (stderr + d).slice(-4000);
  });
  const api = `http://127.0.0.1:${port}`;
  /** @param {string} p @param {RequestInit} [init] */
  const call = async (p, init) => {
    const res = await fetch(`${api}${p}`, {
      ...init,
      headers: { 'content-type': 'application/json' },
    });
    if (!res.ok)
      throw new Error(`toxiproxy ${init?.method ?? 'GET'} ${p}: ${res.status} ${await res.text()}`);
    return res.status === 204 ? undefined : res.json();
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await call('/version');
      break;
    } catch (err) {
      if (child.exitCode !== null || Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(
          `toxiproxy did not start: ${/** @type {Error} */ (err).message}\n${stderr}`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  return {
    /**
     * A proxy on a free port of 127.0.0.1 to `upstream` (host:port).
     * @param {string} name @param {string} upstream
     * @returns {Promise<Proxy>}
     */
    async proxy(name, upstream) {
      const listen = `127.0.0.1:${await freePort()}`;
      await call('/proxies', {
        method: 'POST',
        body: JSON.stringify({ name, listen, upstream, enabled: true }),
      });
      return {
        listen,
        /** Drops every byte both ways and closes nothing: a partition, a dead failover. */
        async blackhole() {
          for (const stream of ['upstream', 'downstream']) {
            await call(`/proxies/${name}/toxics`, {
              method: 'POST',
              body: JSON.stringify({
                name: `blackhole-${stream}`,
                type: 'timeout',
                stream,
                attributes: { timeout: 0 },
              }),
            });
          }
        },
        /**
         * Holds every byte one way and closes nothing: `downstream`, PostgreSQL's answers. A statement
         * sent then reaches PostgreSQL and runs (and commits), and its answer never comes.
         * @param {'upstream' | 'downstream'} stream
         */
        async withhold(stream) {
          await call(`/proxies/${name}/toxics`, {
            method: 'POST',
            body: JSON.stringify({
              name: `blackhole-${stream}`,
              type: 'timeout',
              stream,
              attributes: { timeout: 0 },
            }),
          });
        },
        /** Removes every toxic: bytes flow both ways again. */
        async heal() {
          const toxics = /** @type {{ name: string }[]} */ (await call(`/proxies/${name}/toxics`));
          for (const { name: toxic } of toxics)
            await call(`/proxies/${name}/toxics/${toxic}`, { method: 'DELETE' });
        },
      };
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
    },
  };
}

/** @typedef {{ listen: string, blackhole: () => Promise<void>, withhold: (stream: 'upstream' | 'downstream') => Promise<void>, heal: () => Promise<void> }} Proxy */

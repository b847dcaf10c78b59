import { randomUUID } from 'node:crypto';
import cluster from 'node:cluster';
import client from 'prom-client';

const METRICS_REQUEST = 'sluice:metrics-request';
const METRICS_REPLY = 'sluice:metrics-reply';
// A worker that dies this soon after starting is crash-looping: wait before replacing it.
const CRASH_LOOP_MS = 5_000;
const CRASH_LOOP_DELAY_MS = 1_000;
/**
 * A worker's exit code when it cannot listen (the port taken since the primary checked): EX_CONFIG.
 */
export const CANNOT_LISTEN_EXIT_CODE = 78;

// The primary of `WORKERS` mode: forks the workers, replaces any that dies, renders /metrics for
// the whole cluster when a worker asks, and on SIGTERM/SIGINT lets every worker drain, then exits
// 0.
/** @param {import('./config.js').Config} config @param {import('pino').Logger} logger */
export function runPrimary(config, logger) {
  const aggregator = new client.AggregatorRegistry();
  /** @type {Map<number, number>} worker id → start time */
  const startedAt = new Map();
  let stopping = false;

  const fork = () => {
    const worker = cluster.fork();
    startedAt.set(worker.id, Date.now());
  };

  cluster.on('exit', (worker, code, signal) => {
    const lived = Date.now() - (startedAt.get(worker.id) ?? 0);
    startedAt.delete(worker.id);
    if (stopping) {
      if (startedAt.size === 0) {
        logger.info('all workers stopped');
        process.exit(0);
      }
      return;
    }
    if (code === CANNOT_LISTEN_EXIT_CODE) {
      // Its replacement could not listen either; the worker has said why on stderr.
      logger.fatal({ workerPid: worker.process.pid, code }, 'a worker cannot listen; stopping');
      for (const other of Object.values(cluster.workers ?? {})) other?.process.kill('SIGTERM');
      process.exit(1);
    }
    logger.error(
      { workerPid: worker.process.pid, code, signal },
      'worker died; starting a replacement',
    );
    setTimeout(fork, lived < CRASH_LOOP_MS ? CRASH_LOOP_DELAY_MS : 0);
  });

  cluster.on('message', async (worker, message) => {
    if (message?.type !== METRICS_REQUEST) return;
    const text = await aggregator
      .clusterMetrics()
      .catch((err) => `# cluster metrics failed: ${err.message}\n`);
    if (worker.isConnected()) worker.send({ type: METRICS_REPLY, id: message.id, text });
  });

  /** @param {NodeJS.Signals} signal */
  const stop = (signal) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping workers');
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
    if (startedAt.size === 0) process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  logger.info({ workers: config.workers }, 'starting cluster');
  for (let i = 0; i < config.workers; i++) fork();
}

/** In a worker: lets the primary's AggregatorRegistry read this worker's registry. */
export function shareWorkerMetrics(/** @type {client.Registry} */ registry) {
  client.AggregatorRegistry.setRegistries([registry]);
  // Constructing one is what installs prom-client's worker-side listener for the primary's
  // requests.
  new client.AggregatorRegistry();
}

/**
 * In a worker: /metrics asks the primary, so a scrape sees the whole cluster.
 * @returns {Promise<string>}
 */
export function askPrimaryForMetrics() {
  const id = randomUUID();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      process.off('message', onMessage);
      reject(new Error('the cluster primary did not answer the metrics request'));
    }, 5_000);
    /** @param {any} message */
    function onMessage(message) {
      if (message?.type !== METRICS_REPLY || message.id !== id) return;
      clearTimeout(timer);
      process.off('message', onMessage);
      resolve(message.text);
    }
    process.on('message', onMessage);
    process.send?.({ type: METRICS_REQUEST, id });
  });
}

import client from 'prom-client';

/**
 * Everything /metrics exposes, on a registry of its own so tests can build several apps.
 * @param {import('./db.js').Database} [db]  pool gauges are read from it at scrape time
 */
export function createMetrics(db) {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry, prefix: 'sluice_' });
  const registers = [registry];

  const metrics = {
    registry,
    httpRequests: new client.Counter({ name: 'sluice_http_requests_total', help: 'HTTP requests answered', labelNames: ['method', 'route', 'status'], registers }),
    httpDuration: new client.Histogram({
      name: 'sluice_http_request_duration_seconds', help: 'Time to answer a request', labelNames: ['method', 'route'], registers,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    }),
    usersReceived: new client.Counter({ name: 'sluice_users_received_total', help: 'Users received in valid batches', registers }),
    usersInserted: new client.Counter({ name: 'sluice_users_inserted_total', help: 'Users written (new emails)', registers }),
    batchSize: new client.Histogram({ name: 'sluice_batch_size_users', help: 'Users per POST /users', registers, buckets: [1, 10, 100, 500, 1000, 2500, 5000, 10000] }),
    insertDuration: new client.Histogram({
      name: 'sluice_db_insert_duration_seconds', help: 'Time to write one batch, transaction included', registers,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    }),
    groupRequests: new client.Histogram({ name: 'sluice_group_commit_requests', help: 'Requests written together by one group-commit statement', registers, buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500] }),
    groupRows: new client.Histogram({ name: 'sluice_group_commit_rows', help: 'Rows in one group-commit statement', registers, buckets: [1, 10, 50, 100, 250, 500, 1000] }),
    groupWait: new client.Histogram({
      name: 'sluice_group_commit_wait_seconds', help: 'Time a small request waited for its group to be written', registers,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    }),
  };
  if (db) {
    const { pool } = db;
    new client.Gauge({ name: 'sluice_db_pool_connections', help: 'Pooled connections by state', labelNames: ['state'], registers,
      collect() {
        this.set({ state: 'total' }, pool.totalCount);
        this.set({ state: 'idle' }, pool.idleCount);
        this.set({ state: 'waiting' }, pool.waitingCount);
      },
    });
  }
  return metrics;
}

/** @typedef {ReturnType<typeof createMetrics>} Metrics */

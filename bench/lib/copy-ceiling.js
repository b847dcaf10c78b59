import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import copyStreams from 'pg-copy-streams';

/**
 * The ceiling: `rows` users written straight into the table with COPY FROM STDIN, in 1000-row
 * COPYs over `concurrency` connections, without HTTP, JSON or validation.
 * @param {string} databaseUrl
 * @param {{ rows: number, concurrency: number, tag: string }} options
 * @returns {Promise<{ items: number, seconds: number }>}
 */
export async function measureCopyCeiling(databaseUrl, { rows, concurrency, tag }) {
  const chunk = 1000;
  const chunks = Math.ceil(rows / chunk);
  let next = 0;
  const clients = await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const c = new pg.Client(databaseUrl);
      await c.connect();
      return c;
    }),
  );
  // Emails are stored lower-cased (a CHECK says so), so the tag must be too.
  const prefix = `copy-${tag.toLowerCase()}`;
  const started = process.hrtime.bigint();
  try {
    await Promise.all(
      clients.map(async (client) => {
        for (let n = next++; n < chunks; n = next++) {
          let csv = '';
          const size = Math.min(chunk, rows - n * chunk);
          for (let i = 0; i < size; i++)
            csv += `${prefix}-${n}-${i}@load.test,Copy ${n}.${i},+15550100100,\n`;
          await pipeline(
            Readable.from([csv]),
            client.query(
              copyStreams.from(
                'COPY users (email, name, phone, password_hash) FROM STDIN (FORMAT csv)',
              ),
            ),
          );
        }
      }),
    );
    return { items: rows, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
  }
}

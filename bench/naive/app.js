import express from 'express';

/**
 * The endpoint sluice replaces, as the seed article builds it: one parameterized multi-row INSERT
 * per request on a default `pg` pool, no validation, no transaction, no ON CONFLICT. It exists
 * only as the benchmark's baseline: never deploy it.
 * @param {import('pg').Pool} pool
 */
export function createNaiveApp(pool) {
  const app = express();
  // Room for 1000 users per request, as the benchmark sends.
  app.use(express.json({ limit: '10mb' }));
  app.post('/users', async (req, res) => {
    const users = /** @type {any[]} */ (req.body);
    const values = [];
    const rows = [];
    for (const u of users) {
      const i = values.length;
      rows.push(`($${i + 1}, $${i + 2}, $${i + 3}, $${i + 4})`);
      values.push(u.email, u.name, u.phone ?? null, u.passwordHash ?? null);
    }
    const result = await pool.query(
      `INSERT INTO users (email, name, phone, password_hash) VALUES ${rows.join(', ')}`,
      values,
    );
    res.status(201).json({ inserted: result.rowCount });
  });
  // Express's default handler would print the error, whose detail holds the user's email.
  app.use(
    (
      /** @type {any} */ err,
      /** @type {any} */ _req,
      /** @type {any} */ res,
      /** @type {any} */ _next,
    ) => {
      res.status(err.status ?? 500).json({ error: err.code ?? 'error' });
    },
  );
  return app;
}

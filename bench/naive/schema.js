import pg from 'pg';

/**
 * The seed article's table, as a new user would write it: a plain `email text UNIQUE` in the
 * database's default collation, no CHECK constraints.
 */
export const NAIVE_TABLE = `CREATE TABLE users (
  id            serial PRIMARY KEY,
  email         text UNIQUE,
  name          text,
  phone         text,
  password_hash text,
  created_at    timestamptz DEFAULT now()
)`;

/**
 * Creates the naive endpoint's own database (`name`) on the server of `serverUrl`, with its table;
 * resolves with its URL. An existing database of that name is dropped first.
 * @param {string} serverUrl @param {string} [name]
 */
export async function createNaiveDatabase(serverUrl, name = 'naive') {
  const admin = new pg.Client(serverUrl);
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const client = new pg.Client(url.toString());
  await client.connect();
  try {
    await client.query(NAIVE_TABLE);
  } finally {
    await client.end();
  }
  return url.toString();
}

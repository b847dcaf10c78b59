import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { makeUsers } from '../../../test/support/users.js';

const ROOT = new URL('../../../', import.meta.url);
const DOCS = [
  'README.md',
  ...readdirSync(new URL('docs/', ROOT))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const read = (/** @type {string} */ file) => readFileSync(new URL(file, ROOT), 'utf8');
// Labelled by what was answered (route, status): no series until the first answer of each.
// And by whom: sluice_auth_accepted_total's clients are those let in (none without credentials configured).
const LABELLED_BY_ANSWERS = new Set([
  'sluice_http_requests_total',
  'sluice_http_request_duration_seconds',
  'sluice_auth_accepted_total',
  'sluice_client_users_received_total',
  'sluice_client_refused_total',
  'sluice_client_in_flight_bytes',
  'sluice_client_admission_wait_seconds',
  'sluice_idempotent_replays_total',
]);

/**
 * The metric names a Markdown text names: `sluice_...` in code spans (a `{label}` left out, a
 * trailing `*` kept as a prefix), and the short forms that follow one on its line
 * (`sluice_group_commit_requests`, `_rows`: `_rows` replaces the last word).
 * @param {string} markdown
 * @returns {string[]}
 */
export function metricNamesIn(markdown) {
  /** @type {string[]} */
  const names = [];
  for (const line of markdown.split('\n')) {
    let base;
    for (const [, span] of line.matchAll(/`([^`]+)`/g)) {
      const name = span.replace(/\{[^}]*\}$/, '');
      if (/^sluice_[a-z0-9_]*\*?$/.test(name)) {
        names.push(name);
        base = name.replace(/_[a-z0-9]+$/, '');
      } else if (base && /^_[a-z0-9_]+$/.test(name)) {
        names.push(base + name);
      }
    }
  }
  return names;
}

const TOKEN = 'metrics-docs-token-0123456789';

/** The metric families of a Prometheus text, with their sample count. @param {string} text */
function families(text) {
  /** @type {Map<string, number>} */
  const found = new Map();
  for (const m of text.matchAll(/^# TYPE (\S+) \S+$/gm)) found.set(m[1], 0);
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const sample = /^([a-z_:][a-z0-9_:]*)/.exec(line)?.[1] ?? '';
    const family = found.has(sample) ? sample : sample.replace(/_(bucket|sum|count)$/, '');
    if (found.has(family)) found.set(family, /** @type {number} */ (found.get(family)) + 1);
  }
  return found;
}

describe('the metrics the docs name are the ones /metrics exports', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  /** @type {Map<string, number>} */ let atStart;
  /** @type {Map<string, number>} */ let exported;
  before(async () => {
    db = await createTestDatabase();
    // A named client, so that the access metrics have whom they count.
    app = await startTestApp({
      databaseUrl: db.url,
      env: { INGEST_TOKENS: JSON.stringify({ docs: TOKEN }) },
    });
    atStart = families(await (await fetch(`${app.baseUrl}/metrics`)).text());
    // An array and a stream written, so that every family has what it records.
    assert.equal((await app.postUsers(makeUsers(2), { token: TOKEN })).status, 201);
    assert.equal(
      (
        await app.postUsers(
          makeUsers(2)
            .map((u) => JSON.stringify(u))
            .join('\n'),
          { token: TOKEN, contentType: 'application/x-ndjson' },
        )
      ).status,
      201,
    );
    exported = families(await (await fetch(`${app.baseUrl}/metrics`)).text());
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  test('the names are read as the docs write them', () => {
    assert.deepEqual(
      metricNamesIn(
        '| `sluice_group_commit_requests`, `_rows`, `_wait_seconds` | `sluice_admission_shed_total{reason}` (`queue_full`) `sluice_process_*`',
      ),
      [
        'sluice_group_commit_requests',
        'sluice_group_commit_rows',
        'sluice_group_commit_wait_seconds',
        'sluice_admission_shed_total',
        'sluice_process_*',
      ],
    );
  });

  for (const file of DOCS) {
    test(`${file}: every metric it names is exported`, () => {
      for (const name of metricNamesIn(read(file))) {
        const known = name.endsWith('*')
          ? [...exported.keys()].some((f) => f.startsWith(name.slice(0, -1)))
          : exported.has(name);
        assert.ok(known, `${file} names ${name}, which /metrics does not export`);
      }
    });
  }

  test("operations.md names every metric of the service's own (prom-client's by their prefixes)", () => {
    const named = metricNamesIn(read('docs/operations.md'));
    const unnamed = [...exported.keys()].filter(
      (f) =>
        !named.includes(f) && !named.some((n) => n.endsWith('*') && f.startsWith(n.slice(0, -1))),
    );
    assert.deepEqual(unnamed, []);
  });

  test("every family of the service's own has its series from the start (zero until something happens), but those labelled by what was answered", () => {
    // prom-client's defaults are its own business (a GC histogram appears with the first GC).
    const own = (/** @type {Map<string, number>} */ found) =>
      [...found].filter(([family]) => !/^sluice_(process|nodejs)_/.test(family));
    const empty = own(atStart)
      .filter(([family, samples]) => samples === 0 && !LABELLED_BY_ANSWERS.has(family))
      .map(([family]) => family);
    assert.deepEqual(empty, []);
    assert.deepEqual(
      own(exported)
        .filter(([, samples]) => samples === 0)
        .map(([family]) => family),
      [],
      'and all of them once answered',
    );
    assert.ok(
      atStart.get('sluice_admission_shed_total') === 5,
      'each reason of sluice_admission_shed_total at zero',
    );
  });

  test('a streamed import counts in sluice_stream_size_users; an array in sluice_batch_size_users', async () => {
    const text = await (await fetch(`${app.baseUrl}/metrics`)).text();
    assert.match(text, /^sluice_stream_size_users_count 1$/m);
    assert.match(text, /^sluice_batch_size_users_count 1$/m);
    assert.match(text, /^sluice_users_received_total 4$/m);
  });
});

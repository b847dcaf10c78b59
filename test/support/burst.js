import { Agent, request } from 'undici';
import { makeUsers, uniqueTag } from './users.js';

/**
 * @typedef {{ status: number, retryAfter?: string, error?: string }} Answer  status 0: no answer (connection error)
 * @typedef {{ tag: string, users: number, body: string }} Batch
 */

/** @param {number} users @returns {Batch} */
export function makeBatch(users) {
  const tag = uniqueTag();
  return { tag, users, body: JSON.stringify(makeUsers(users, tag)) };
}

/** 2xx, or 503/429 with Retry-After: the answers a well-behaved overloaded service may give. */
export const isAcceptable = (/** @type {Answer} */ a) =>
  (a.status >= 200 && a.status < 300) ||
  ((a.status === 503 || a.status === 429) && a.retryAfter !== undefined);

/**
 * POST /users over an undici Agent with bounded connections, so a burst never runs the client
 * out of sockets: what does not get a connection waits in the client.
 * @param {{ baseUrl: string, connections: number }} options
 */
export function createUsersClient({ baseUrl, connections }) {
  const agent = new Agent({
    connections,
    keepAliveTimeout: 10_000,
    headersTimeout: 120_000,
    bodyTimeout: 120_000,
  });

  /** @param {string} body @returns {Promise<Answer>} */
  async function post(body) {
    try {
      const res = await request(`${baseUrl}/users`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json' },
        body,
      });
      await res.body.dump();
      const retryAfter = res.headers['retry-after'];
      return {
        status: res.statusCode,
        retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined,
      };
    } catch (err) {
      return { status: 0, error: /** @type {any} */ (err)?.code ?? String(err) };
    }
  }

  /**
   * Posts until the batch is stored, waiting Retry-After (plus up to a second of jitter, so the
   * refused do not all come back at once) between tries.
   * @param {string} body @param {number} deadline epoch ms
   * @returns {Promise<{ answer: Answer, tries: number }>}
   */
  async function postUntilStored(body, deadline) {
    for (let tries = 1; ; tries++) {
      const answer = await post(body);
      if (answer.status >= 200 && answer.status < 300) return { answer, tries };
      const waitMs = Number(answer.retryAfter ?? 1) * 1000 + Math.random() * 1000;
      if (!isAcceptable(answer) || Date.now() + waitMs > deadline) return { answer, tries };
      await new Promise((r) => setTimeout(r, waitMs));
    }
  }

  return { post, postUntilStored, close: () => agent.close() };
}

/**
 * The burst of large requests: `large` requests of `usersPerLarge` users at once, then, as soon as the
 * first of them is answered, `singles` single-user requests at once (so they meet the large ones
 * in flight); then every batch not stored is retried after Retry-After until `retryForMs` is up.
 *
 * @param {{ baseUrl: string, large: number, usersPerLarge: number, singles: number, retryForMs: number,
 *   countStored: (tag: string) => Promise<number> }} options
 */
export async function runBurst({
  baseUrl,
  large,
  usersPerLarge,
  singles,
  retryForMs,
  countStored,
}) {
  const largeBatches = Array.from({ length: large }, () => makeBatch(usersPerLarge));
  const singleBatches = Array.from({ length: singles }, () => makeBatch(1));
  const client = createUsersClient({ baseUrl, connections: large + singles });
  try {
    const started = Date.now();
    /** @type {() => void} */
    let firstAnswered = () => {};
    const firstAnswer = new Promise(
      (/** @type {(v?: unknown) => void} */ resolve) => (firstAnswered = resolve),
    );
    const largeAnswers = Promise.all(
      largeBatches.map((b) => client.post(b.body).finally(firstAnswered)),
    );
    await firstAnswer;
    const singleAnswers = await Promise.all(singleBatches.map((b) => client.post(b.body)));
    const firstAnswers = [...(await largeAnswers), ...singleAnswers];
    const burstMs = Date.now() - started;
    const batches = [...largeBatches, ...singleBatches];

    // What was acknowledged must be stored, whole, before anyone retries anything.
    /** @type {string[]} */
    const acknowledgedButMissing = [];
    for (const [i, answer] of firstAnswers.entries()) {
      if (
        answer.status >= 200 &&
        answer.status < 300 &&
        (await countStored(batches[i].tag)) !== batches[i].users
      )
        acknowledgedButMissing.push(batches[i].tag);
    }

    const retryStarted = Date.now();
    const deadline = retryStarted + retryForMs;
    const retried = await Promise.all(
      batches.map((b, i) =>
        firstAnswers[i].status >= 200 && firstAnswers[i].status < 300
          ? undefined
          : client.postUntilStored(b.body, deadline),
      ),
    );
    const drainMs = Date.now() - retryStarted;
    const retryAnswers = retried
      .filter((r) => r !== undefined)
      .map((r) => /** @type {Answer} */ (r?.answer));

    /** @param {Answer[]} answers */
    const byStatus = (answers) =>
      answers.reduce(
        (/** @type {Record<string, number>} */ n, a) => ((n[a.status] = (n[a.status] ?? 0) + 1), n),
        {},
      );
    return {
      burstMs,
      drainMs,
      large: byStatus(firstAnswers.slice(0, large)),
      singles: byStatus(singleAnswers),
      unacceptable: firstAnswers.filter((a) => !isAcceptable(a)),
      acknowledgedButMissing,
      retriedRequests: retried.filter((r) => r !== undefined).length,
      retryTries: retried.reduce((n, r) => n + (r?.tries ?? 0), 0),
      notStoredAfterRetries: retryAnswers.filter((a) => !(a.status >= 200 && a.status < 300))
        .length,
      usersSent: large * usersPerLarge + singles,
    };
  } finally {
    await client.close();
  }
}

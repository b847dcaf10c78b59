/**
 * The soak's record of every group of users it sent and what the service answered, and the check
 * of the table against it. A group is one request's users, named by a prefix: `s12` (one user),
 * `b7` (a batch), `x3` (an invalid batch); its emails are `<prefix>-<index>@soak.test`.
 *
 * A group ends in one of three states:
 * - acked: a 2xx answer; every one of its users must be in the table;
 * - refused: a 4xx/5xx answer (503s retried until the end included); none of its users may be stored;
 * - doubt: an attempt got no answer (network error, timeout) or 503 outcome_unknown, and the last
 *   was no 2xx; all or none may be stored, since a batch is one transaction.
 */

export const EMAIL_DOMAIN = 'soak.test';

/** @typedef {'acked' | 'refused' | 'doubt'} GroupState */

export class Ledger {
  /** @type {Map<string, { size: number, state: GroupState }>} */
  groups = new Map();
  /** Acknowledged groups of valid users, for replays. @type {{ prefix: string, size: number }[]} */
  acked = [];

  /** @param {string} prefix @param {number} size @param {GroupState} state @param {{ replayable?: boolean }} [options] */
  settle(prefix, size, state, { replayable = true } = {}) {
    this.groups.set(prefix, { size, state });
    if (state === 'acked' && replayable) this.acked.push({ prefix, size });
  }

  /** A random acknowledged group, or undefined before the first one. */
  randomAcked() {
    return this.acked.length
      ? this.acked[Math.floor(Math.random() * this.acked.length)]
      : undefined;
  }

  /** @param {GroupState} state */
  count(state) {
    let groups = 0,
      users = 0;
    for (const g of this.groups.values()) {
      if (g.state === state) {
        groups++;
        users += g.size;
      }
    }
    return { groups, users };
  }
}

/**
 * Compares the `users` table with the ledger: every acknowledged user stored, every refused one
 * absent, every group in doubt stored whole or not at all, and nothing stored that was never sent.
 * @param {import('pg').Pool} pool
 * @param {Ledger} ledger
 */
export async function checkTable(pool, ledger) {
  // One row per prefix: with the unique index on email, count = size and indexes 0..size-1 mean
  // exactly the group's emails are there. Emails of no known shape have a NULL prefix.
  const { rows } = await pool.query(
    `SELECT substring(email from $1) AS prefix, count(*)::int AS n,
            min(substring(email from '-([0-9]+)@')::int) AS lo, max(substring(email from '-([0-9]+)@')::int) AS hi
       FROM users GROUP BY 1`,
    [`^([sbx][0-9]+)-[0-9]+@${EMAIL_DOMAIN.replace('.', '\\.')}$`],
  );
  const problems = {
    missing: /** @type {string[]} */ ([]),
    partial: /** @type {string[]} */ ([]),
    unexpected: /** @type {string[]} */ ([]),
    foreignRows: 0,
  };
  let stored = 0;
  const seen = new Set();
  for (const r of rows) {
    stored += r.n;
    if (r.prefix === null) {
      problems.foreignRows += r.n;
      continue;
    }
    seen.add(r.prefix);
    const group = ledger.groups.get(r.prefix);
    const whole =
      group !== undefined && r.n === group.size && r.lo === 0 && r.hi === group.size - 1;
    if (!group || group.state === 'refused')
      problems.unexpected.push(`${r.prefix} (${r.n} rows, ${group ? 'refused' : 'never settled'})`);
    else if (!whole)
      problems.partial.push(`${r.prefix} (${r.n} of ${group.size} rows, ${group.state})`);
  }
  for (const [prefix, g] of ledger.groups) {
    if (g.state === 'acked' && !seen.has(prefix))
      problems.missing.push(`${prefix} (${g.size} users)`);
  }
  const ok =
    !problems.missing.length &&
    !problems.partial.length &&
    !problems.unexpected.length &&
    problems.foreignRows === 0;
  return { ok, stored, ...problems };
}

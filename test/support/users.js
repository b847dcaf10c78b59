import { randomBytes } from 'node:crypto';

export const SAMPLE_HASH =
  '$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG';

/** A tag that keeps one test's emails apart from every other's. */
export const uniqueTag = () => randomBytes(4).toString('hex');

/**
 * Valid users with distinct emails.
 * @param {number} count
 * @param {string} [tag]
 */
export function makeUsers(count, tag = uniqueTag()) {
  return Array.from({ length: count }, (_, i) => ({
    email: `user-${tag}-${i}@example.com`,
    name: `User ${i}`,
    phone: `+1555${String(i).padStart(7, '0')}`,
    passwordHash: SAMPLE_HASH,
  }));
}

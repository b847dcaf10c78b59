// The rate limit's values (rate-limit.js, shared-rate.js, client-directory.js).

/** A client's declared rate, users a second; burst defaults to the rate. */
export interface Rate {
  rate: number;
  burst?: number;
}

export interface Limits {
  rate: number;
  burst: number;
}

/**
 * What limitRate charges: a process's own TokenBucket, or its share of a rate held for the
 * deployment (shared-rate.js), whose `wait` is told of every request first and answers a promise
 * while the share is being leased. rate, burst and policy are the client's declared ones.
 */
export interface RateBucket {
  rate: number;
  burst: number;
  policy: string;
  pending: number;
  wait?: (users: number) => Promise<void> | undefined;
  take: (users: number, now: number) => number;
  settle: (users: number) => void;
  idle: (now: number) => boolean;
  state: (now: number) => string;
}

/** What makes a client's bucket from its declared rate; before: its bucket under its old limits. */
export interface Buckets {
  make: (key: string, rate: Rate, now: number, before?: RateBucket) => RateBucket;
}

/** The leases' statements (db/rate-leases.js's createLeaseStore). */
export interface LeaseStore {
  renew: (renewal: {
    process: string;
    leases: { client: string; demand: number }[];
    released: string[];
    ttlMs: number;
  }) => Promise<{ processes: number; others: Map<string, number[]> }>;
  release: (leases: { process: string; clients: string[] }) => Promise<void>;
  closed: () => boolean;
}

/**
 * statement: one renewal answered, or failed; fallback: on its local share or not; processes: the
 * processes known to lease rates, this one included.
 */
export interface SharedRateMetrics {
  statement: (ok: boolean) => void;
  fallback: (on: boolean) => void;
  processes: (count: number) => void;
}

export interface Timings {
  renewMs: number;
  renewSoonMs: number;
  retryMs: number;
  ttlMs: number;
  waitMs: number;
}

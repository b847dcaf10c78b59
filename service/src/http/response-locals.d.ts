import type { BodyAllowance } from './admission.js';
import type { WriteOptions } from './write-options.js';

// What POST /users's steps leave in res.locals for the steps after them.
declare global {
  namespace Express {
    interface Locals {
      /** Set by readWriteOptions (write-options.js) before anything reads it. */
      write: WriteOptions;
      /** Admission's allowance of a body charged as it is read (admission.js). */
      bodyAllowance?: BodyAllowance;
      /** The rate limit's charge settled to the users a write held (rate-limit.js; answer.js calls it). */
      settleUsers?: (users: number) => void;
    }
  }
}
export {};

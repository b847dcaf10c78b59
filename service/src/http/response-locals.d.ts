import type { BodyAllowance } from './admission.js';
import type { WriteOptions } from './write-options.js';
import type { RequestKey } from './idempotency-key.js';

// What POST /users's steps leave in res.locals for the steps after them.
declare global {
  namespace Express {
    interface Locals {
      /** Set by readWriteOptions (write-options.js) before anything reads it. */
      write: WriteOptions;
      /** The users of a JSON body that give a key twice, when they are to be set aside (json-body.js, invalid=quarantine). */
      duplicateKeys?: import('../errors.js').ItemError[];
      /** The request's Idempotency-Key, when it has one (idempotency-key.js). */
      idempotency?: RequestKey;
      /** Admission's allowance of a body charged as it is read (admission.js). */
      bodyAllowance?: BodyAllowance;
      /**
       * The rate limit's charge settled to the users a write held, once (rate-limit.js; answer.js
       * calls it); refused: raised to them, never lowered (chargeRefused).
       */
      settleUsers?: (users: number, refused?: boolean) => void;
      /** The bytes of the body read (decoded), set by its reader once it stops (json-body.js, post-users-stream.js). */
      bodyBytes?: number;
      /** The users of a JSON body counted once it was parsed to an array (post-users.js). */
      bodyUsers?: number;
    }
  }
}
export {};

import type { Logger } from 'pino';

// What requestLog (request-log.js) adds to every request.
declare module 'http' {
  interface IncomingMessage {
    id: string;
    /** The client's own X-Request-Id when it sent a sane one (then `id` too): its word, never a key. */
    clientRequestId?: string;
    log: Logger;
    /** The client whose credentials were accepted (http/authenticate.js): a configured name, or a JWT's subject. */
    clientName?: string;
    /** Its scope, the credential's kind and name (`token:feeder`, `jwt:billing`): whose Idempotency-Keys these are (http/authenticate.js). */
    clientScope?: string;
    /**
     * Whether its credentials grant erasing users (http/authenticate.js); unset without
     * credentials configured.
     */
    mayErase?: boolean;
    /** Its client as admission and the rate limit see it: weight, cap, token bucket (http/client-directory.js). */
    ingestClient?: import('./client-directory.js').Client;
    /** Why its credentials were refused (http/authenticate.js): the metric's reason, never the credential. */
    refusedBecause?: string;
  }
}

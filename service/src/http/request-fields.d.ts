import type { Logger } from 'pino';

// What requestLog (request-log.js) adds to every request.
declare module 'http' {
  interface IncomingMessage {
    id: string;
    log: Logger;
  }
}
